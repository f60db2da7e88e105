import CSpawn
import Dispatch
import Foundation
import Synchronization

/// A child process started with `posix_spawn`, for the tests, the benchmarks and the tour.
///
/// Not Foundation's `Process`: on Swift 6.3.1 its `run()` lists `/proc/self/fd` with a 256-byte copy
/// of each `dirent`, which reads past glibc's buffer and crashes (SIGSEGV) when the listing fills that
/// buffer, about 1,300 open descriptors (swift-corelibs-foundation #5472). The tests hold 2,200 sockets
/// open at once, and CI crashed on it. Here the child closes every descriptor above 2 with glibc's
/// `closefrom` action instead, starts with default signal dispositions and an empty signal mask (as
/// under systemd), in a process group of its own; a thread per child waits for its end and reaps it
/// under the same lock ``terminate(_:)`` signals under, so no signal reaches a reused pid.
public final class ChildProcess: Sendable {
    /// What the child gets as one of its standard streams.
    public enum Stream: Sendable {
        /// This process's own.
        case inherit
        /// `/dev/null`.
        case null
        /// A descriptor of this process (the child's end of a pipe, which the caller closes after start).
        case descriptor(Int32)
    }

    public let processIdentifier: pid_t
    public let executable: String
    private let exit = Exit()

    /// The raw `waitpid` status once the child has ended, set by the thread that reaps it.
    private final class Exit: Sendable {
        let status = Mutex<Int32?>(nil)
        let ended = DispatchGroup()
    }

    /// Starts `executable` (a path; no `PATH` search) with `arguments` after it, and `environment` (nil:
    /// this process's).
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Stream = .inherit, standardOutput: Stream = .inherit, standardError: Stream = .inherit
    ) throws(SystemError) {
        self.executable = executable
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            }
        }
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp ?? [] { free(pointer) }
        }
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer { envp in
                    posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, envp.baseAddress!)
                }
            }
            return posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, environ)
        }
        guard result == 0 else { throw SystemError(call: "posix_spawn", path: executable, errno: result) }
        processIdentifier = pid

        let (exit, child) = (self.exit, pid)
        exit.ended.enter()
        Thread.detachNewThread {
            // Wait for the end without reaping, then reap under the lock: until then the pid is the child's.
            var info = siginfo_t()
            while waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
            exit.status.withLock { status in
                var raw: Int32 = 0
                var reaped: pid_t
                repeat { reaped = waitpid(child, &raw, 0) } while reaped == -1 && errno == EINTR
                // Reaped by someone else (ECHILD): the status is lost; say it ended with 255.
                status = reaped == child ? raw : 255 << 8
            }
            exit.ended.leave()
        }
    }

    public var isRunning: Bool { exit.status.withLock { $0 == nil } }

    /// The exit code, or the number of the signal that ended the child (as Foundation's `Process`
    /// reports it); -1 while it runs.
    public var terminationStatus: Int32 {
        guard let raw = exit.status.withLock({ $0 }) else { return -1 }
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }

    /// Whether a signal ended the child (and ``terminationStatus`` is its number).
    public var endedBySignal: Bool {
        guard let raw = exit.status.withLock({ $0 }) else { return false }
        return raw & 0x7f != 0
    }

    /// Blocks until the child has ended.
    public func waitUntilExit() { exit.ended.wait() }

    /// Blocks until the child has ended or `timeout` has passed; whether it ended.
    public func wait(timeout: Duration) -> Bool {
        let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        return exit.ended.wait(timeout: .now() + .milliseconds(milliseconds)) == .success
    }

    /// Sends `signal` (SIGTERM by default) unless the child has been reaped (its pid may be another's).
    public func terminate(_ signal: Int32 = SIGTERM) {
        exit.status.withLock { if $0 == nil { _ = kill(processIdentifier, signal) } }
    }

    /// Asks the child to stop with SIGTERM and waits up to `grace` for it; then kills it with SIGKILL and
    /// waits for that. Whether it stopped within the grace period (false: it was killed). A child that
    /// had already ended gets no signal.
    @discardableResult
    public func stop(grace: Duration) -> Bool {
        terminate(SIGTERM)
        if wait(timeout: grace) { return true }
        terminate(SIGKILL)
        waitUntilExit()
        return false
    }

    /// Runs `executable` to its end; its exit status (as ``terminationStatus``) and what it wrote on
    /// stdout. Its stdin is `/dev/null`.
    public static func run(
        _ executable: String, _ arguments: [String], standardError: Stream = .inherit
    ) throws(SystemError) -> (status: Int32, output: Data) {
        let output = try pipe()
        let child = try ChildProcess(
            executable, arguments, standardInput: .null, standardOutput: .descriptor(output.write.fileDescriptor), standardError: standardError)
        try? output.write.close()
        let data = readToEnd(output.read)
        child.waitUntilExit()
        return (child.terminationStatus, data)
    }

    /// Up to `maximum` bytes from `handle`, blocking until some arrive; empty at end of file (or on an
    /// error). Retries EINTR, on which Foundation's `FileHandle` reads stop the process.
    public static func read(_ handle: FileHandle, maximum: Int = 64 << 10) -> Data {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            return count > 0 ? Data(buffer[0..<count]) : Data()
        }
    }

    /// Everything `handle` gives until end of file.
    public static func readToEnd(_ handle: FileHandle) -> Data {
        var data = Data()
        while case let chunk = read(handle), !chunk.isEmpty { data.append(chunk) }
        return data
    }

    /// A pipe whose ends are closed on exec, so no other child inherits them; the child gets its end
    /// through ``Stream/descriptor(_:)``.
    public static func pipe() throws(SystemError) -> (read: FileHandle, write: FileHandle) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe2(&descriptors, O_CLOEXEC) == 0 else { throw SystemError.last("pipe2") }
        return (FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true), FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: true))
    }
}
