import Foundation
import LogsyncCore
@testable import LogsyncStore
@testable import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// The engine's prefetch prepares first inserts (`FreshRows.swift`) for the store it imports into.
@Suite("Prepared imports in the engine")
struct PreparedImportTests {
    @Test("a segment the engine prefetches comes with its first inserts prepared once the store's writer has seen its node")
    func prefetchedSegmentsArePrepared() throws {
        let cluster = try SyncCluster("prepared")
        let a = try cluster.store("a")
        let b = try cluster.store("b")
        for round in 0..<4 {
            try a.write { tx in
                for _ in 0..<5 { try tx.insert("Folder", ["id": SyncCluster.id(), "name": .text("f\(round)")]) }
            }
        }
        _ = try cluster.engine(a, maximumChanges: 5).sync()
        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        _ = try transport.refresh(excluding: NodeID(b.nodeID))
        let names = transport.segments(of: NodeID(a.nodeID), after: 0)
        try #require(names.count == 4)

        // Before b's writer has applied anything from a, there is no index to encode a's clocks with.
        guard case .segment(let before, _) = SyncEngine.load(
            names[1], context: SyncEngine.LoadContext(store: b, transport: transport, configuration: SyncConfiguration()), preparingFor: b.sync.freshRowPreparer)
        else { Issue.record("segment \(names[1]) was rejected"); return }
        #expect(before.fresh == nil)

        _ = try cluster.engine(b).sync()
        guard case .segment(let after, _) = SyncEngine.load(
            names[1], context: SyncEngine.LoadContext(store: b, transport: transport, configuration: SyncConfiguration()), preparingFor: b.sync.freshRowPreparer)
        else { Issue.record("segment \(names[1]) was rejected"); return }
        let fresh = try #require(after.fresh)
        #expect(fresh.rows.joined().compactMap { $0 }.count == 5, "each of the segment's five Folder inserts")
        #expect(try b.syncedTables() == (try a.syncedTables()))
    }
}
