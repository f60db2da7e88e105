import Foundation
import LogsyncCore
import LogsyncRelayTransport
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// A sealed account through a real `sync-relay`, on both backends (`docs/security.md`): the relay routes
/// and stores sealed segments and progress records by their readable header, nodes converge, and neither
/// the relay's SQLite file nor its PostgreSQL database holds a value, an author or a name.
@Suite(.serialized) struct RelaySealedTests {
    @Test(arguments: Backend.allCases) func sealedAccountThroughTheRelay(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let directory = try TemporaryDirectory("relay-sealed")
        let key = AccountKey.random()
        func engine(_ store: Store, key: AccountKey = key) -> SyncEngine {
            let relay = RelayTransport(
                settings: RelayClientSettings(url: fixture.relay.url, account: fixture.account, token: fixture.token), node: NodeID(store.nodeID))
            let sealed = SealedTransport(
                wrapping: relay, keyring: SealKeyring(account: fixture.account, accountKey: key, signingKey: NodeSigningKey()), node: NodeID(store.nodeID),
                ledgerPath: directory.file("\(store.nodeID).chain"))
            return SyncEngine(
                store: store, transport: sealed,
                configuration: SyncConfiguration(account: fixture.account, retention: RetentionConfiguration(progressIntervalMilliseconds: 0)))
        }
        let a = try Store(path: directory.file("a.sqlite"), schema: .convergence), b = try Store(path: directory.file("b.sqlite"), schema: .convergence)
        let (ea, eb) = (engine(a), engine(b))
        var secrets: [String] = []
        for index in 0..<12 {
            let secret = "relay-secret-\(index)-\(UUID().uuidString.prefix(6))"
            secrets.append(secret)
            try (index % 2 == 0 ? a : b).write(author: "relay-author-zq") { tx in
                try tx.insert("Note", ["id": .text(UUID().uuidString.lowercased()), "title": .text(secret)])
            }
            _ = try (index % 2 == 0 ? ea : eb).sync()
        }
        for _ in 0..<3 {
            _ = try ea.sync()
            _ = try eb.sync()
        }
        #expect(try a.syncedTables() == b.syncedTables())
        #expect(try a.read("SELECT count(*) FROM Note") == [[.integer(12)]])
        // A node with another key refuses every segment, naming the key, and applies nothing.
        let c = try Store(path: directory.file("c.sqlite"), schema: .convergence)
        let report = try engine(c, key: AccountKey.random()).sync()
        #expect(!report.rejected.isEmpty && report.rejected.allSatisfy { $0.reason.contains("sealed under account key") }, "\(report.rejected)")
        #expect(try c.read("SELECT count(*) FROM Note") == [[.integer(0)]])
        // The relay's storage, byte by byte, and inflated wherever a zlib stream starts.
        var haystacks: [[UInt8]] = []
        switch fixture.relay.store {
        case .sqlite:
            for file in [fixture.relay.database, fixture.relay.database + "-wal"] {
                if let data = FileManager.default.contents(atPath: file) { haystacks.append(Array(data)) }
            }
        case .postgres(let server, let database):
            haystacks.append(PlaintextSearch.decodingHexLiterals(try await server.dump(database: database)))
        }
        #expect(!haystacks.isEmpty)
        for haystack in haystacks {
            let found = PlaintextSearch.found(secrets + ["relay-author-zq"], in: haystack)
            #expect(found.isEmpty, "readable in the relay's storage (\(backend)): \(found)")
        }
        #expect(try await fixture.relay.stop() == 0)
    }
}
