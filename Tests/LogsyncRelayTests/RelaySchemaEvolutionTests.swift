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

        // A node on version 3 that has written nothing says so in its progress record: the relay counts it.
        var version3 = Self.version2
        version3.version = 3
        version3.entities[3].attributes.append(Attribute("weight", .integer))
        let third = try Store(path: directory.file("v3.sqlite"), schema: version3)
        let thirdEngine = Self.engine(third, fixture)
        let thirdRound = try await onOwnThread { try thirdEngine.sync() }
        #expect(thirdRound.published.isEmpty, "\(thirdRound)")
        let after = try await rawRequest(port: fixture.relay.port, method: "GET", path: "/metrics").text
        #expect(after.contains("relay_account_newest_schema{account=\"\(fixture.account)\"} 3"), "\(after)")
        #expect(try await fixture.relay.stop() == 0)
    }

    static var fleetSeeds: [UInt64] { propertySeeds("LOGSYNC_SCHEMA_SEEDS", default: 2, from: 0x5E1A) }

    /// Every segment the relay holds for the account, merged by the rules: the reference a fleet is checked against.
    static func reference(_ fixture: RelayFixture, schema: Schema) throws -> Projection {
        let reader = RelayTransport(
            settings: RelayClientSettings(url: fixture.relay.url, account: fixture.account, token: fixture.token), node: NodeID(UUID().uuidString.lowercased()))
        var state = MergeState()
        for name in try reader.refresh(excluding: NodeID(UUID().uuidString.lowercased())).appeared {
            var decoder = try SegmentDecoder(bytes: try reader.read(name, maximumBytes: 64 << 20))
            while let transaction = try decoder.next() { state.apply(SchemaFleet.reading(for: schema)(transaction), from: name.node) }
        }
        return state.project(schema)
    }

    @Test("v1, v2 and v3 through the relay, nodes upgraded one at a time in random order while all write: older nodes see all they declare, and all end identical",
          arguments: Backend.allCases)
    func mixedFleetThroughTheRelay(backend: Backend) async throws {
        var total = SchemaFleet.Outcome()
        for seed in Self.fleetSeeds {
            // Each seed a relay of its own: the reference merges every segment it holds.
            let fixture = try await RelayFixture.start(backend)
            let outcome = try await onOwnThread {
                let directory = try TemporaryDirectory("relay-fleet-\(seed)")
                var engines: [String: SyncEngine] = [:]
                let driver = SchemaFleet.Driver(
                    open: { name, schema in
                        engines[name] = nil
                        let store = try Store(path: directory.file("\(name).sqlite"), schema: schema)
                        engines[name] = Self.engine(store, fixture)
                        return store
                    },
                    sync: { name in
                        let report = try engines[name]!.sync()
                        return (report.keptForSchema.count, report.appliedKept)
                    },
                    reference: { try Self.reference(fixture, schema: $0) })
                return try SchemaFleet.run(seed: seed, driver)
            }
            #expect(try await fixture.relay.stop() == 0)
            total.add(outcome)
        }
        #expect(total.failures.isEmpty, "\(total.failures)")
        #expect(total.keptSegments > 0 && total.mergedAfterUpgrade > 0, "kept \(total.keptSegments) segments in part, merged \(total.mergedAfterUpgrade)")
        #expect(!total.checkedReleases.isEmpty, "\(total.checkedReleases)")
    }
}
