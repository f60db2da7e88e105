import Foundation
import LogsyncPlatform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where the package's executables are built: `.build/debug` next to the sources, unless
/// `LOGSYNC_BIN_DIR` says otherwise. `scripts/test.sh` builds them before the tests run.
public enum Products {
    /// The package's root folder (where `Package.swift` is).
    public static var packageRoot: String {
        // Sources/LogsyncTestKit/Subprocess.swift → the package root.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// `LOGSYNC_BIN_DIR` when set, else the package's `.build/debug` (where `swift build` puts what the
    /// tests start).
    public static var directory: String {
        if let override = ProcessInfo.processInfo.environment["LOGSYNC_BIN_DIR"], !override.isEmpty { return override }
        return packageRoot + "/.build/debug"
    }

    public static func path(_ name: String) -> String { directory + "/" + name }

    /// Where to look for a sibling executable of the running one (a benchmark starting `syncd`):
    /// `LOGSYNC_BIN_DIR` when set, else the running executable's own folder.
    public static var siblingFolders: [String] {
        if let override = ProcessInfo.processInfo.environment["LOGSYNC_BIN_DIR"], !override.isEmpty { return [override] }
        var folders: [String] = []
        if CommandLine.arguments[0].contains("/") {
            folders.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path)
        }
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let folder = URL(fileURLWithPath: executable).deletingLastPathComponent().path
            if !folders.contains(folder) { folders.append(folder) }
        }
        return folders
    }

    /// The executable `name` built next to the running one, or nil with the folders it looked in.
    public static func sibling(_ name: String) -> (path: String?, searched: [String]) {
        let folders = siblingFolders
        return (folders.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }, folders)
    }
}

/// Programs from outside the package that some tests need. A test that needs one is disabled with
/// `.enabled(if: Tools.installed(…), …)` when it is missing, so it shows as skipped with why, never passes.
public enum Tools {
    /// The first of `names` found as an executable on `PATH` (or as given, when a path), or nil.
    public static func find(_ names: String...) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for name in names {
            if name.contains("/") { if FileManager.default.isExecutableFile(atPath: name) { return name } else { continue } }
            for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)") {
                return "\(folder)/\(name)"
            }
        }
        return nil
    }

    public static func installed(_ name: String) -> Bool { find(name) != nil }
}

/// A real child process whose output lines can be awaited with a deadline.
public final class Subprocess: Sendable {
    /// Started with `posix_spawn` (``ChildProcess``), not Foundation's `Process`, which crashes when this
    /// process holds many descriptors open.
    public let process: ChildProcess
    private let output = Mutex(Output())
    /// This side of the child's stdin.
    private let input: FileHandle

    private struct Output {
        /// Bytes, not text, so a character split across two reads decodes whole.
        var stdout = Data()
        var stderr = Data()
        /// How many of stdout and stderr have reached end of file: all output has been read once both have.
        var endedStreams = 0
    }

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let stdin = try ChildProcess.pipe()
        let out = try ChildProcess.pipe()
        let err = try ChildProcess.pipe()
        process = try ChildProcess(
            executable, arguments, environment: environment, standardInput: .descriptor(stdin.read.fileDescriptor),
            standardOutput: .descriptor(out.write.fileDescriptor), standardError: .descriptor(err.write.fileDescriptor))
        // The child's ends are its own now: each stream ends when the child (and what it started) closes it.
        for end in [stdin.read, out.write, err.write] { try? end.close() }
        input = stdin.write
        read(out.read, isStandardOutput: true)
        read(err.read, isStandardOutput: false)
    }

    /// Reads a pipe on a thread of its own with blocking reads until end of file, so every byte the
    /// child wrote is appended, in order, before the stream counts as ended. (Foundation's
    /// `readabilityHandler` may run its handler concurrently on Linux, so the end-of-file call could
    /// overtake the last chunk; CI once lost the tail of a command's output that way. Its `availableData`
    /// stops the process on EINTR.)
    private func read(_ handle: FileHandle, isStandardOutput: Bool) {
        Thread.detachNewThread { [weak self] in
            while true {
                let data = ChildProcess.read(handle)
                guard !data.isEmpty, let self else { break }
                self.output.withLock { output in
                    if isStandardOutput { output.stdout.append(data) } else { output.stderr.append(data) }
                }
            }
            try? handle.close()
            self?.output.withLock { $0.endedStreams += 1 }
        }
    }

    /// Runs a command to completion (bounded by `timeout`) and returns its exit status and output.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try Subprocess(executable, arguments, environment: environment)
        try child.closeInput()
        let status = try await child.waitForExit(timeout: timeout)
        return (status, child.stdout, child.stderr)
    }

    /// Whether both stdout and stderr have reached their end (the child and anything holding its pipes are
    /// gone), so that ``stdout`` and ``stderr`` hold everything.
    public var outputEnded: Bool { output.withLock { $0.endedStreams == 2 } }

    public var stdout: String { String(decoding: output.withLock { $0.stdout }, as: UTF8.self) }
    public var stderr: String { String(decoding: output.withLock { $0.stderr }, as: UTF8.self) }

    public func send(_ text: String) throws {
        try input.write(contentsOf: Data(text.utf8))
    }

    public func closeInput() throws {
        try input.close()
    }

    /// Waits until stdout has a line starting with `prefix` and returns that line; fails early when the
    /// process exits without printing it.
    public func line(startingWith prefix: String, timeout: Duration = .seconds(30)) async throws -> String {
        func find() -> String? { stdout.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init) }
        var exited = false
        let found = try await poll(timeout: timeout) { () -> String? in
            if let line = find() { return line }
            // Gone without it: one last look once its output is all read.
            if !process.isRunning, output.withLock({ $0.endedStreams == 2 }) { exited = true; return "" }
            return nil
        }
        if let found, !found.isEmpty { return found }
        if exited { throw SubprocessError.exited(status: process.terminationStatus, stdout: stdout, stderr: stderr) }
        throw SubprocessError.timedOut(waitingFor: prefix, stdout: stdout, stderr: stderr)
    }

    /// Waits until stdout has a line containing `text` and returns that line.
    public func line(containing text: String, timeout: Duration = .seconds(30)) async throws -> String {
        try await output(timeout: timeout, waitingFor: text) { stdout in
            stdout.split(separator: "\n").first { $0.contains(text) }.map(String.init)
        }
    }

    /// Waits until `find` finds what it looks for in the stdout printed so far, and returns it;
    /// `description` names what is awaited when the deadline passes.
    public func output<Found>(
        timeout: Duration = .seconds(30), waitingFor description: String, _ find: (String) -> Found?
    ) async throws -> Found {
        guard let found = try await poll(timeout: timeout, every: .milliseconds(1), { find(stdout) }) else {
            throw SubprocessError.timedOut(waitingFor: description, stdout: stdout, stderr: stderr)
        }
        return found
    }

    /// SIGTERM, then waits up to `timeout` for the exit; returns the status.
    public func terminate(timeout: Duration = .seconds(30)) async throws -> Int32 {
        process.terminate(SIGTERM)
        return try await waitForExit(timeout: timeout)
    }

    public func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        guard try await poll(timeout: timeout, every: .milliseconds(5), { process.isRunning ? nil : true }) != nil else {
            process.terminate(SIGKILL)
            throw SubprocessError.timedOut(waitingFor: "exit", stdout: stdout, stderr: stderr)
        }
        // Read the last output: both pipes reach end of file once the child and any grandchildren holding
        // them are gone (bounded, in case a grandchild keeps them open).
        _ = try await poll(timeout: .seconds(30), every: .milliseconds(1)) { output.withLock { $0.endedStreams == 2 } ? true : nil }
        return process.terminationStatus
    }

    public func kill9() async throws {
        process.terminate(SIGKILL)
        _ = try await waitForExit(timeout: .seconds(30))
    }

    deinit {
        process.terminate(SIGKILL)
    }
}

public enum SubprocessError: Error, CustomStringConvertible {
    case timedOut(waitingFor: String, stdout: String, stderr: String)
    case exited(status: Int32, stdout: String, stderr: String)

    public var description: String {
        switch self {
        case .timedOut(let what, let out, let err): return "timed out waiting for \(what); stdout: \(out) stderr: \(err)"
        case .exited(let status, let out, let err): return "exited with \(status); stdout: \(out) stderr: \(err)"
        }
    }
}

/// The sqlite3 shell, installed by scripts/install-deps.sh.
public let sqliteShell = "/usr/bin/sqlite3"

/// Runs `sql` on the store at `path` with the sqlite3 shell, a program that is not logsync, as a user
/// would: it waits up to 10 s for a lock another connection holds (syncd's rounds take it briefly).
public func runSQLiteShell(on path: String, _ sql: String) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await Subprocess.run(sqliteShell, ["-cmd", ".timeout 10000", path, sql])
}
