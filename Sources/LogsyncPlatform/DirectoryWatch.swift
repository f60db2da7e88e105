#if canImport(Glibc)
import Glibc
#endif

/// An inotify watch on directories, with a pipe to wake the waiting thread on shutdown. The only place
/// logsync calls inotify and poll(2).
///
/// The file descriptors are fixed at creation; `add` and `wait` may be called from different threads
/// (inotify allows it), `stop` from any thread. Only directories are watched (`IN_ONLYDIR`).
public final class DirectoryWatch: Sendable {
    private let inotifyFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    private static let events = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR)

    /// Returns nil when inotify is not available (some containers, exhausted watch limits); the caller
    /// then polls. `followingLink`: whether `directory` may be a symbolic link to the directory to watch.
    public init?(directory: String, followingLink: Bool = true) {
        let fd = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, directory, Self.events | (followingLink ? 0 : UInt32(IN_DONT_FOLLOW))) >= 0 else {
            close(fd)
            return nil
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            close(fd)
            return nil
        }
        for end in fds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        inotifyFD = fd
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(inotifyFD)
        close(wakeRead)
        close(wakeWrite)
    }

    public enum Wake: Sendable { case event, timeout, stopped }

    /// Adds another directory to the same watch, never through a symbolic link (`IN_DONT_FOLLOW`); false
    /// when inotify refuses (missing directory, a link, limits).
    @discardableResult
    public func add(directory: String) -> Bool {
        inotify_add_watch(inotifyFD, directory, Self.events | UInt32(IN_DONT_FOLLOW)) >= 0
    }

    /// Blocks until a file in the directory changes, `timeoutMilliseconds` pass, or ``stop()`` is called.
    public func wait(timeoutMilliseconds: Int32) -> Wake {
        var fds = [pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&fds, 2, timeoutMilliseconds)
        if ready <= 0 { return .timeout }
        if fds[1].revents != 0 { return .stopped }
        drain()
        return .event
    }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(inotifyFD, $0.baseAddress, $0.count) }) > 0 {}
    }

    public func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
}
