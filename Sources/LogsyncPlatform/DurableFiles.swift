#if canImport(Glibc)
import Glibc
#endif

/// Durable file operations for write-once files: the only place logsync writes, syncs and renames files.
public enum DurableFiles {
    public enum PublishResult: Sendable, Equatable {
        /// The file is now in place and durable.
        case created
        /// A file of that name already existed; the new bytes were not written over it.
        case existed
    }

    /// Writes `bytes` to `temporaryPath` (which must not exist), fsyncs it, then moves it to `path`
    /// without replacing an existing file, and fsyncs the directory, so the name appears only with its
    /// complete content and survives a crash. The temporary file is removed on every path out.
    public static func publish(_ bytes: [UInt8], at path: String, temporaryPath: String) throws(SystemError) -> PublishResult {
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .last("open", path: temporaryPath) }
        var closed = false
        defer {
            if !closed { close(fd) }
            unlink(temporaryPath)
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .last("write", path: temporaryPath)
            }
            offset += written
        }
        guard fsync(fd) == 0 else { throw .last("fsync", path: temporaryPath) }
        closed = true
        guard close(fd) == 0 else { throw .last("close", path: temporaryPath) }
        // link(2) refuses to replace an existing name, which rename(2) would do silently. File systems
        // without hard links (some FUSE and network mounts) fall back to rename after a check.
        if link(temporaryPath, path) != 0 {
            switch errno {
            case EEXIST:
                return .existed
            case EPERM, EOPNOTSUPP, EXDEV, EMLINK:
                if access(path, F_OK) == 0 { return .existed }
                guard rename(temporaryPath, path) == 0 else { throw .last("rename", path: path) }
            default:
                throw .last("link", path: path)
            }
        }
        try syncDirectory(containing: path)
        return .created
    }

    /// fsyncs the directory holding `path`, making a new name in it durable.
    public static func syncDirectory(containing path: String) throws(SystemError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .last("open", path: directory) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .last("fsync", path: directory) }
    }

    /// The whole file, or nil when it is larger than `maximumBytes` (nothing is read then).
    public static func read(_ path: String, maximumBytes: Int) throws(SystemError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .last("open", path: path) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .last("fstat", path: path) }
        guard Int(info.st_size) <= maximumBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .last("read", path: path)
            }
            if count == 0 { break }
            offset += count
        }
        return Array(bytes[0..<offset])
    }

    /// Creates a directory and its parents (mode 0755); succeeds when it exists.
    public static func makeDirectories(_ path: String) throws(SystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0, errno != EEXIST { throw .last("mkdir", path: current) }
        }
    }
}
