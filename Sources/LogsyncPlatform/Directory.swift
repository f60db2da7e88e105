#if canImport(Glibc)
import Glibc
#endif

/// What a directory entry is, as the file system records it: a link is a link, never its target.
public enum FileKind: String, Sendable, Hashable, CustomStringConvertible {
    case regular = "regular file"
    case directory
    case symbolicLink = "symbolic link"
    case fifo = "FIFO"
    case socket
    case characterDevice = "character device"
    case blockDevice = "block device"
    case unknown = "file of unknown kind"

    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        default: self = .unknown
        }
    }

    public var description: String { rawValue }
}

/// An open directory in a folder that other people and programs write (the shared folder): the one place
/// that lists, reads and writes files there. Every call is relative to the directory's descriptor, so a
/// folder renamed or replaced by a link after it was opened is never followed.
///
/// - Directories are opened `O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC`: a link in their place is
///   refused (only the first, configured, folder may be reached through links, when asked).
/// - Files are looked at with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened only when they are regular files,
///   with `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`, then checked again with `fstat`: a FIFO, a
///   socket, a device or a link is refused before a byte is read, and opening never waits (a FIFO opened
///   without `O_NONBLOCK` waits for a writer forever).
public final class Directory: Sendable {
    public let path: String
    let descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Opens the directory at `path`. `followingLink`: the last component may be a symbolic link (a
    /// configured folder); otherwise a link there is refused (`ELOOP`).
    public static func open(_ path: String, followingLink: Bool = false) throws(SystemError) -> Directory {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followingLink ? 0 : O_NOFOLLOW)
        let fd = Glibc.open(path, flags)
        guard fd >= 0 else { throw .last("open", path: path) }
        return Directory(path: path, descriptor: fd)
    }

    func child(_ name: String) -> String { path + "/" + name }

    /// The directory `name` in this one, never through a link; created (mode 0755) first when `create`
    /// and it does not exist.
    public func subdirectory(_ name: String, create: Bool = false) throws(SystemError) -> Directory {
        if create, mkdirat(descriptor, name, 0o755) != 0, errno != EEXIST { throw .last("mkdir", path: child(name)) }
        let fd = openat(descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw .last("open", path: child(name)) }
        return Directory(path: child(name), descriptor: fd)
    }

    /// One entry of a listing.
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var kind: FileKind
    }

    /// The entries (without `.` and `..`), each with its kind as the directory records it; links are not
    /// followed.
    public func entries() throws(SystemError) -> [Entry] {
        // fdopendir owns the descriptor it is given: give it a duplicate, positioned at the start.
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw .last("dup", path: path) }
        guard let stream = fdopendir(duplicate) else {
            let error = SystemError.last("fdopendir", path: path)
            close(duplicate)
            throw error
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var entries: [Entry] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw .last("readdir", path: path) }
                return entries
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." { continue }
            let kind: FileKind
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_REG): kind = .regular
            case Int32(DT_DIR): kind = .directory
            case Int32(DT_LNK): kind = .symbolicLink
            case Int32(DT_FIFO): kind = .fifo
            case Int32(DT_SOCK): kind = .socket
            case Int32(DT_CHR): kind = .characterDevice
            case Int32(DT_BLK): kind = .blockDevice
            default:
                // The file system does not say (some network file systems): ask for the entry itself.
                guard let asked = self.kind(of: name) else { continue }
                kind = asked
            }
            entries.append(Entry(name: name, kind: kind))
        }
    }

    /// What `name` is, without following a link; nil when it does not exist.
    public func kind(of name: String) -> FileKind? {
        status(of: name)?.kind
    }

    /// An entry's kind and identity, and when it last changed: enough to tell whether a folder changed
    /// since it was listed.
    public struct EntryStatus: Sendable, Hashable {
        public var kind: FileKind
        public var inode: UInt64
        /// Last modification (for a folder: an entry added, removed or renamed), in nanoseconds since 1970.
        public var modified: Int64
        /// Last status change, in nanoseconds since 1970.
        public var changed: Int64
    }

    /// ``EntryStatus`` of `name`, without following a link (`fstatat(AT_SYMLINK_NOFOLLOW)`); nil when it
    /// does not exist.
    public func status(of name: String) -> EntryStatus? {
        var info = stat()
        guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return EntryStatus(
            kind: FileKind(mode: info.st_mode), inode: UInt64(info.st_ino),
            modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            changed: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }

    /// What reading a file found.
    public enum FileRead: Sendable, Equatable {
        /// Its whole content.
        case bytes([UInt8])
        /// It is larger than the caller allows (its size); nothing was read.
        case tooLarge(Int)
        /// It is not a regular file; it was not opened (or, replaced meanwhile, closed before reading).
        case notRegular(FileKind)
    }

    /// Reads the regular file `name` whole, refusing anything else (see the type's notes).
    public func read(_ name: String, maximumBytes: Int) throws(SystemError) -> FileRead {
        if let kind = kind(of: name), kind != .regular { return .notRegular(kind) }
        let fd = openat(descriptor, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            // Replaced between the look and the open: say what it is now, if it is something else.
            if let kind = kind(of: name), kind != .regular { return .notRegular(kind) }
            throw .last("open", path: child(name))
        }
        defer { close(fd) }
        return try Self.readOpened(fd, path: child(name), maximumBytes: maximumBytes)
    }

    /// Reads the regular file at `path` whole (opened `O_NONBLOCK`, checked with `fstat`, as in
    /// ``read(_:maximumBytes:)``), for files outside the shared folder: configuration, schema, lock files.
    /// `followingLinks`: whether a link at the last component is followed (an operator's own link).
    public static func readFile(atPath path: String, maximumBytes: Int, followingLinks: Bool = true) throws(SystemError) -> FileRead {
        let fd = Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            if errno == ELOOP, !followingLinks { return .notRegular(.symbolicLink) }
            throw .last("open", path: path)
        }
        defer { close(fd) }
        return try readOpened(fd, path: path, maximumBytes: maximumBytes)
    }

    private static func readOpened(_ fd: Int32, path: String, maximumBytes: Int) throws(SystemError) -> FileRead {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .last("fstat", path: path) }
        let kind = FileKind(mode: info.st_mode)
        guard kind == .regular else { return .notRegular(kind) }
        guard Int(info.st_size) <= maximumBytes else { return .tooLarge(Int(info.st_size)) }
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
        return .bytes(Array(bytes[0..<offset]))
    }

    public enum PublishResult: Sendable, Equatable {
        /// The file is now in place and durable.
        case created
        /// A file of that name already existed; the new bytes were not written over it.
        case existed
    }

    /// Writes `bytes` to `temporaryName` (which must not exist), fsyncs it, then gives it the name `name`
    /// without replacing an existing file, and fsyncs this directory, so the name appears only with its
    /// complete content and survives a crash. The temporary file is removed on every path out.
    public func publish(_ bytes: [UInt8], as name: String, temporaryName: String) throws(SystemError) -> PublishResult {
        try publish(as: name, temporaryName: temporaryName, chunks: Self.single(bytes))
    }

    /// Chunks of content held whole: `bytes` once, then the end.
    static func single(_ bytes: [UInt8]) -> () throws(SystemError) -> [UInt8]? {
        var sent = false
        return { () throws(SystemError) -> [UInt8]? in
            defer { sent = true }
            return sent ? nil : bytes
        }
    }

    /// ``publish(_:as:temporaryName:)`` for content that comes in chunks (`next` returns nil at the end):
    /// a file larger than memory should hold, such as a baseline.
    public func publish(as name: String, temporaryName: String, chunks next: () throws(SystemError) -> [UInt8]?) throws(SystemError) -> PublishResult {
        try writeTemporary(temporaryName, chunks: next)
        defer { unlinkat(descriptor, temporaryName, 0) }
        // link(2) refuses to replace an existing name (a link or a FIFO included), which rename(2) would do
        // silently. File systems without hard links (some FUSE and network mounts) fall back to rename
        // after a check.
        if linkat(descriptor, temporaryName, descriptor, name, 0) != 0 {
            switch errno {
            case EEXIST:
                return .existed
            case EPERM, EOPNOTSUPP, EXDEV, EMLINK:
                if kind(of: name) != nil { return .existed }
                guard renameat(descriptor, temporaryName, descriptor, name) == 0 else { throw .last("rename", path: child(name)) }
            default:
                throw .last("link", path: child(name))
            }
        }
        try sync()
        return .created
    }

    /// Writes the chunks to `temporaryName` (which must not exist) and fsyncs it; the file is removed if
    /// anything fails. What comes next (a link, a rename) is the caller's, as is removing it afterwards.
    func writeTemporary(_ temporaryName: String, chunks next: () throws(SystemError) -> [UInt8]?) throws(SystemError) {
        let temporaryPath = child(temporaryName)
        let fd = openat(descriptor, temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .last("open", path: temporaryPath) }
        var closed = false
        var written = false
        defer {
            if !closed { close(fd) }
            if !written { unlinkat(descriptor, temporaryName, 0) }
        }
        while let bytes = try next() {
            try Self.writeAll(bytes, to: fd, path: temporaryPath)
        }
        guard fsync(fd) == 0 else { throw .last("fsync", path: temporaryPath) }
        closed = true
        guard close(fd) == 0 else { throw .last("close", path: temporaryPath) }
        written = true
    }

    /// Writes all of `bytes` at the descriptor's offset, or from byte `position` of the file (`pwrite`).
    static func writeAll(_ bytes: [UInt8], to fd: Int32, path: String, at position: off_t? = nil) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                position.map { pwrite(fd, buffer.baseAddress! + offset, buffer.count - offset, $0 + off_t(offset)) }
                    ?? write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw .last(position == nil ? "write" : "pwrite", path: path)
            }
            offset += written
        }
    }

    /// fsyncs the directory, making new names in it durable.
    public func sync() throws(SystemError) {
        guard fsync(descriptor) == 0 else { throw .last("fsync", path: path) }
    }
}
