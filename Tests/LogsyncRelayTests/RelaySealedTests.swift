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

    /// A plain account sealed in place through the relay (`[seal] from_plain`, docs/security.md): one node
    /// sealed while the other writes on unsealed, then the other; every write on both, and nothing the
    /// relay serves is plain once they pruned.
    @Test(arguments: Backend.allCases) func plainAccountSealedInPlace(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let directory = try TemporaryDirectory("relay-seal-in-place")
        let key = AccountKey.random()
        let configuration = SyncConfiguration(account: fixture.account, maximumChangesPerSegment: 2, retention: RetentionConfiguration(progressIntervalMilliseconds: 0))
        func relay(_ store: Store) -> RelayTransport {
            RelayTransport(settings: RelayClientSettings(url: fixture.relay.url, account: fixture.account, token: fixture.token), node: NodeID(store.nodeID))
        }
        var signers: [String: NodeSigningKey] = [:]
        func sealed(_ store: Store) throws -> SyncEngine {
            let signer = signers[store.nodeID] ?? NodeSigningKey()
            signers[store.nodeID] = signer
            let transport = SealedTransport(
                wrapping: relay(store), keyring: SealKeyring(account: fixture.account, accountKey: key, signingKey: signer), node: NodeID(store.nodeID),
                ledgerPath: directory.file("\(store.nodeID).chain"), fromPlain: true, rebaselineInterval: .zero)
            try transport.checkAccount()
            return SyncEngine(store: store, transport: transport, configuration: configuration)
        }
        var titles: [String] = []
        func add(_ title: String, to store: Store) throws {
            try store.write { tx in try tx.insert("Note", ["id": .text(UUID().uuidString.lowercased()), "title": .text(title)]) }
            titles.append(title)
        }
        func rounds(_ engines: [SyncEngine]) throws { for _ in 0..<3 { for engine in engines { _ = try engine.sync() } } }
        let a = try Store(path: directory.file("a.sqlite"), schema: .convergence), b = try Store(path: directory.file("b.sqlite"), schema: .convergence)
        var (ea, eb) = (SyncEngine(store: a, transport: relay(a), configuration: configuration), SyncEngine(store: b, transport: relay(b), configuration: configuration))
        for index in 0..<3 {
            try add("relay-plain-a-\(index)", to: a)
            try add("relay-plain-b-\(index)", to: b)
        }
        try rounds([ea, eb])
        ea = try sealed(a)
        try add("relay-sealed-a", to: a)
        try add("relay-plain-b-after", to: b)
        try rounds([ea, eb])
        eb = try sealed(b)
        try add("relay-sealed-b", to: b)
        try rounds([ea, eb])
        for store in [a, b] {
            #expect(try Set(store.read("SELECT title FROM Note").map { $0[0] }) == Set(titles.map { DatabaseValue.text($0) }), "\(store.nodeID)")
            #expect(try store.sync.quarantined().isEmpty && store.sync.refusals().isEmpty)
        }
        for _ in 0..<2 {
            try rounds([ea, eb])
            for engine in [ea, eb] { _ = try engine.prune(dryRun: false) }
        }
        // What the relay serves now, read unsealed: sealed, every object.
        let reader = relay(a)
        var objects = 0
        for node in [a, b].map({ NodeID($0.nodeID) }) {
            for name in try reader.ownSegments(of: node) {
                objects += 1
                #expect(SealedHeader.isSealed(try reader.read(name, maximumBytes: 1 << 20)), "\(name) (\(backend))")
            }
        }
        for (node, bytes) in try reader.progressRecords() {
            objects += 1
            #expect(SealedHeader.isSealed(bytes), "\(node)'s progress record (\(backend))")
        }
        for name in try reader.baselines() {
            objects += 1
            var first: [UInt8]?
            try reader.readBaseline(name, maximumBytes: 1 << 26) { chunk in if first == nil { first = chunk } }
            #expect(first.map { SealedHeader.isSealed($0) } == true, "\(name) (\(backend))")
        }
        #expect(objects >= 4, "\(objects) objects on the relay")
        #expect(try await fixture.relay.stop() == 0)
    }
}
