import Foundation
import LogsyncContexts
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import Synchronization
import Testing

/// Contexts hear when another node writes with a newer schema (`docs/schema-evolution.md`).
@Suite("Schema updates seen by a container")
struct SchemaUpdateEventTests {
    /// What a stream delivered so far, collected in the background.
    final class Delivered: Sendable {
        let values = Mutex<[Int]>([])
        init(_ stream: AsyncStream<Int>) {
            Task { [weak self] in for await value in stream { self?.values.withLock { $0.append(value) } } }
        }
    }

    @Test("a container reports a peer's newer schema once the import that applied it commits, and to a new subscriber at once")
    func containerHearsOfANewerSchema() async throws {
        let cluster = try SyncCluster("schema-update")
        let newer = try Store(path: cluster.storePath("new"), schema: SchemaEvolutionTests.version2)
        try newer.write { try $0.insert("Folder", ["id": SyncCluster.id(), "name": "Work", "color": "blue"]) }
        _ = try cluster.engine(newer).sync()

        let container = try Container(store: try cluster.store("old"))
        defer { container.close() }
        #expect(container.newerPeerSchemaVersion == nil)
        let updates = Delivered(container.schemaUpdates())
        let engine = try cluster.engine(container.store)
        _ = try await onOwnThread { try engine.sync() }
        try await eventually(within: .seconds(60), every: .milliseconds(5), "the update in the stream: \(updates.values.withLock { $0 })") {
            updates.values.withLock { $0 } == [2]
        }
        #expect(container.newerPeerSchemaVersion == 2)
        let later = Delivered(container.schemaUpdates())
        try await eventually(within: .seconds(60), every: .milliseconds(5), "a new subscriber starts from what is known") {
            later.values.withLock { $0 } == [2]
        }
        // Said once: another round that applies nothing newer adds nothing.
        _ = try await onOwnThread { try engine.sync() }
        #expect(updates.values.withLock { $0 } == [2])
    }
}
