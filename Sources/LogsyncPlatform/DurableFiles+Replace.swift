#if canImport(Glibc)
import Glibc
#endif

extension DurableFiles {
    /// Replaces the file at `path` with `bytes` so that a crash leaves either the old content or the
    /// new, never a mix: written to `path.tmp`, fsynced, renamed over `path`, the folder fsynced.
    public static func replace(_ path: String, with bytes: [UInt8]) throws(SystemError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .last("open", path: temporary) }
        try writeAndSync(fd, bytes, path: temporary)
        try rename(temporary, to: path)
    }

    /// Renames `source` to `destination` (in the same folder) and fsyncs that folder, so that the rename
    /// survives a power cut.
    public static func rename(_ source: String, to destination: String) throws(SystemError) {
        guard Glibc.rename(source, destination) == 0 else { throw .last("rename", path: source) }
        try syncFolder(of: destination)
    }

    /// Removes a file if it exists; succeeds when it is already gone. Call ``syncFolder(of:)`` after a
    /// group of removals to make them durable.
    public static func remove(_ path: String) throws(SystemError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw .last("unlink", path: path) }
    }

    /// fsyncs the folder that holds `path`.
    public static func syncFolder(of path: String) throws(SystemError) {
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let fd = open(folder.isEmpty ? "/" : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .last("open", path: folder) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .last("fsync", path: folder) }
    }

    /// Whether a file (of any kind) exists at `path`, without following a final link.
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// What `path` does not allow this process, checked with access(2): nil when it allows all of
    /// `mode` (`R_OK`, `W_OK`, `X_OK`), else the failed call with its errno.
    public static func refusal(of path: String, _ mode: Int32) -> SystemError? {
        access(path, mode) == 0 ? nil : .last("access", path: path)
    }

    /// The permission bits of the file at `path` (`stat`, links followed: a secret may be a link into a
    /// credentials folder); nil when it cannot be looked at.
    public static func permissions(of path: String) -> UInt32? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt32(info.st_mode & 0o7777) : nil
    }

    /// Sets the permission bits of the file at `path` (`chmod`).
    public static func setPermissions(of path: String, to mode: UInt32) throws(SystemError) {
        guard chmod(path, mode_t(mode)) == 0 else { throw .last("chmod", path: path) }
    }

    /// Gives the file at `path` to the user called `name` and that user's group (`chown`); fails if there
    /// is no such user.
    public static func giveOwnership(of path: String, toUser name: String) throws(SystemError) {
        guard let account = getpwnam(name) else { throw SystemError(call: "getpwnam", path: name, errno: ENOENT) }
        guard chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else { throw .last("chown", path: path) }
    }

    /// The size of the file at `path` (a final link not followed); nil when there is none.
    public static func size(of path: String) -> Int? {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_size) : nil
    }
}

extension DurableFiles {
    /// Creates `path` with `bytes`, readable and writable by its owner only (0600), failing with EEXIST
    /// when something is there already (a link included: never followed); fsynced with its folder. For
    /// secrets made once (a node's signing key).
    public static func createPrivate(_ path: String, with bytes: [UInt8]) throws(SystemError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .last("open", path: path) }
        do {
            try writeAndSync(fd, bytes, path: path)
        } catch {
            unlink(path)
            throw error
        }
        try syncFolder(of: path)
    }

    /// Writes all of `bytes` to `fd` (retrying interrupted writes), fsyncs it and closes it, closing it on
    /// failure too; `path` names it in errors.
    private static func writeAndSync(_ fd: Int32, _ bytes: [UInt8], path: String) throws(SystemError) {
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .last("write", path: path)
            }
            written += count
        }
        guard fsync(fd) == 0 else { throw .last("fsync", path: path) }
    }
}
