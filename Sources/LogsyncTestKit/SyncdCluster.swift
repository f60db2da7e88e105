import Foundation
import LogsyncPlatform
import LogsyncCore
import LogsyncStore
import Synchronization

/// N real `syncd` processes in one temporary directory, each with its own store, configuration and
/// control socket, all sharing one folder. Tests write through the library, drive the daemons with
/// `syncctl`, and wait for convergence with deadlines.
public final class SyncdCluster: Sendable {
    public let directory: TemporaryDirectory
    public let shared: String
    public let schemaFile: String
    public let schema: Schema
    private let added = Mutex<[SyncdNode]>([])

    /// The nodes added so far, in order.
    public var nodes: [SyncdNode] { added.withLock { $0 } }

    /// A cluster whose daemons register `schema` (written for them as JSON, `Schema.json`).
    public init(_ label: String = "d", schema: Schema) throws {
        directory = try TemporaryDirectory(label)
        shared = directory.file("shared")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        schemaFile = try directory.write("schema.json", schema.json)
        self.schema = schema
    }

    /// Adds a node (not started). `extra` lines are appended to its `[sync]` table; `tables` adds whole
    /// tables of `syncd.toml`, by name, each with its `key = value` lines (`["retention": ["enabled = true"]]`). A long
    /// `rescanIntervalMilliseconds` leaves the daemon's inotify wake-ups as the only timely way to sync.
    /// `sharedFolder` gives the node a folder of its own that something else keeps in step with the
    /// others' (Syncthing), instead of the cluster's one shared folder.
    public func addNode(
        _ name: String, account: String = "test", rescanIntervalMilliseconds: Int = 1000, sharedFolder: String? = nil, extra: [String] = [],
        tables: [String: [String]] = [:]
    ) throws -> SyncdNode {
        let node = try SyncdNode(
            cluster: self, name: name, account: account, rescanIntervalMilliseconds: rescanIntervalMilliseconds, sharedFolder: sharedFolder ?? shared,
            extra: extra, tables: tables)
        added.withLock { $0.append(node) }
        return node
    }

    /// Waits until every node's synced tables hold the same rows; returns them. On timeout the error
    /// carries each node's tables and daemon log.
    public func awaitConvergence(timeout: Duration = .seconds(60)) async throws -> [String: [[DatabaseValue]]] {
        var last: [[String: [[DatabaseValue]]]] = []
        let converged = try await poll(timeout: timeout, every: .milliseconds(20)) { () -> [String: [[DatabaseValue]]]? in
            last = try nodes.map { try $0.tables() }
            return Set(last.map { String(describing: $0.sorted { $0.key < $1.key }) }).count == 1 ? last[0] : nil
        }
        if let converged { return converged }
        throw ClusterError.notConverged(tables: zip(nodes.map(\.name), last).map { "\($0): \($1)" }, logs: nodes.map { "\($0.name):\n\($0.log)" })
    }
}

public enum ClusterError: Error, CustomStringConvertible {
    case notConverged(tables: [String], logs: [String])
    case notReady(node: String, log: String)

    public var description: String {
        switch self {
        case .notConverged(let tables, let logs):
            return "nodes did not converge:\n" + tables.joined(separator: "\n") + "\nlogs:\n" + logs.joined(separator: "\n")
        case .notReady(let node, let log):
            return "syncd \(node) did not become ready; log:\n\(log)"
        }
    }
}

/// One `syncd` of a cluster: its files, its process, and `syncctl` aimed at it.
public final class SyncdNode: Sendable {
    public let name: String
    public let storePath: String
    public let socketPath: String
    public let configPath: String
    public let logPath: String
    fileprivate unowned let cluster: SyncdCluster
    fileprivate let state = Mutex(State())

    fileprivate struct State {
        var process: Subprocess?
        var store: Store?
        /// The logs of the daemons that ran before the current one.
        var previousLogs = ""
    }

    /// The running daemon, if any.
    public var process: Subprocess? { state.withLock { $0.process } }

    /// The account `[sync] account` names: the node's account until it switches.
    public let account: String

    init(
        cluster: SyncdCluster, name: String, account: String, rescanIntervalMilliseconds: Int, sharedFolder: String, extra: [String],
        tables: [String: [String]]
    ) throws {
        self.account = account
        self.cluster = cluster
        self.name = name
        let folder = cluster.directory.file(name)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        storePath = folder + "/store.sqlite"
        socketPath = folder + "/s.sock"
        logPath = folder + "/syncd.log"
        let more = tables.sorted { $0.key < $1.key }.map { "\n[\($0.key)]\n" + $0.value.joined(separator: "\n") + "\n" }.joined()
        configPath = try cluster.directory.write("\(name)/syncd.toml", """
            [store]
            path = "store.sqlite"
            schema = "\(cluster.schemaFile)"

            [sync]
            account = "\(account)"
            shared_folder = "\(sharedFolder)"
            rescan_interval_ms = \(rescanIntervalMilliseconds)
            max_backoff_ms = 1000
            \(extra.joined(separator: "\n"))

            [control]
            socket = "s.sock"
            \(more)
            """)
    }

    /// Starts `syncd` and waits until it is ready. `environment` adds variables (e.g. `LOGSYNC_FAULT`).
    public func start(environment: [String: String] = [:], timeout: Duration = .seconds(60)) async throws {
        var variables = ProcessInfo.processInfo.environment
        for (key, value) in environment { variables[key] = value }
        let process = try Subprocess(Products.path("syncd"), ["--config", configPath], environment: variables)
        state.withLock { $0.process = process }
        let ready = try await poll(timeout: timeout, every: .milliseconds(10)) { () -> Bool? in
            if process.stderr.contains("syncd ready") { return true }
            return process.process.isRunning ? nil : false
        }
        guard ready == true else { throw ClusterError.notReady(node: name, log: log) }
    }

    /// SIGTERM, then waits for a clean exit; returns the exit status.
    @discardableResult
    public func stop(timeout: Duration = .seconds(30)) async throws -> Int32 {
        guard let process else { return 0 }
        let status = try await process.terminate(timeout: timeout)
        retire()
        return status
    }

    /// SIGTERM, then how long the daemon took to exit, timed on a thread of its own (a task on a busy
    /// cooperative pool may notice the exit long after it happened), and its exit status.
    public func stopTimed(timeout: Duration = .seconds(30)) async throws -> (status: Int32, elapsed: Duration) {
        guard let process else { return (0, .zero) }
        let elapsed = await withCheckedContinuation { (continuation: CheckedContinuation<Duration, Never>) in
            Thread.detachNewThread {
                let start = ContinuousClock.now
                process.process.terminate(SIGTERM)
                while process.process.isRunning, ContinuousClock.now - start < timeout { Pause.microseconds(500) }
                continuation.resume(returning: ContinuousClock.now - start)
            }
        }
        let status = try await process.waitForExit(timeout: timeout)
        retire()
        return (status, elapsed)
    }

    public func kill9() async throws {
        guard let process else { return }
        try await process.kill9()
        retire()
    }

    /// Waits for a daemon that is expected to die by itself (a fault point); returns its exit status.
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        guard let process else { return 0 }
        let status = try await process.waitForExit(timeout: timeout)
        retire()
        return status
    }

    /// Keeps the log of a daemon that has exited, and forgets its process.
    private func retire() {
        let logs = state.withLock { state in
            state.previousLogs += state.process?.stderr ?? ""
            state.process = nil
            return state.previousLogs
        }
        try? logs.write(toFile: logPath, atomically: true, encoding: .utf8)
    }

    /// Everything this node's daemons have logged so far.
    public var log: String { state.withLock { $0.previousLogs + ($0.process?.stderr ?? "") } }

    /// Waits until the daemon's log has a line containing `text`.
    public func awaitLog(_ text: String, timeout: Duration = .seconds(30)) async throws {
        try await eventually(within: timeout, every: .milliseconds(10), "'\(text)' in syncd \(name)'s log:\n\(log)") { log.contains(text) }
    }

    /// Runs `syncctl` against this node. Without `timeout`, the kit waits 60 s, or for `account` commands
    /// (a switch, a logout) a little longer than syncctl's own 600 s wait for them: a switch held at a
    /// fault gate, or slowed by a busy machine, ends with syncctl's answer rather than the kit's kill.
    public func syncctl(_ arguments: [String], timeout: Duration? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        let limit = timeout ?? (arguments.first == "account" ? .seconds(620) : .seconds(60))
        return try await Subprocess.run(Products.path("syncctl"), arguments + ["--socket", socketPath], timeout: limit)
    }

    /// `syncctl status --json`, decoded loosely.
    public func status() async throws -> [String: Any] {
        let result = try await syncctl(["status", "--json"])
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr)
        }
        return object
    }

    /// The node's store, opened in the test process (a second connection next to the daemon's).
    public func openStore() throws -> Store {
        if let store = state.withLock({ $0.store }) { return store }
        let opened = try Store(path: storePath, schema: cluster.schema)
        return state.withLock { state in
            if let store = state.store { return store }
            state.store = opened
            return opened
        }
    }

    /// Every synced table's rows, ordered by primary key.
    public func tables() throws -> [String: [[DatabaseValue]]] {
        let store = try openStore()
        var tables: [String: [[DatabaseValue]]] = [:]
        for entity in cluster.schema.entities {
            tables[entity.name] = try store.read("SELECT * FROM \"\(entity.name)\" ORDER BY 1")
        }
        return tables
    }

    public var nodeID: String? { try? openStore().nodeID }
}

extension SyncdNode {
    /// The stores per account of this node and their persisted state.
    public var accountStores: AccountStores { AccountStores(storePath: storePath, configuredAccount: account) }

    /// The store the daemon has active now (its configured store until the first switch).
    public func activeStorePath() throws -> String { try accountStores.load().active.path }

    /// Runs `body` on the active store, opened for it alone and let go of afterwards: a test that holds a
    /// store open across a switch would keep the daemon from retiring it.
    public func withActiveStore<T>(_ body: (Store) throws -> T) throws -> T {
        let path = try activeStorePath()
        let store = try Store(path: path, schema: cluster.schema)
        return try body(store)
    }

    /// Every synced table's rows of the active store, ordered by primary key.
    public func activeTables() throws -> [String: [[DatabaseValue]]] {
        try withActiveStore { store in
            var tables: [String: [[DatabaseValue]]] = [:]
            for entity in cluster.schema.entities {
                tables[entity.name] = try store.read("SELECT * FROM \"\(entity.name)\" ORDER BY 1")
            }
            return tables
        }
    }

    /// Forgets the store ``openStore()`` keeps open, so that its connections close.
    public func closeStore() {
        state.withLock { $0.store = nil }
    }
}
