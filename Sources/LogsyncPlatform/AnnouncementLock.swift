#if canImport(Glibc)
import Glibc
#endif

/// A one-byte advisory lock on a file that processes hold *shared* to announce that they want something,
/// and that one party *probes* to learn whether anyone does, without ever taking it.
///
/// Linux open-file-description locks (`F_OFD_SETLK`, `F_OFD_GETLK`): they belong to an open file, not to
/// a process, so a probe sees an announcement made through another descriptor of the same process as
/// well as one made by another process, and the kernel drops a dead process's announcement with its
/// descriptors. Announcing and probing are one `fcntl` each and never block.
public final class AnnouncementLock: Sendable {
    public let path: String
    private let announcer: Int32
    private let prober: Int32

    // Not exported by Swift's Glibc module (they need _GNU_SOURCE); Linux's values on every architecture.
    private static let getLock: Int32 = 36  // F_OFD_GETLK
    private static let setLock: Int32 = 37  // F_OFD_SETLK

    /// Opens (creating if needed) the file at `path`.
    public init(path: String) throws(SystemError) {
        self.path = path
        let announcer = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard announcer >= 0 else { throw SystemError.last("open", path: path) }
        let prober = open(path, O_RDWR | O_CLOEXEC)
        guard prober >= 0 else {
            let error = SystemError.last("open", path: path)
            close(announcer)
            throw error
        }
        self.announcer = announcer
        self.prober = prober
    }

    /// Starts announcing (idempotent: the lock is held once, however often this is called).
    public func announce() throws(SystemError) {
        var lock = Self.byteZero(Int16(F_RDLCK))
        guard fcntl(announcer, Self.setLock, &lock) == 0 else { throw SystemError.last("fcntl(F_OFD_SETLK)", path: path) }
    }

    /// Stops announcing.
    public func withdraw() {
        var lock = Self.byteZero(Int16(F_UNLCK))
        _ = fcntl(announcer, Self.setLock, &lock)
    }

    /// Whether anyone, through any descriptor in any process (this one's announcer included), announces.
    /// A failed probe answers yes: the caller then behaves as if someone waited, which is always safe.
    public var isAnnounced: Bool {
        var lock = Self.byteZero(Int16(F_WRLCK))
        guard fcntl(prober, Self.getLock, &lock) == 0 else { return true }
        return lock.l_type != Int16(F_UNLCK)
    }

    private static func byteZero(_ type: Int16) -> flock {
        var lock = flock()
        lock.l_type = type
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        lock.l_pid = 0  // must be 0 for OFD locks
        return lock
    }

    deinit {
        close(prober)
        close(announcer)
    }
}
