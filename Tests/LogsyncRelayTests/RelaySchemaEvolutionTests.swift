import Foundation
import LogsyncCore
import LogsyncRelayTransport
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// A mixed-version fleet through a real `sync-relay` (`docs/schema-evolution.md`): what the shared-folder
/// tests show, through the relay's segments, on both backends.
@Suite(.serialized) struct RelaySchemaEvolutionTests {
    static let version1 = Schema.convergence
    /// A new column, a new entity, and Note's title renamed `subject`.
    static let version2: Schema = {
        var schema = version1
        schema.version = 2
        schema.entities[0].attributes.append(Attribute("color", .text))
        schema.entities[2].attributes[0] = Attribute("subject", .text, renamingIdentifier: "title")
        schema.entities.append(Entity("Tag", attributes: [Attribute("name", .text)]))
        return schema
    }()

    static func engine(_ store: Store, _ fixture: RelayFixture) -> SyncEngine {
        let transport = RelayTransport(
            settings: RelayClientSettings(url: fixture.relay.url, account: fixture.account, token: fixture.token), node: NodeID(store.nodeID))
        return SyncEngine(store: store, transport: transport, configuration: SyncConfiguration(account: fixture.account))
    }

    static func id() -> DatabaseValue { .text(UUID().uuidString.lowercased()) }

    @Test(arguments: Backend.allCases) func v1NodeKeepsSyncingAndCatchesUpAfterItsUpgrade(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let directory = try TemporaryDirectory("relay-evolve")
        var old: Store? = try Store(path: directory.file("v1.sqlite"), schema: Self.version1)
        let new = try Store(path: directory.file("v2.sqlite"), schema: Self.version2)
        let oldEngine = Self.engine(old!, fixture), newEngine = Self.engine(new, fixture)
        let folder = Self.id(), note = Self.id()
        try new.write { tx in
            try tx.insert("Folder", ["id": folder, "name": "Work", "color": "blue"])
            try tx.insert("Tag", ["id": Self.id(), "name": "urgent"])
            try tx.insert("Note", ["id": note, "subject": "from v2", "folder": folder])
        }
        try old!.write { try $0.insert("Note", ["id": Self.id(), "title": "from v1"]) }
        try await onOwnThread { for _ in 0..<2 { _ = try newEngine.sync(); _ = try oldEngine.sync() } }
        // The v1 node holds all it declares, the renamed column included, and keeps the rest.
        #expect(try old!.read("SELECT name FROM Folder") == [[.text("Work")]])
        #expect(try old!.read("SELECT title FROM Note ORDER BY title") == [[.text("from v1")], [.text("from v2")]])
        #expect(try old!.sync.keptTransactionCount() == 1)
        #expect(try new.read("SELECT subject FROM Note ORDER BY subject") == [[.text("from v1")], [.text("from v2")]])
        // The relay's /metrics: the account's nodes push under versions 1 and 2.
        let metrics = try await rawRequest(port: fixture.relay.port, method: "GET", path: "/metrics").text
        #expect(metrics.contains("relay_account_oldest_schema{account=\"\(fixture.account)\"} 1"), "\(metrics)")
        #expect(metrics.contains("relay_account_newest_schema{account=\"\(fixture.account)\"} 2"), "\(metrics)")

        // After its upgrade, the v1 node's tables equal the v2 node's, with nothing pulled again.
        old = nil
        let upgraded = try Store(path: directory.file("v1.sqlite"), schema: Self.version2)
        let upgradedEngine = Self.engine(upgraded, fixture)
        let round = try await onOwnThread { try upgradedEngine.sync() }
        #expect(round.appliedKept == 1 && round.applied.isEmpty, "\(round)")
        #expect(try upgraded.syncedTables() == new.syncedTables())
        #expect(try await fixture.relay.stop() == 0)
    }
}
