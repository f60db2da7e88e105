import Foundation
import Logging
import LogsyncControl
import LogsyncCore
@testable import LogsyncDaemon
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import LogsyncTransport
import Testing

/// syncd's parts in one process, over an in-memory carrier (``MemoryCarrier``) instead of files or
/// sockets for the logs: the account switcher, the control handler and the reload table, tested without
/// starting processes (beside the real-process tests, which test the same through `syncctl`).
@Suite("syncd's parts in one process", .serialized)
struct InProcessDaemonTests {
    static let schema = Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .text)])])

    /// A daemon of its own in `directory/name`, on `carrier`, started.
    static func daemon(_ name: String, account: String, carrier: MemoryCarrier, in directory: TemporaryDirectory, extra: String = "") throws -> SyncDaemon {
        try FileManager.default.createDirectory(atPath: directory.file(name + "/shared"), withIntermediateDirectories: true)
        let schemaFile = try directory.write("\(name)/schema.json", schema.json)
        let file = try directory.write("\(name)/syncd.toml", """
            [store]
            path = "store.sqlite"
            schema = "\(schemaFile)"
            [sync]
            account = "\(account)"
            shared_folder = "shared"
            rescan_interval_ms = 60000
            max_backoff_ms = 1000
            [control]
            socket = "s.sock"
            \(extra)
            """)
        let configuration = try DaemonConfiguration.load(file: file, environment: ["HOME": directory.path])
        let carriers = Carriers(transport: { _, account, node in carrier.transport(account: account, node: node) })
        let daemon = try SyncDaemon(configuration: configuration, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, carriers: carriers)
        daemon.start()
        return daemon
    }

    static func request(_ command: ControlRequest.Command, account: String? = nil, segment: String? = nil, on daemon: SyncDaemon) -> ControlResponse {
        daemon.handler.handle(ControlRequest(id: 1, command: command, timeoutMilliseconds: 60_000, account: account, segment: segment))
    }

    static func write(_ title: String, to daemon: SyncDaemon) throws {
        let store = try Store(path: daemon.switcher.accountState.active.path, schema: schema)
        try store.write(author: "test") { try $0.insert("Note", ["id": .text(UUID().uuidString.lowercased()), "title": .text(title)]) }
    }

    static func titles(_ daemon: SyncDaemon) throws -> Set<String> {
        let store = try Store(path: daemon.switcher.accountState.active.path, schema: schema)
        return Set(try store.read("SELECT title FROM Note").compactMap { row -> String? in
            if case .text(let title) = row[0] { return title }
            return nil
        })
    }

    @Test("the account switcher: A switches x → y → x, each time holding exactly that account's data; what A wrote before a switch reaches x's other node")
    func switcher() async throws {
        let directory = try TemporaryDirectory("inproc-switch")
        let carrier = MemoryCarrier()
        let a = try Self.daemon("a", account: "x", carrier: carrier, in: directory)
        let b = try Self.daemon("b", account: "x", carrier: carrier, in: directory)
        let c = try Self.daemon("c", account: "y", carrier: carrier, in: directory)
        defer { for daemon in [a, b, c] { daemon.stop() } }
        try Self.write("x from b", to: b)
        try Self.write("y from c", to: c)
        for daemon in [b, c] { #expect(Self.request(.trigger, on: daemon).ok) }
        #expect(Self.request(.trigger, on: a).ok)
        #expect(try Self.titles(a) == ["x from b"])

        try Self.write("x from a before the switch", to: a)
        let toY = Self.request(.accountSwitch, account: "y", on: a)
        #expect(toY.ok && toY.accounts?.active == "y", "\(String(describing: toY.error)) \(String(describing: toY.accounts))")
        #expect(try Self.titles(a) == ["y from c"], "A holds exactly y's data")
        #expect(Self.request(.trigger, on: b).ok)
        #expect(try Self.titles(b) == ["x from b", "x from a before the switch"], "what A wrote just before the switch reached x's other node")

        let toX = Self.request(.accountSwitch, account: "x", on: a)
        #expect(toX.ok && toX.accounts?.active == "x")
        #expect(try Self.titles(a) == ["x from b", "x from a before the switch"], "A holds exactly x's data, rebuilt from x's logs")
        try await eventually(within: .seconds(60), every: .milliseconds(20), "the retired stores are shipped and deleted") {
            a.switcher.accountState.retained.isEmpty
        }

        // Refusals, from the switcher itself.
        let bad = Self.request(.accountSwitch, account: "../etc", on: a)
        #expect(!bad.ok && bad.error?.code == .badRequest, "\(String(describing: bad.error))")
        let same = Self.request(.accountSwitch, account: "x", on: a)
        #expect(same.ok, "a switch to the active account is done at once")
    }

    @Test("the control handler: trigger, status, peers and history; prune with retention off; a quarantine command on a segment nobody refused; watch is not a request")
    func controlHandler() async throws {
        let directory = try TemporaryDirectory("inproc-control")
        let carrier = MemoryCarrier()
        let a = try Self.daemon("a", account: "x", carrier: carrier, in: directory, extra: "[retention]\nenabled = false")
        let b = try Self.daemon("b", account: "x", carrier: carrier, in: directory)
        defer { for daemon in [a, b] { daemon.stop() } }
        try Self.write("one", to: b)
        #expect(Self.request(.trigger, on: b).ok)
        // a's watcher of the carrier may have applied it already; the trigger returns after a round that
        // started after it was asked for, so b's transaction is applied by then either way.
        let triggered = Self.request(.trigger, on: a)
        #expect(triggered.ok && triggered.trigger?.summary.ok == true, "\(String(describing: triggered.trigger))")
        let status = try #require(Self.request(.status, on: a).status)
        #expect(status.account == "x" && status.node == a.nodeID && status.peers.map(\.node) == [b.nodeID], "\(status)")
        #expect(status.peers.first?.appliedSequence == 1 && status.peers.first?.lag == 0)
        #expect(Self.request(.peers, on: a).peers == status.peers)
        #expect(Self.request(.history, on: a).history?.map(\.origin) == [b.nodeID], "the one transaction, from b")

        let prune = Self.request(.prune, on: a)
        #expect(!prune.ok && prune.error?.code == .badRequest && prune.error?.message.contains("retention is off") == true)
        let release = Self.request(.quarantineRelease, segment: "\(b.nodeID)/1-1", on: a)
        #expect(!release.ok && release.error?.code == .notFound, "\(String(describing: release.error))")
        let malformed = Self.request(.quarantineDrop, segment: "nonsense", on: a)
        #expect(!malformed.ok && malformed.error?.code == .badRequest)
        let watch = Self.request(.watch, on: a)
        #expect(!watch.ok && watch.error?.code == .badRequest && watch.error?.message.contains("stream") == true)
    }

    @Test("reload: a key a reload applies reaches the running engine and loop; a key that needs a restart is reported and left; a broken file changes nothing")
    func reload() async throws {
        let directory = try TemporaryDirectory("inproc-reload")
        let carrier = MemoryCarrier()
        let a = try Self.daemon("a", account: "x", carrier: carrier, in: directory)
        defer { a.stop() }
        let file = a.configuration.source
        let original = try String(contentsOfFile: file, encoding: .utf8)
        try original.replacingOccurrences(of: "max_backoff_ms = 1000", with: "max_backoff_ms = 7000\nsegment_changes = 17")
            .replacingOccurrences(of: "socket = \"s.sock\"", with: "socket = \"t.sock\"")
            .write(toFile: file, atomically: true, encoding: .utf8)
        let result = a.reload()
        #expect(result.ok && result.needsRestart == ["control.socket"], "\(result)")
        #expect(a.configuration.maximumBackoffMilliseconds == 7_000 && a.configuration.socketPath.hasSuffix("/s.sock"))
        #expect(a.mount.engine?.configuration.maximumChangesPerSegment == 17, "the mounted engine runs with the reloaded settings")

        try (original + "\nbogus = 1\n").write(toFile: file, atomically: true, encoding: .utf8)
        let failed = a.reload()
        #expect(!failed.ok && failed.message.contains("still running on the previous configuration"), "\(failed)")
        #expect(a.configuration.maximumBackoffMilliseconds == 7_000 && a.mount.engine?.configuration.maximumChangesPerSegment == 17)
    }
}
