#if canImport(Glibc)
import Glibc
#endif

/// A small file rewritten in place from its first byte, many times and cheaply: one `pwrite` each, no
/// `fsync` (the page cache keeps it across a crash of the process, not across a power cut). For a note
/// that only moves forward and that a later process compares with something durable (the relay's
/// record of what it served, `docs/relay-protocol.md`): a note that lags is harmless there, one that
/// runs ahead is impossible, since it is written after what it describes was committed.
///
/// Every write has the same length, so a shorter one never leaves the tail of a longer one behind.
public final class RewrittenFile: Sendable {
    public let path: String
    private let descriptor: Int32

    /// Opens (creating, mode 0644 less the umask) the file at `path` for rewriting.
    public init(path: String) throws(SystemError) {
        self.path = path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else { throw .last("open", path: path) }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Writes `bytes` over the start of the file; `truncating`: then cuts anything after them (a file
    /// left by something else), without a moment where the file is empty.
    public func write(_ bytes: [UInt8], truncating: Bool = false) throws(SystemError) {
        try Directory.writeAll(bytes, to: descriptor, path: path, at: 0)
        if truncating, ftruncate(descriptor, off_t(bytes.count)) != 0 { throw .last("ftruncate", path: path) }
    }

    /// Makes what was written durable (at a clean stop).
    public func sync() throws(SystemError) {
        guard fsync(descriptor) == 0 else { throw .last("fsync", path: path) }
    }
}
