import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// The sealing transport over real carriers: nothing readable in the shared folder, baselines that a
/// new node loads, and the attacks that need more than one honest object to tell (a second history, a
/// new signer, a progress record rolled back, the wrong key).
@Suite("Sealed transport")
struct SealedTransportTests {
    static let account = "default"

    static func sealed(_ inner: any Transport, _ store: Store, key: AccountKey, ledger: String?, signer: NodeSigningKey = NodeSigningKey()) -> SealedTransport {
        SealedTransport(wrapping: inner, keyring: SealKeyring(account: account, accountKey: key, signingKey: signer), node: NodeID(store.nodeID), ledgerPath: ledger)
    }

    @Test("through a shared folder: no value, name or author is in any file, a sealed baseline bootstraps a new node, and all converge")
    func sharedFolderHoldsNoPlaintext() throws {
        let cluster = try SyncCluster("sealfolder")
        let key = AccountKey.random()
        var retention = RetentionConfiguration(baselineAfterTransactions: 5, progressIntervalMilliseconds: 0, pruneIntervalMilliseconds: 0)
        retention.silentNodeAfterMilliseconds = 30 * 86_400_000
        func engine(_ store: Store) throws -> SyncEngine {
            let folder = try DirectoryTransport(root: cluster.shared, account: Self.account, node: NodeID(store.nodeID))
            return SyncEngine(
                store: store, transport: Self.sealed(folder, store, key: key, ledger: cluster.directory.file("\(store.nodeID).chain")),
                configuration: SyncConfiguration(maximumChangesPerSegment: 4, retention: retention))
        }
        let a = try cluster.store("a"), b = try cluster.store("b")
        let (ea, eb) = (try engine(a), try engine(b))
        var secrets: [String] = []
        for index in 0..<30 {
            let secret = "plaintext-\(index)-\(UUID().uuidString.prefix(8))"
            secrets.append(secret)
            let store = index % 2 == 0 ? a : b
            try store.write(author: "author-secret-zq") { tx in
                try tx.insert("Note", ["id": SyncCluster.id(), "title": .text(secret), "rank": .integer(Int64(index))])
            }
            _ = try (index % 2 == 0 ? ea : eb).sync()
        }
        for _ in 0..<3 {
            _ = try ea.sync()
            _ = try eb.sync()
        }
        // Every byte of every file in the shared folder, before pruning (segments) and after (baselines),
        // searched for every value and the author, as they are and inflated wherever a zlib stream starts.
        var kinds: Set<String> = []
        var haystacks: [[UInt8]] = []
        func collect() throws {
            let enumerator = FileManager.default.enumerator(atPath: cluster.shared)!
            while let path = enumerator.nextObject() as? String {
                let full = cluster.shared + "/" + path
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: full)))
                #expect(SealedHeader.isSealed(bytes), "\(path) is not sealed")
                kinds.insert(String(path.split(separator: ".").last ?? ""))
                haystacks.append(bytes)
            }
        }
        try collect()
        #expect(try ea.writeBaseline() != nil)
        _ = try ea.prune(dryRun: false)
        _ = try eb.prune(dryRun: false)
        try collect()
        // A node that arrives late starts from the sealed baseline.
        let c = try cluster.store("c")
        let ec = try engine(c)
        var loaded: BaselineName?
        for _ in 0..<3 {
            let report = try ec.sync()
            loaded = loaded ?? report.loadedBaseline
        }
        #expect(loaded != nil, "the late node loaded no baseline")
        let expected = try a.syncedTables()
        #expect(try b.syncedTables() == expected && c.syncedTables() == expected)
        #expect(try a.read("SELECT count(*) FROM Note")[0][0] == .integer(30))
        #expect(kinds == ["lseg", "lsprog", "lsbase"], "\(kinds)")
        for haystack in haystacks {
            let found = PlaintextSearch.found(secrets + ["author-secret-zq"], in: haystack)
            #expect(found.isEmpty, "readable in the shared folder: \(found)")
        }
    }

    @Test("a second history of a node's sequences and a new signer for a node are refused, a progress record rolled back is reported and the newer one kept; the wrong key says so")
    func attacksThatNeedMemory() throws {
        let cluster = try SyncCluster("sealmemory")
        let carrier = MemoryCarrier()
        let key = AccountKey.random()
        let writerStore = try cluster.store("writer"), readerStore = try cluster.store("reader")
        let writerNode = NodeID(writerStore.nodeID)
        let signer = NodeSigningKey()
        let writer = Self.sealed(carrier.transport(account: Self.account, node: writerNode), writerStore, key: key, ledger: nil, signer: signer)
        let adversary = AdversarialTransport(wrapping: carrier.transport(account: Self.account, node: NodeID(readerStore.nodeID)))
        let reader = Self.sealed(adversary, readerStore, key: key, ledger: cluster.directory.file("reader.chain"))
        func segment(_ first: UInt64, _ last: UInt64, title: String) throws -> [UInt8] {
            try SegmentFixtures.segment(account: Self.account, node: writerNode.rawValue, first: first, last: last, title: title)
        }
        let one = SegmentName(node: writerNode, firstSequence: 1, lastSequence: 2)
        let two = SegmentName(node: writerNode, firstSequence: 3, lastSequence: 4)
        try writer.publish(one, bytes: try segment(1, 2, title: "first"))
        try writer.publish(two, bytes: try segment(3, 4, title: "second"))
        _ = try reader.read(one, maximumBytes: 1 << 20)
        let ring = SealKeyring(account: Self.account, accountKey: key, signingKey: signer)
        func refusal(_ name: SegmentName) -> TransportError? {
            do {
                _ = try reader.read(name, maximumBytes: 1 << 20)
                return nil
            } catch {
                return error
            }
        }
        // The writer's own key, another history: segment 3-4 naming another predecessor…
        let fork = try Sealer.seal(.segment, first: 3, last: 4, node: writerNode, content: try segment(3, 4, title: "fork"), previous: [UInt8](repeating: 7, count: 32), keyring: ring)
        adversary.attack(two, .serve(fork.bytes, kind: "fork"))
        #expect(refusal(two)?.code == .unsealable && refusal(two)!.message.contains("another history"), "\(String(describing: refusal(two)))")
        // … and other content for sequences already verified here.
        adversary.attack(one, .serve(try Sealer.seal(.segment, first: 1, last: 2, node: writerNode, content: try segment(1, 2, title: "rewritten"), keyring: ring).bytes, kind: "rewrite"))
        #expect(refusal(one)?.message.contains("second history") == true, "\(String(describing: refusal(one)))")
        adversary.heal()
        #expect(refusal(one) == nil && refusal(two) == nil, "the genuine segments read after the lies stopped")
        // A new key for the node: not taken (until devices approve keys, docs/security.md).
        let impostor = SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey())
        let three = SegmentName(node: writerNode, firstSequence: 5, lastSequence: 5)
        adversary.attack(three, .serve(try Sealer.seal(.segment, first: 5, last: 5, node: writerNode, content: try segment(5, 5, title: "x"), keyring: impostor).bytes, kind: "impostor"))
        #expect(refusal(three)?.message.contains("earlier objects") == true, "\(String(describing: refusal(three)))")
        // Progress records: the newer one read, then the older one served again.
        func record(at milliseconds: UInt64) -> [UInt8] {
            ProgressRecord(account: Self.account, node: writerNode, applied: Frontier([writerNode: 4]), prunedThrough: 0, activeAtMilliseconds: milliseconds).encoded()
        }
        try writer.publishProgress(record(at: 1_000))
        let old = try carrier.transport(account: Self.account, node: NodeID("x")).progressRecords()[writerNode]!
        try writer.publishProgress(record(at: 2_000))
        #expect(try reader.progressRecords()[writerNode] != nil)
        adversary.serveProgress(of: writerNode, old)
        let served = try reader.progressRecords()[writerNode].map { try ProgressRecord(decoding: $0) }
        #expect(served?.activeAtMilliseconds == 2_000, "a rolled-back record was taken instead of the newer one: \(String(describing: served))")
        let ignored = try reader.refresh(excluding: NodeID(readerStore.nodeID)).ignored
        #expect(ignored.contains { "\($0.reason)".contains("rolled back") }, "\(ignored)")
        // The wrong key: every object refused, naming the key.
        let stranger = Self.sealed(carrier.transport(account: Self.account, node: NodeID(readerStore.nodeID)), readerStore, key: AccountKey.random(), ledger: nil)
        do {
            _ = try stranger.read(one, maximumBytes: 1 << 20)
            Issue.record("read under the wrong key")
        } catch {
            #expect(error.code == .unsealable && error.message.contains("recovery phrase"), "\(error)")
        }
    }

    @Test("segments pushed again sealed anew — a carrier that lost history, a writer that lost its ledger — are the same segments, not another history")
    func resealedSegmentsAreTheSame() throws {
        let cluster = try SyncCluster("sealreset")
        let key = AccountKey.random()
        let writerStore = try cluster.store("writer"), readerStore = try cluster.store("reader")
        let writerNode = NodeID(writerStore.nodeID)
        let signer = NodeSigningKey()
        let before = MemoryCarrier()
        let writer = Self.sealed(before.transport(account: Self.account, node: writerNode), writerStore, key: key, ledger: cluster.directory.file("w1.chain"), signer: signer)
        func segment(_ sequence: UInt64) throws -> [UInt8] {
            try SegmentFixtures.segment(account: Self.account, node: writerNode.rawValue, first: sequence, last: sequence, title: "n\(sequence)")
        }
        let plain = try (1...6).map(segment)
        for (index, bytes) in plain.enumerated() {
            try writer.publish(SegmentName(node: writerNode, firstSequence: UInt64(index + 1), lastSequence: UInt64(index + 1)), bytes: bytes)
        }
        let readerLedger = cluster.directory.file("reader.chain")
        let reader = Self.sealed(before.transport(account: Self.account, node: NodeID(readerStore.nodeID)), readerStore, key: key, ledger: readerLedger)
        for sequence in UInt64(1)...4 { _ = try reader.read(SegmentName(node: writerNode, firstSequence: sequence, lastSequence: sequence), maximumBytes: 1 << 20) }
        _ = try reader.refresh(excluding: NodeID(readerStore.nodeID))
        // The carrier loses everything; the writer, which also lost its ledger, pushes again from 3 (what
        // it kept) and writes 7: every link differs from the first time.
        let after = MemoryCarrier()
        let again = Self.sealed(after.transport(account: Self.account, node: writerNode), writerStore, key: key, ledger: cluster.directory.file("w2.chain"), signer: signer)
        for sequence in UInt64(3)...6 { try again.publish(SegmentName(node: writerNode, firstSequence: sequence, lastSequence: sequence), bytes: plain[Int(sequence) - 1]) }
        try again.publish(SegmentName(node: writerNode, firstSequence: 7, lastSequence: 7), bytes: try segment(7))
        let resumed = Self.sealed(after.transport(account: Self.account, node: NodeID(readerStore.nodeID)), readerStore, key: key, ledger: readerLedger)
        // The reader had verified through 4: it goes on at 5, whose predecessor is 4 sealed anew.
        for sequence in UInt64(5)...7 {
            let name = SegmentName(node: writerNode, firstSequence: sequence, lastSequence: sequence)
            #expect(throws: Never.self, "sequence \(sequence) pushed again") { _ = try resumed.read(name, maximumBytes: 1 << 20) }
        }
        // Another history under the pushed-again chain is still one.
        let forked = try Sealer.seal(
            .segment, first: 7, last: 7, node: writerNode, content: try segment(7) + [], previous: nil,
            keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: signer))
        let adversary = AdversarialTransport(wrapping: after.transport(account: Self.account, node: NodeID(readerStore.nodeID)))
        let watched = Self.sealed(adversary, readerStore, key: key, ledger: readerLedger)
        let eight = try SegmentFixtures.segment(account: Self.account, node: writerNode.rawValue, first: 8, last: 8, title: "other")
        adversary.attack(
            SegmentName(node: writerNode, firstSequence: 8, lastSequence: 8),
            .serve(try Sealer.seal(.segment, first: 8, last: 8, node: writerNode, content: eight, previous: [UInt8](repeating: 9, count: 32), keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: signer)).bytes, kind: "fork"))
        _ = forked
        _ = try watched.read(SegmentName(node: writerNode, firstSequence: 7, lastSequence: 7), maximumBytes: 1 << 20)
        #expect(throws: TransportError.self) { _ = try watched.read(SegmentName(node: writerNode, firstSequence: 8, lastSequence: 8), maximumBytes: 1 << 20) }
    }

    @Test("an unreadable chain ledger stops the daemon's check instead of starting the checks afresh unnoticed")
    func unreadableLedger() throws {
        let cluster = try SyncCluster("sealledger")
        let store = try cluster.store("a")
        let path = try cluster.directory.write("a.chain", "not json")
        let transport = Self.sealed(MemoryCarrier().transport(account: Self.account, node: NodeID(store.nodeID)), store, key: AccountKey.random(), ledger: path)
        do {
            try transport.checkAccount()
            Issue.record("an unreadable ledger was taken as empty")
        } catch {
            #expect(error.message.contains("cannot be read"), "\(error)")
        }
    }
}
