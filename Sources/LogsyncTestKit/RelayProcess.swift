import Foundation
import LogsyncPlatform
import Synchronization

/// Where a test relay keeps its data: a SQLite file in its directory, or a database of its own on a
/// PostgreSQL server (several relays may share one).
public enum RelayStore: Sendable {
    case sqlite
    case postgres(PostgresServer, database: String)
}

/// A real `sync-relay` on 127.0.0.1 with a database in a test's own directory (or on a PostgreSQL
/// server): started on a free port (restarted on the same one), with its administration commands at hand.
public final class RelayProcess: Sendable {
    public let directory: TemporaryDirectory
    /// The SQLite file (unused on PostgreSQL).
    public let database: String
    public let store: RelayStore
    private let state = Mutex(State())

    private struct State {
        var process: Subprocess?
        var port = 0
        var scheme = "http"
        var previousLogs = ""
        /// The configuration file every command is given, once one is written.
        var config: String?
    }

    public init(_ label: String = "r", store: RelayStore = .sqlite) throws {
        directory = try TemporaryDirectory(label)
        database = directory.file("relay.sqlite")
        self.store = store
        if case .postgres = store { try configure("") }
    }

    /// Writes the configuration every later command and start uses: `extra` (TOML), after the lines that
    /// name the PostgreSQL database when the relay keeps its data there.
    public func configure(_ extra: String) throws {
        var text = extra
        if case .postgres(let server, let name) = store { text = server.relayConfiguration(database: name) + "\n" + extra }
        let path = try directory.write("sync-relay.toml", text)
        state.withLock { $0.config = path }
    }

    /// Where the relay's data is: `--database FILE` for SQLite, and the configuration when one is written.
    private var storeArguments: [String] {
        let config = state.withLock { $0.config }.map { ["--config", $0] } ?? []
        if case .sqlite = store { return config + ["--database", database] }
        return config
    }

    public var port: Int { state.withLock { $0.port } }
    /// `http://127.0.0.1:PORT`, or `https://` when the relay serves TLS.
    public var url: String { state.withLock { "\($0.scheme)://127.0.0.1:\($0.port)" } }
    public var process: Subprocess? { state.withLock { $0.process } }

    /// Starts the relay (on the port it had before, after a restart) and waits until it listens.
    /// `arguments` are added to `serve`; `environment` to the inherited one.
    public func start(arguments: [String] = [], environment: [String: String] = [:], timeout: Duration = .seconds(30)) async throws {
        var variables = ProcessInfo.processInfo.environment
        for (key, value) in environment { variables[key] = value }
        let port = self.port
        let process = try Subprocess(
            Products.path("sync-relay"),
            ["serve"] + storeArguments + ["--host", "127.0.0.1", "--port", String(port)] + arguments, environment: variables)
        state.withLock { $0.process = process }
        let line = try await process.line(startingWith: "sync-relay listening on ", timeout: timeout)
        guard let chosen = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw SubprocessError.exited(status: -1, stdout: process.stdout, stderr: process.stderr)
        }
        state.withLock {
            $0.port = chosen
            $0.scheme = line.contains("https://") ? "https" : "http"
        }
    }

    /// SIGKILL: no clean-up, nothing flushed that was not durable.
    public func kill9() async throws {
        guard let process else { return }
        try await process.kill9()
        retire()
    }

    /// SIGTERM, then waits for the exit; returns the status.
    @discardableResult
    public func stop(timeout: Duration = .seconds(20)) async throws -> Int32 {
        guard let process else { return 0 }
        let status = try await process.terminate(timeout: timeout)
        retire()
        return status
    }

    private func retire() {
        state.withLock { state in
            state.previousLogs += state.process?.stderr ?? ""
            state.process = nil
        }
    }

    /// Everything the relay processes logged so far.
    public var log: String { state.withLock { $0.previousLogs + ($0.process?.stderr ?? "") } }

    /// Waits until the relay has logged `text`: its output is read on another thread, so a line may come
    /// after the answer to the request that caused it (as ``SyncdNode/awaitLog(_:timeout:)``).
    public func awaitLog(_ text: String, timeout: Duration = .seconds(60)) async throws {
        try await eventually(within: timeout, every: .milliseconds(20), "'\(text)' in the relay's log:\n\(log)") { log.contains(text) }
    }

    /// A consistent copy of the database at `path`, made while the relay may be serving: SQLite's online
    /// backup, through the sqlite3 shell (`.backup`), as docs/operations.md tells operators to make one.
    public func backUp(to path: String) async throws {
        let result = try await runSQLiteShell(on: database, ".backup '\(path)'")
        guard result.status == 0 else { throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr) }
    }

    /// Puts the copy at `backup` in place of the database, as an operator restores one: the relay must
    /// be stopped; the database's `-wal` and `-shm` go, the relay's other files beside it stay.
    public func restore(from backup: String) throws {
        precondition(process == nil, "stop the relay before restoring its database")
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        try FileManager.default.removeItem(atPath: database)
        try FileManager.default.copyItem(atPath: backup, toPath: database)
    }

    /// Removes the database and every file beside it (the relay must be stopped): the next start, or
    /// the next administration command, makes a brand-new one.
    public func discardDatabase() throws {
        precondition(process == nil, "stop the relay before discarding its database")
        let name = URL(fileURLWithPath: database).lastPathComponent
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasPrefix(name) {
            try FileManager.default.removeItem(atPath: directory.file(file))
        }
    }

    /// The identity the relay's health route announces, `ID/EPOCH`.
    public func identity() async throws -> String {
        let answer = try await rawRequest(port: port, method: "GET", path: "/v1/health")
        guard answer.status == 200, let object = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
            let relay = object["relay"] as? [String: Any], let id = relay["id"] as? String, let epoch = relay["epoch"] as? Int
        else { throw SubprocessError.exited(status: Int32(answer.status), stdout: answer.text, stderr: "no identity in the health answer") }
        return "\(id)/\(epoch)"
    }

    /// Runs `sync-relay ARGUMENTS` on this relay's data (`--database`, `--config`) to completion.
    public func admin(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Subprocess.run(Products.path("sync-relay"), arguments + storeArguments, timeout: .seconds(30))
    }

    /// Creates an account (quota in bytes when given).
    public func createAccount(_ name: String, quotaBytes: Int? = nil) async throws {
        let result = try await admin(["account", "create", name] + (quotaBytes.map { ["--quota-bytes", String($0)] } ?? []))
        guard result.status == 0 else { throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr) }
    }

    /// Issues a token and returns it.
    public func issueToken(_ account: String, node: String? = nil) async throws -> String {
        let result = try await admin(["token", "issue", account] + (node.map { ["--node", $0] } ?? []))
        guard result.status == 0, let token = result.stdout.split(separator: "\n").first else {
            throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr)
        }
        return String(token)
    }

    /// Issues a token for `account` and writes it to a file in this relay's directory (owner-only).
    public func tokenFile(_ account: String, node: String? = nil, name: String) async throws -> String {
        let token = try await issueToken(account, node: node)
        let path = try directory.write(name, token + "\n")
        try DurableFiles.setPermissions(of: path, to: 0o600)
        return path
    }
}
