#if canImport(Glibc)
import Glibc
#endif

/// An inotify watch on directories, with a pipe to wake the waiting thread on shutdown. The only place
/// logsync calls inotify and poll(2).
///
/// The file descriptors are fixed at creation; `add` and `wait` may be called from different threads
/// (inotify allows it), `stop` from any thread. Only directories are watched (`IN_ONLYDIR`).
///
/// ``wait(timeoutMilliseconds:)`` only says that something changed; ``waitForEvents(timeoutMilliseconds:)``
/// also says which names, so that a reader can look at those alone instead of listing the directory.
public final class DirectoryWatch: Sendable {
    private let inotifyFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let mask: UInt32
    /// The watch of the directory given at creation (see ``Event/watch``).
    public let rootWatch: Int32

    private static let changes = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR)
    private static let removals = UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM)

    /// Returns nil when inotify is not available (some containers, exhausted watch limits); the caller
    /// then polls. `followingLink`: whether `directory` may be a symbolic link to the directory to watch.
    /// `reportingRemovals`: names deleted or moved away are events too.
    public init?(directory: String, followingLink: Bool = true, reportingRemovals: Bool = false) {
        let fd = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        mask = Self.changes | (reportingRemovals ? Self.removals : 0)
        let root = inotify_add_watch(fd, directory, mask | (followingLink ? 0 : UInt32(IN_DONT_FOLLOW)))
        guard root >= 0 else {
            close(fd)
            return nil
        }
        rootWatch = root
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

    /// One change inotify reported.
    public struct Event: Sendable, Hashable {
        /// Which watched directory (``rootWatch`` or what ``addWatch(directory:)`` returned); -1 when
        /// the kernel's queue overflowed.
        public var watch: Int32
        /// The entry's name in that directory; empty for events about the directory itself.
        public var name: String
        /// The entry is a directory.
        public var isDirectory: Bool
        /// Events were lost (`IN_Q_OVERFLOW`): whatever the caller remembers must be checked again.
        public var overflowed: Bool
        /// The watch ended (`IN_IGNORED`: the directory was removed or unmounted).
        public var watchEnded: Bool
    }

    /// Adds another directory to the same watch, never through a symbolic link (`IN_DONT_FOLLOW`); false
    /// when inotify refuses (missing directory, a link, limits).
    @discardableResult
    public func add(directory: String) -> Bool {
        addWatch(directory: directory) != nil
    }

    /// Adds another directory as ``add(directory:)`` does, and returns its watch (nil when refused).
    public func addWatch(directory: String) -> Int32? {
        let watch = inotify_add_watch(inotifyFD, directory, mask | UInt32(IN_DONT_FOLLOW))
        return watch >= 0 ? watch : nil
    }

    /// Blocks like ``wait(timeoutMilliseconds:)``, and returns the events that woke it (empty unless
    /// `.event`).
    public func waitForEvents(timeoutMilliseconds: Int32) -> (Wake, [Event]) {
        var fds = [pollfd(fd: inotifyFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&fds, 2, timeoutMilliseconds)
        if ready <= 0 { return (.timeout, []) }
        if fds[1].revents != 0 { return (.stopped, []) }
        return (.event, readEvents())
    }

    /// Reads every queued event (`struct inotify_event`: wd, mask, cookie, len, then the name padded with NULs).
    private func readEvents() -> [Event] {
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(inotifyFD, $0.baseAddress, $0.count) }
            guard count > 0 else { return events }
            var offset = 0
            buffer.withUnsafeBytes { raw in
                while offset + 16 <= count {
                    let watch = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = raw[(offset + 16)..<min(offset + 16 + length, count)]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    events.append(Event(
                        watch: watch, name: name, isDirectory: mask & UInt32(IN_ISDIR) != 0,
                        overflowed: mask & UInt32(IN_Q_OVERFLOW) != 0, watchEnded: mask & UInt32(IN_IGNORED) != 0))
                    offset += 16 + length
                }
            }
        }
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
