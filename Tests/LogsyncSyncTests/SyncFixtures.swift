import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport

/// Stores that sync through one shared folder, all inside one temporary directory.
final class SyncCluster {
    static let schema = Schema.convergence


    let directory: TemporaryDirectory
    let shared: String
    let schemaFile: String
    /// The schema of the stores ``store(_:)`` opens.
    let storeSchema: Schema

    init(_ label: String = "sync", schema: Schema = SyncCluster.schema) throws {
        storeSchema = schema
        directory = try TemporaryDirectory(label)
        shared = directory.file("shared")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        schemaFile = try directory.write("schema.json", schema.json)
    }

    func storePath(_ name: String) -> String { directory.file("\(name).sqlite") }

    func store(_ name: String) throws -> Store {
        try Store(path: storePath(name), schema: storeSchema)
    }

    func engine(
        _ store: Store, shared folder: String? = nil, maximumChanges: Int = 2_000, retention: RetentionConfiguration = RetentionConfiguration()
    ) throws -> SyncEngine {
        let transport = try DirectoryTransport(root: folder ?? shared, account: "default", node: NodeID(store.nodeID))
        return SyncEngine(
            store: store, transport: transport, configuration: SyncConfiguration(maximumChangesPerSegment: maximumChanges, retention: retention))
    }

    /// The reference: every segment file in the shared folder decoded and merged, projected on `schema`.
    func reference(
        folder: String? = nil, schema: Schema = SyncCluster.schema, reading: (LogTransaction) -> LogTransaction = { $0 }
    ) throws -> Projection {
        var state = MergeState()
        let account = (folder ?? shared) + "/default"
        for node in try FileManager.default.contentsOfDirectory(atPath: account) where SegmentName.isNodeFolderName(node) {
            for file in try FileManager.default.contentsOfDirectory(atPath: account + "/" + node) {
                guard SegmentName.parse(fileName: file, node: NodeID(node)) != nil else { continue }
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: account + "/" + node + "/" + file)))
                var decoder = try SegmentDecoder(bytes: bytes)
                while let transaction = try decoder.next() { state.apply(reading(transaction), from: NodeID(node)) }
            }
        }
        return state.project(schema)
    }

    static func id() -> DatabaseValue { .text(UUID().uuidString.lowercased()) }

    /// One random write of the convergence schema: folders, labels (unique names), notes; updates and deletes.
    static func randomWrite(_ store: Store, title: String = "title", using rng: inout SeededRandom) throws {
        let folders = try store.read("SELECT id FROM Folder").map { $0[0] }
        let labels = try store.read("SELECT id FROM Label").map { $0[0] }
        let notes = try store.read("SELECT id FROM Note").map { $0[0] }
        try store.write(author: "test") { tx in
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: try tx.insert("Folder", ["id": SyncCluster.id(), "name": .text("f\(Int.random(in: 0..<3, using: &rng))")])
            case 1:
                let name = DatabaseValue.text("l\(Int.random(in: 0..<3, using: &rng))")
                if try tx.rows("SELECT 1 FROM Label WHERE name = ?", [name]).isEmpty { try tx.insert("Label", ["id": SyncCluster.id(), "name": name]) }
            case 2, 3, 4:
                try tx.insert("Note", ["id": SyncCluster.id(), title: "t", "rank": .integer(Int64.random(in: 0..<5, using: &rng)),
                                       "folder": folders.randomElement(using: &rng) ?? .null, "label": labels.randomElement(using: &rng) ?? .null])
            case 5, 6, 7:
                if let note = notes.randomElement(using: &rng) { try tx.update("Note", key: note, ["rank": .integer(Int64.random(in: 0..<5, using: &rng))]) }
            case 8:
                if let folder = folders.randomElement(using: &rng) { try tx.delete("Folder", key: folder) }
            default:
                if let label = labels.randomElement(using: &rng) { try tx.delete("Label", key: label) }
            }
        }
    }

}
