import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
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
        #expect(try eb.writeBaseline() != nil)
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

        // b, then c.
        eb = try sealed(b)
        try add("sealed b-0", to: b)
        try add("plain c after b sealed", to: c)
        try rounds([ea, eb, ec])
        ec = try sealed(c)
        for store in [a, b, c] { try add("sealed \(store.nodeID)", to: store) }
        try rounds([ea, eb, ec])
        for store in [a, b, c] {
            #expect(try titles(store) == written, "node \(store.nodeID) holds every write")
            #expect(try store.sync.quarantined().isEmpty, "nothing quarantined on \(store.nodeID)")
        }
        #expect(try a.syncedTables() == b.syncedTables() && b.syncedTables() == c.syncedTables())

        // Each node prunes its plain segments once the others applied them, and its plain baseline went
        // when its sealed one was published: nothing plain is left.
        for _ in 0..<2 {
            try rounds([ea, eb, ec], 1)
            for engine in [ea, eb, ec] { _ = try engine.prune(dryRun: false) }
        }
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
}
