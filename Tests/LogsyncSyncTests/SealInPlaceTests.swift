import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Synchronization
import Testing

/// An account that synced unsealed is sealed in place, one node after another (`[seal] from_plain`,
/// docs/security.md "Sealing a plain account"): nothing written before, during or after is lost, the
/// carrier ends with nothing plain in it, a new device starts from a sealed baseline, and the plain
/// history cannot be used by a carrier to slip plain segments into the sealed account.
@Suite("sealing a plain account in place")
struct SealInPlaceTests {
    @Test("three nodes sealed one after another while they write: every write everywhere, 0 quarantined, then nothing plain on the carrier and a new device starts sealed")
    func sealedOneNodeAfterAnother() throws {
        let cluster = try SyncCluster("seal-in-place")
        let key = AccountKey.random()
        var signers: [String: NodeSigningKey] = [:]
        var retention = RetentionConfiguration()
        retention.progressIntervalMilliseconds = 0
        let configuration = SyncConfiguration(maximumChangesPerSegment: 2, retention: retention)
        func plain(_ store: Store) throws -> SyncEngine {
            SyncEngine(store: store, transport: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(store.nodeID)), configuration: configuration)
        }
        func sealed(_ store: Store, fromPlain: Bool = true) throws -> SyncEngine {
            let signer = signers[store.nodeID] ?? NodeSigningKey()
            signers[store.nodeID] = signer
            let transport = SealedTransport(
                wrapping: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(store.nodeID)),
                keyring: SealKeyring(account: "default", accountKey: key, signingKey: signer), node: NodeID(store.nodeID),
                ledgerPath: cluster.directory.file("\(store.nodeID).chain"), fromPlain: fromPlain, rebaselineInterval: .zero)
            try transport.checkAccount()
            return SyncEngine(store: store, transport: transport, configuration: configuration)
        }
        var written: Set<String> = []
        func add(_ title: String, to store: Store) throws {
            try store.write { tx in try tx.insert("Note", ["id": SyncCluster.id(), "title": .text(title), "rank": .integer(0)]) }
            written.insert(title)
        }
        func titles(_ store: Store) throws -> Set<String> {
            Set(try store.read("SELECT title FROM Note").compactMap { row -> String? in
                if case .text(let title) = row[0] { return title }
                return nil
            })
        }
        func rounds(_ engines: [SyncEngine], _ count: Int = 3) throws {
            for _ in 0..<count { for engine in engines { _ = try engine.sync() } }
        }

        let (a, b, c) = (try cluster.store("a"), try cluster.store("b"), try cluster.store("c"))
        // A plain account, with a plain baseline of b's.
        var (ea, eb, ec) = (try plain(a), try plain(b), try plain(c))
        for (index, store) in [a, b, c].enumerated() {
            for step in 0..<3 { try add("plain \(index)-\(step)", to: store) }
        }
        try rounds([ea, eb, ec])
        let plainBaseline = try #require(try eb.writeBaseline())
        let plainBaselineBytes = try Data(contentsOf: URL(fileURLWithPath: cluster.shared + "/default/\(b.nodeID)/" + plainBaseline.fileName))
        let plainSegment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: cluster.shared + "/default/\(a.nodeID)").first { $0.hasSuffix(".lseg") })
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: cluster.shared + "/default/\(a.nodeID)/" + plainSegment))

        // a is sealed; b and c write on unsealed.
        ea = try sealed(a)
        try add("sealed a-0", to: a)
        try add("plain b after a sealed", to: b)
        try add("plain c after a sealed", to: c)
        try rounds([ea, eb, ec])
        #expect(try titles(a).isSuperset(of: ["plain b after a sealed", "plain c after a sealed"]), "a reads the others' plain history")
        #expect(try !titles(b).contains("sealed a-0"), "a plain node cannot read a sealed segment")
        let held = try eb.prune(dryRun: true)
        #expect(held.wouldDelete.isEmpty && held.explanation.contains { $0.contains("is sealed") }, "a plain node deletes nothing while a sealed node's progress is unreadable: \(held.explanation)")

        // b, then c; a device that joins with the phrase alone meanwhile cannot read what c writes unsealed,
        // and gets past it from c's sealed baseline once c is sealed.
        eb = try sealed(b)
        try add("sealed b-0", to: b)
        try add("plain c after b sealed", to: c)
        try rounds([ea, eb, ec])
        let e = try cluster.store("e")
        let ee = try sealed(e, fromPlain: false)
        try add("plain c while e joins", to: c)
        try rounds([ea, eb, ec, ee])
        // e refused c's plain segments, or took them inside a's or b's newer sealed baseline.
        #expect(try !e.sync.refusals().isEmpty || titles(e).contains("plain c while e joins"))
        ec = try sealed(c)
        for store in [a, b, c, e] { try add("sealed \(store.nodeID)", to: store) }
        try rounds([ea, eb, ec, ee])
        for store in [a, b, c, e] {
            #expect(try titles(store) == written, "node \(store.nodeID) holds every write")
            #expect(try store.sync.quarantined().isEmpty, "nothing quarantined on \(store.nodeID)")
        }
        #expect(try a.syncedTables() == b.syncedTables() && b.syncedTables() == c.syncedTables() && c.syncedTables() == e.syncedTables())

        // Each node prunes its plain segments once the others applied them, and its plain baseline went
        // when its sealed one was published: nothing plain is left.
        for _ in 0..<2 {
            try rounds([ea, eb, ec, ee], 1)
            for engine in [ea, eb, ec, ee] { _ = try engine.prune(dryRun: false) }
        }
        #expect(try e.sync.refusals().isEmpty, "what e refused is covered by c's sealed baseline")
        var files = 0
        let root = cluster.shared + "/default"
        for folder in try FileManager.default.contentsOfDirectory(atPath: root) {
            for file in try FileManager.default.contentsOfDirectory(atPath: root + "/" + folder) where !file.hasPrefix(".") {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + folder + "/" + file)))
                files += 1
                #expect(SealedHeader.isSealed(bytes), "\(folder)/\(file) is sealed")
                let found = PlaintextSearch.found(Array(written), in: bytes)
                #expect(found.isEmpty, "\(folder)/\(file) holds no test value in plain: \(found)")
            }
        }
        #expect(files >= 6, "segments, progress records and baselines are left, sealed (\(files) files)")

        // A new device with the phrase only starts from a sealed baseline and reads everything.
        let d = try cluster.store("d")
        let ed = try sealed(d, fromPlain: false)
        let report = try ed.sync()
        _ = try ed.sync()
        #expect(report.loadedBaseline != nil, "the new device started from a baseline")
        #expect(try titles(d) == written)
        #expect(try d.sync.quarantined().isEmpty && d.sync.refusals().isEmpty)

        // A plain baseline is never read, even by a device sealing with from_plain: it is a whole store.
        // One planted with the highest count is passed over for the sealed ones.
        let planted = BaselineName(node: NodeID(b.nodeID), transactionCount: 1_000_000, frontierDigest: plainBaseline.frontierDigest)
        try plainBaselineBytes.write(to: URL(fileURLWithPath: root + "/\(b.nodeID)/" + planted.fileName))
        let f = try cluster.store("f")
        let ef = try sealed(f)
        #expect(try ef.sync().loadedBaseline != planted)
        _ = try ef.sync()
        #expect(try titles(f) == written)
        try FileManager.default.removeItem(atPath: root + "/\(b.nodeID)/" + planted.fileName)

        // The plain history cannot be used to slip plain segments in: a plain copy past a's first sealed
        // segment, and a plain segment of a node the account did not have when it was sealed, are refused.
        let aHead = try ea.transport.ownSegments(of: NodeID(a.nodeID)).map(\.lastSequence).max() ?? 0
        let past = SegmentName(node: NodeID(a.nodeID), firstSequence: aHead + 1, lastSequence: aHead + 1)
        try plainBytes.write(to: URL(fileURLWithPath: root + "/\(a.nodeID)/" + past.fileName))
        let stranger = NodeID(UUID().uuidString.lowercased())
        try FileManager.default.createDirectory(atPath: root + "/\(stranger)", withIntermediateDirectories: true)
        try plainBytes.write(to: URL(fileURLWithPath: root + "/\(stranger)/" + SegmentName(node: stranger, firstSequence: 1, lastSequence: 1).fileName))
        _ = try eb.sync()
        let refusals = try b.sync.refusals()
        #expect(refusals.contains { $0.node.rawValue == a.nodeID && $0.firstSequence == aHead + 1 && $0.reason.contains("a plain copy of a sealed history") }, "\(refusals)")
        #expect(refusals.contains { $0.node == stranger && $0.reason.contains("was not a node of the account") }, "\(refusals)")
        #expect(try titles(b) == written, "nothing of them applied")
    }

    @Test("a plain node holds pruning back for a sealed progress record, not for a waiting device's placeholder, and not for a record that stays the same past the silence limit")
    func pruningHeldBySealedRecords() throws {
        let cluster = try SyncCluster("seal-in-place-hold")
        let clock = Mutex<UInt64>(1_000_000)
        var retention = RetentionConfiguration(silentNodeAfterMilliseconds: 3_600_000, baselineAfterTransactions: 1, pruneIntervalMilliseconds: 1 << 62)
        retention.progressIntervalMilliseconds = 0
        retention.clock = { clock.withLock { $0 } }
        let configuration = SyncConfiguration(maximumChangesPerSegment: 2, retention: retention)
        let (a, b) = (try cluster.store("a"), try cluster.store("b"))
        func plain(_ store: Store) throws -> SyncEngine {
            SyncEngine(store: store, transport: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(store.nodeID)), configuration: configuration)
        }
        let (ea, eb) = (try plain(a), try plain(b))
        for index in 0..<4 {
            try a.write { tx in try tx.insert("Note", ["id": SyncCluster.id(), "title": .text("hold \(index)"), "rank": .integer(0)]) }
        }
        for _ in 0..<3 {
            _ = try ea.sync()
            _ = try eb.sync()
        }
        let before = try ea.prune(dryRun: true)
        #expect(!before.wouldDelete.isEmpty, "a could prune before any sealed record: \(before.explanation) \(before.holdingBack)")
        // A device waiting for approval publishes a placeholder: not a node that applied anything.
        let waiting = NodeID(UUID().uuidString.lowercased())
        let placeholder = SealedTransport(
            waitingForApprovalOf: "default", wrapping: try DirectoryTransport(root: cluster.shared, account: "default", node: waiting), signingKey: NodeSigningKey(),
            node: waiting, ledgerPath: nil, rosterPath: nil)
        #expect(throws: TransportError.self) { try placeholder.refresh(excluding: waiting) }
        #expect(try !ea.prune(dryRun: true).wouldDelete.isEmpty, "a placeholder holds nothing back")
        // A sealed node's record holds everything back...
        let c = try cluster.store("c")
        let sealed = SealedTransport(
            wrapping: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(c.nodeID)),
            keyring: SealKeyring(account: "default", accountKey: AccountKey.random(), signingKey: NodeSigningKey()), node: NodeID(c.nodeID), ledgerPath: nil,
            fromPlain: true)
        _ = try SyncEngine(store: c, transport: sealed, configuration: configuration).sync()
        let held = try ea.prune(dryRun: true)
        #expect(held.wouldDelete.isEmpty && held.explanation.contains { $0.contains("is sealed") }, "\(held.explanation)")
        // ...until it has stayed the same for longer than a silent node's.
        clock.withLock { $0 += 3_600_001 }
        #expect(try !ea.prune(dryRun: true).wouldDelete.isEmpty, "an unchanged sealed record past the silence limit holds nothing back")
    }
}
