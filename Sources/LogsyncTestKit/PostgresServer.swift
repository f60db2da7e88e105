import Foundation
import LogsyncPlatform
import Synchronization

/// A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` into a temporary folder, served on a
/// Unix socket in that folder and a loopback port, stopped when ``stop()`` is called or when the process
/// that started it ends (the server runs under a small shell that stops it with SIGINT — PostgreSQL's
/// fast shutdown — once its standard input, held by this process, closes). As root (CI), the server's
/// tools run as the `postgres` user, since PostgreSQL refuses to run as root (docs: PLATFORM.md).
public final class PostgresServer: Sendable {
    public let directory: TemporaryDirectory
    public let port: Int
    /// The folder of the server's Unix socket (`.s.PGSQL.PORT`).
    public var socketDirectory: String { directory.path }
    public var dataDirectory: String { directory.file("data") }
    public var logFile: String { directory.file("server.log") }
    private let server = Mutex<Subprocess?>(nil)
    private let databases = Atomic<Int>(0)

    /// Where Debian's PostgreSQL keeps `initdb`, `postgres`, `psql` and `pgbench`, or nil when it is not
    /// installed (`scripts/install-deps.sh` installs it).
    public static let binDirectory: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
    }()

    public static var installed: Bool { binDirectory != nil }

    static func tool(_ name: String) throws -> String {
        guard let folder = binDirectory else {
            throw PostgresServerError("PostgreSQL is not installed (scripts/install-deps.sh installs Debian's postgresql package)")
        }
        return "\(folder)/\(name)"
    }

    static var runsAsRoot: Bool { CurrentUser.isRoot }

    /// `command` as the server's user: `runuser -u postgres --` when root.
    static func asServerUser(_ command: [String]) -> (String, [String]) {
        runsAsRoot ? ("/usr/sbin/runuser", ["-u", "postgres", "--"] + command) : (command[0], Array(command.dropFirst()))
    }

    /// Makes a new cluster and starts it. `settings` are added as `-c NAME=VALUE` server settings.
    public static func start(_ label: String = "pg", settings: [String: String] = [:]) async throws -> PostgresServer {
        try await start(label, settings: settings, removeWhenStopped: false)
    }

    /// `removeWhenStopped`: the shell deletes the cluster's folder once the server stopped (the shared
    /// server, whose owner is never deinitialized).
    static func start(_ label: String, settings: [String: String], removeWhenStopped: Bool) async throws -> PostgresServer {
        let server = try PostgresServer(label)
        server.removeWhenStopped.withLock { $0 = removeWhenStopped }
        if runsAsRoot {
            do {
                try DurableFiles.giveOwnership(of: server.directory.path, toUser: "postgres")
            } catch {
                throw PostgresServerError("cannot give \(server.directory.path) to the postgres user: \(error)")
            }
        }
        let (initdb, arguments) = asServerUser([
            try tool("initdb"), "-D", server.dataDirectory, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions",
        ])
        let made = try await Subprocess.run(initdb, arguments, timeout: .seconds(120))
        guard made.status == 0 else { throw PostgresServerError("initdb failed (\(made.status)): \(made.stderr)") }
        try await server.startServer(settings: settings)
        return server
    }

    private init(_ label: String) throws {
        directory = try TemporaryDirectory(label)
        port = try Self.freePort()
    }

    private let serverSettings = Mutex<[String: String]>([:])
    private let removeWhenStopped = Mutex(false)

    private func startServer(settings: [String: String]) async throws {
        serverSettings.withLock { $0 = settings }
        var options = ["listen_addresses": "127.0.0.1", "max_connections": "300", "unix_socket_permissions": "0777"]
        for (key, value) in settings { options[key] = value }
        let flags = options.sorted { $0.key < $1.key }.map { "-c \($0.key)=\($0.value)" }.joined(separator: " ")
        let script =
            "\(try Self.tool("postgres")) -D \(dataDirectory) -k \(socketDirectory) -p \(port) \(flags) >>\(logFile) 2>&1 & pid=$!; cat >/dev/null; kill -INT $pid; wait $pid\(removeWhenStopped.withLock { $0 } ? "; rm -rf \(directory.path)" : "")"
        let (shell, arguments) = Self.asServerUser(["/bin/sh", "-c", script])
        let process = try Subprocess(shell, arguments)
        server.withLock { $0 = process }
        try await waitUntilReady(process)
    }

    private func waitUntilReady(_ process: Subprocess) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let result = try? await Subprocess.run(try Self.tool("pg_isready"), ["-h", socketDirectory, "-p", String(port), "-U", "postgres"], timeout: .seconds(10)),
                result.status == 0
            {
                return
            }
            if process.outputEnded {
                throw PostgresServerError("PostgreSQL exited at start: \((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw PostgresServerError("PostgreSQL did not become ready within 60 s: \((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")")
    }

    /// Fast shutdown: sessions are ended, what committed is on disk. Waits for the server to exit.
    public func stop() async throws {
        guard let process = server.withLock({ state in defer { state = nil }; return state }) else { return }
        try process.closeInput()
        _ = try await process.waitForExit(timeout: .seconds(60))
    }

    /// Stops the server and starts it again on the same folder and port.
    public func restart() async throws {
        try await stop()
        try await startServer(settings: serverSettings.withLock { $0 })
    }

    deinit {
        try? server.withLock { $0 }?.closeInput()
    }

    /// Creates a database of its own for a test, and returns its name.
    public func createDatabase(_ prefix: String = "t") async throws -> String {
        let name = "\(prefix)_\(ProcessInfo.processInfo.processIdentifier)_\(databases.wrappingAdd(1, ordering: .relaxed).newValue)"
        _ = try await sql("CREATE DATABASE \(name)")
        return name
    }

    /// Runs SQL with `psql` as the superuser and returns its unaligned, tuples-only output.
    @discardableResult
    public func sql(_ statement: String, database: String = "postgres") async throws -> String {
        let result = try await Subprocess.run(
            try Self.tool("psql"),
            ["-h", socketDirectory, "-p", String(port), "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-tA", "-c", statement],
            timeout: .seconds(120))
        guard result.status == 0 else { throw PostgresServerError("psql failed (\(result.status)) on \(statement): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `pg_dump` of a database, as SQL text.
    public func dump(database: String) async throws -> String {
        let result = try await Subprocess.run(
            try Self.tool("pg_dump"), ["-h", socketDirectory, "-p", String(port), "-U", "postgres", database], timeout: .seconds(120))
        guard result.status == 0 else { throw PostgresServerError("pg_dump failed (\(result.status)): \(result.stderr)") }
        return result.stdout
    }

    /// The `[storage]` and `[postgres]` lines of a `sync-relay.toml` that use `database` on this server.
    public func relayConfiguration(database: String, extra: String = "") -> String {
        """
        [storage]
        backend = "postgres"

        [postgres]
        socket_directory = "\(socketDirectory)"
        port = \(port)
        user = "postgres"
        database = "\(database)"
        \(extra)
        """
    }

    /// One server shared by the tests of a process, each on a database of its own: a cluster takes
    /// seconds to make. Stopped when the test process ends.
    public static func shared() async throws -> PostgresServer { try await sharedServer.value }

    private static let sharedServer = Task { try await PostgresServer.start("pgshared", settings: [:], removeWhenStopped: true) }

    /// A loopback port nobody listens on now.
    static func freePort() throws -> Int {
        do {
            return try LoopbackListener.listen(at: .init(host: "127.0.0.1", port: 0)).port
        } catch {
            throw PostgresServerError("cannot pick a free loopback port: \(error)")
        }
    }
}

public struct PostgresServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
