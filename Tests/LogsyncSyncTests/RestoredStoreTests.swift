import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// A store restored from an older backup and written to takes a new node id instead of forking its node's
/// history (`docs/operations.md`, "Restoring a store from a backup"): plain and sealed, nothing refused or
/// quarantined on any node, and everything every node wrote everywhere.
@Suite("a store restored from a backup")
struct RestoredStoreTests {
    @Test(
        "restored from a backup taken before its last writes (some not yet exported), then written to: a new node id, 0 forks, 0 refused, every write on every node",
        arguments: [false, true])
    func restoredBackupStartsANewHistory(sealed: Bool) throws {
        let cluster = try SyncCluster(sealed ? "restore-sealed" : "restore")
        let key = AccountKey.random()
        // As syncd keeps them beside the store: one signing key per node id, kept across a restore.
        var signers: [String: NodeSigningKey] = [:]
        func engine(_ store: Store) throws -> SyncEngine {
            let signer = signers[store.nodeID] ?? NodeSigningKey()
            signers[store.nodeID] = signer
            let folder = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(store.nodeID))
            // As syncd keeps them: a signing key and a chain ledger per node id.
            let transport: any Transport =
                sealed
                ? SealedTransport(
                    wrapping: folder, keyring: SealKeyring(account: "default", accountKey: key, signingKey: signer), node: NodeID(store.nodeID),
                    ledgerPath: cluster.directory.file("\(store.nodeID).chain"))
                : folder
            return SyncEngine(store: store, transport: transport, configuration: SyncConfiguration(maximumChangesPerSegment: 2))
        }
        func add(_ title: String, to store: Store) throws {
            try store.write { tx in try tx.insert("Note", ["id": SyncCluster.id(), "title": .text(title), "rank": .integer(0)]) }
        }
        func titles(_ store: Store) throws -> Set<String> {
            Set(try store.read("SELECT title FROM Note").compactMap { row -> String? in
                if case .text(let title) = row[0] { return title }
                return nil
            })
        }
        var a: Store? = try cluster.store("a")
        let b = try cluster.store("b")
        let eb = try engine(b)
        var ea: SyncEngine? = try engine(a!)
        let old = a!.nodeID
        for index in 0..<5 { try add("before the backup \(index)", to: a!) }
        _ = try ea!.sync()
        // Two writes the backup holds but that a had not exported when it was taken.
        try add("in the backup, not yet exported 0", to: a!)
        try add("in the backup, not yet exported 1", to: a!)
        let backup = cluster.directory.file("backup.sqlite")
        try a!.copy(to: backup)
        // What a writes after the backup reaches b, and is lost with a's disk.
        for index in 0..<5 { try add("after the backup \(index)", to: a!) }
        _ = try ea!.sync()
        _ = try eb.sync()
        // a's disk is lost; its store is restored from the backup.
        (a, ea) = (nil, nil)
        for file in AccountStores.files(of: cluster.storePath("a")) { try? FileManager.default.removeItem(atPath: file) }
        try FileManager.default.copyItem(atPath: backup, toPath: cluster.storePath("a"))

        // Restored and written to before its first round.
        var restored = try cluster.store("a")
        #expect(restored.nodeID == old)
        try add("after the restore", to: restored)
        let found = #expect(throws: StoreRestored.self) { try engine(restored).sync() }
        #expect(found?.old.rawValue == old && found?.exported == 5 && found?.carrierHead == 12, "\(String(describing: found))")
        restored = try cluster.store("a")
        #expect(restored.nodeID != old, "the restored store took a new node id")
        let er = try engine(restored)
        for _ in 0..<3 {
            _ = try er.sync()
            _ = try eb.sync()
        }
        var expected: Set<String> = ["after the restore"]
        for index in 0..<5 { expected.formUnion(["before the backup \(index)", "after the backup \(index)"]) }
        expected.formUnion(["in the backup, not yet exported 0", "in the backup, not yet exported 1"])
        #expect(try titles(restored) == expected, "the restored node got back what it wrote after the backup")
        #expect(try titles(b) == expected)
        #expect(try restored.syncedTables() == b.syncedTables())
        for store in [restored, b] {
            #expect(try store.sync.quarantined().isEmpty && store.sync.refusals().isEmpty, "nothing refused on \(store.nodeID)")
        }
        // The new history starts at sequence 1 under the new id; the old id's stays as it was.
        let names = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID)).ownSegments(of: NodeID(restored.nodeID))
        #expect(names.first?.firstSequence == 1)
        #expect(try eb.transport.ownSegments(of: NodeID(old)).map(\.lastSequence).max() == 12)
    }

    @Test("a name planted in the carrier past a healthy node's history does not make its store take a new id")
    func plantedNameIsNoRestore() throws {
        let cluster = try SyncCluster("restore-planted")
        let a = try cluster.store("a")
        let engine = try cluster.engine(a)
        try a.write { tx in try tx.insert("Note", ["id": SyncCluster.id(), "title": .text("one"), "rank": .integer(0)]) }
        _ = try engine.sync()
        let name = SegmentName(node: NodeID(a.nodeID), firstSequence: 2, lastSequence: 500)
        FileManager.default.createFile(atPath: cluster.shared + "/default/\(a.nodeID)/" + name.fileName, contents: Data("not a segment".utf8))
        let fresh = try cluster.engine(a)
        _ = try? fresh.sync()
        #expect(try Store(path: cluster.storePath("a"), schema: cluster.storeSchema).nodeID == a.nodeID, "the node id is kept")
    }
}
