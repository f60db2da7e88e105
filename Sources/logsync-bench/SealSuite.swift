import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport

/// `seal`: what sealing an account costs (`docs/security.md`), against the same account plain in the same
/// run.
///
/// Setup (untimed): N Note inserts written into a source store in transactions of 1,000 rows and exported
/// as segments of at most 1,000 changes; each segment published into a plain shared folder as it is, and
/// into a sealed one through `SealedTransport` (which seals it: ChaCha20-Poly1305, Ed25519, the chain).
///
/// - Bytes: the sealed folder's segments against the plain folder's, per change.
/// - Replay: each round, a fresh store syncs every segment from one folder with `SyncEngine.sync()` (the
///   path syncd takes: read, open and check on the prefetching thread, decode, import), then a fresh store
///   does the same from the other; which goes first alternates. The ratio is the plain time over the sealed
///   time (≥ 1 would be sealed faster), the median of the rounds'.
/// - Open: sealing and opening throughput alone, on one core.
/// - Revoke: revoking 1 of 10 devices, in CPU time and bytes written (``revocation(in:key:)``).
struct SealSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Sealed accounts against plain ones: bytes per change and replay throughput through the engine.")

    @OptionGroup var options: SuiteOptions

    static let suite = "seal"
    static let account = "bench"
    static let maximumChanges = 1_000

    struct Sizes {
        var changes: Int
        var rounds: Int
        static let full = Sizes(changes: 200_000, rounds: 5)
        static let quick = Sizes(changes: 20_000, rounds: 3)
    }

    func run() throws {
        let sizes = options.quick ? Sizes.quick : Sizes.full
        Report.progress(
            "seal: \(grouped(sizes.changes)) Note inserts in transactions of \(grouped(SegmentFixture.transactionRows)) rows, segments of at most "
                + "\(grouped(Self.maximumChanges)) changes, \(sizes.rounds) rounds; \(ProcessInfo.processInfo.activeProcessorCount) cores")
        try withTemporaryDirectory { directory in
            let plainFolder = directory.file("plain"), sealedFolder = directory.file("sealed")
            for folder in [plainFolder, sealedFolder] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
            let key = AccountKey.random()
            var plainBytes = 0, sealedBytes = 0, segments = 0
            var openSeconds = 0.0, sealSeconds = 0.0
            let readerRing = SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey())
            do {
                let rows = NoteFixture.rows(count: sizes.changes)
                let source = try SegmentFixture.sourceStore(rows[...], at: directory.file("source.sqlite"))
                _ = try source.sync.exportToOutbox(account: Self.account, maximumChanges: Self.maximumChanges)
                let node = NodeID(source.nodeID)
                let plain = try DirectoryTransport(root: plainFolder, account: Self.account, node: node)
                let writerRing = SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey())
                let sealed = SealedTransport(
                    wrapping: try DirectoryTransport(root: sealedFolder, account: Self.account, node: node), keyring: writerRing, node: node, ledgerPath: nil)
                var previous: [UInt8]?
                for segment in try source.sync.unpublishedSegments() {
                    let name = SegmentName(node: node, firstSequence: segment.firstSequence, lastSequence: segment.lastSequence)
                    try plain.publish(name, bytes: segment.bytes)
                    try sealed.publish(name, bytes: segment.bytes)
                    plainBytes += segment.bytes.count
                    sealedBytes += try sealed.inner.read(name, maximumBytes: 1 << 26).count
                    segments += 1
                    // Sealing and opening alone.
                    var made: Sealer.Sealed?
                    sealSeconds += try timed {
                        made = try Sealer.seal(
                            .segment, first: name.firstSequence, last: name.lastSequence, node: node, content: segment.bytes, previous: previous, keyring: writerRing)
                    }
                    previous = made!.link
                    openSeconds += try timed { _ = try Sealer.open(made!.bytes, kind: .segment, keyring: readerRing, maximumBytes: 1 << 26) }
                }
            }
            let perChange = Double(sealedBytes - plainBytes) / Double(sizes.changes)
            Report.progress(
                "  \(segments) segments: plain \(grouped(plainBytes)) B, sealed \(grouped(sealedBytes)) B "
                    + "(+\(grouped(sealedBytes - plainBytes)) B, \(formatted(perChange, decimals: 3)) B per change); "
                    + "sealing \(formatted(Double(plainBytes) / sealSeconds / 1e6, decimals: 1)) MB/s, opening \(formatted(Double(plainBytes) / openSeconds / 1e6, decimals: 1)) MB/s")

            var ratios: [Double] = []
            for round in 0..<sizes.rounds {
                var plainTime = 0.0, sealedTime = 0.0
                for sealedSide in (round % 2 == 0 ? [false, true] : [true, false]) {
                    let path = directory.file("target-\(round)-\(sealedSide).sqlite")
                    let store = try Store(path: path, schema: NoteFixture.schema)
                    let folder = try DirectoryTransport(root: sealedSide ? sealedFolder : plainFolder, account: Self.account, node: NodeID(store.nodeID))
                    let transport: any Transport =
                        sealedSide
                        ? SealedTransport(
                            wrapping: folder, keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey()),
                            node: NodeID(store.nodeID), ledgerPath: nil)
                        : folder
                    let engine = SyncEngine(
                        store: store, transport: transport,
                        configuration: SyncConfiguration(
                            account: Self.account, maximumChangesPerSegment: Self.maximumChanges, retention: RetentionConfiguration(enabled: false)))
                    var report = SyncReport()
                    let seconds = try timed { report = try engine.sync() }
                    guard report.appliedTransactions == sizes.changes / SegmentFixture.transactionRows, report.rejected.isEmpty else {
                        throw BenchError("the \(sealedSide ? "sealed" : "plain") replay applied \(report.appliedTransactions) transactions: \(report.rejected)")
                    }
                    if sealedSide { sealedTime = seconds } else { plainTime = seconds }
                    try? FileManager.default.removeItem(atPath: path)
                }
                ratios.append(plainTime / sealedTime)
                Report.progress("  round \(round + 1)/\(sizes.rounds): plain \(formatted(plainTime)) s, sealed \(formatted(sealedTime)) s, ratio \(formatted(plainTime / sealedTime, decimals: 3))")
            }
            Report.emit(metric("sealed_bytes_per_change_over_plain", perChange, unit: "B", goal: 2, .lower, decimals: 3))
            Report.emit(metric("replay_sealed_vs_plain", Stats.median(ratios), unit: "x", goal: 0.95, .higher, decimals: 3))
            Report.emit(metric("seal_mb_per_s", Double(plainBytes) / sealSeconds / 1e6, unit: "MB/s", goal: nil, .higher, decimals: 1))
            Report.emit(metric("open_mb_per_s", Double(plainBytes) / openSeconds / 1e6, unit: "MB/s", goal: nil, .higher, decimals: 1))
            try revocation(in: directory.file("devices"), key: key)
        }
    }

    /// Revoking 1 of 10 devices: one member holds the phrase and approved the nine others (untimed); the
    /// revocation — reading the slots, a new epoch key wrapped with HPKE to 9 members and the phrase, the
    /// roster signed, the member's slot sealed again and published — is timed in CPU seconds of the
    /// process (`getrusage`), and the bytes it writes are the slot it replaces.
    func revocation(in folder: String, key: AccountKey) throws {
        var revokeCPU: [Double] = []
        var written: [Double] = []
        for round in 0..<3 {
            let root = folder + "-\(round)"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            func transport(_ node: NodeID, phrase: Bool) throws -> SealedTransport {
                let inner = try DirectoryTransport(root: root, account: Self.account, node: node)
                return phrase
                    ? SealedTransport(
                        wrapping: inner, keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey()), node: node, ledgerPath: nil)
                    : SealedTransport(waitingForApprovalOf: Self.account, wrapping: inner, signingKey: NodeSigningKey(), node: node, ledgerPath: nil, rosterPath: nil)
            }
            let nodes = (0..<10).map { _ in NodeID(UUID().uuidString.lowercased()) }
            let member = try transport(nodes[0], phrase: true)
            let others = try nodes.dropFirst().map { try transport($0, phrase: false) }
            for device in others { _ = try? device.refresh(excluding: nodes[0]) }  // each publishes its card
            for device in others { _ = try member.approve(fingerprint: device.signingKeyFingerprint) }
            let start = ProcessUsage.cpuTime
            _ = try member.revoke(nodes[9].rawValue)
            revokeCPU.append((ProcessUsage.cpuTime - start) / .seconds(1))
            written.append(Double(try member.inner.progressRecords()[nodes[0]]?.count ?? 0))
            Report.progress("  round \(round + 1)/3: revoking 1 of 10 devices took \(formatted(revokeCPU.last! * 1000)) ms of CPU and wrote \(grouped(Int(written.last!))) bytes")
        }
        Report.emit(metric("revoke_cpu_ms", Stats.median(revokeCPU) * 1000, unit: "ms", goal: 1000, .lower, decimals: 2))
        Report.emit(metric("revoke_bytes_written", Stats.median(written), unit: "B", goal: 10_240, .lower, decimals: 0))
    }
}
