#if canImport(Glibc)
import Glibc
#endif

/// A file that grows by a byte at each change of something kept elsewhere (the relay's tokens), so that
/// another process holding a copy of that thing in memory can tell with one `stat` whether its copy is
/// still current: the file's size only grows, and a file deleted or replaced has another inode.
public enum ChangeMarker {
    /// What a `stat` of the marker says; equal stamps mean no change in between.
    public struct Stamp: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
    }

    /// The marker's stamp now, or nil when it does not exist or cannot be looked at.
    public static func stamp(_ path: String) -> Stamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Stamp(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size))
    }

    /// Records a change: appends a byte, creating the marker when missing (mode 0644 less the umask).
    public static func mark(_ path: String) throws(SystemError) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .last("open", path: path) }
        defer { close(descriptor) }
        var byte: UInt8 = 0x2E
        guard write(descriptor, &byte, 1) == 1 else { throw .last("write", path: path) }
    }

    /// Creates the marker, empty, unless it exists.
    public static func create(_ path: String) throws(SystemError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .last("open", path: path) }
        close(descriptor)
    }
}
