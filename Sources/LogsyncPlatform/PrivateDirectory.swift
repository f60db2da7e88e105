#if canImport(Glibc)
import Glibc
#endif

/// A folder only this process's user may change: where syncd puts its control socket. Another local user
/// who could create or write it could put a socket of their own in its place and intercept `syncctl`.
public enum PrivateDirectory {
    /// Why a folder is not private, in words an operator can act on.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var message: String
        public var cause: SystemError?

        public var description: String {
            cause.map { "\(message): \($0)" } ?? message
        }
    }

    /// Creates the folder at `path` (and its parents) if needed, then makes sure, looking at the folder
    /// itself with `lstat` (a link is refused, never followed), that it is a directory owned by this
    /// process's user and writable by nobody else; then sets its mode to 0700, checking that it took.
    public static func prepare(_ path: String) throws(Problem) {
        do {
            try DurableFiles.makeDirectories(path)
        } catch {
            throw Problem(path: path, message: "cannot create the folder \(path)", cause: error)
        }
        try verify(path)
        guard chmod(path, 0o700) == 0 else {
            throw Problem(path: path, message: "cannot make \(path) private (mode 0700)", cause: .last("chmod", path: path))
        }
        try verify(path, mode: 0o700)
    }

    /// Checks that the folder at `path` is a directory (not a link) owned by one of `owners` (nil: anyone;
    /// by default this process's user) and not writable by group or others; with `mode`, that it has
    /// exactly that mode.
    public static func verify(_ path: String, owners: Set<uid_t>? = [geteuid()], mode expected: mode_t? = nil) throws(Problem) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw Problem(path: path, message: "cannot look at the folder \(path)", cause: .last("lstat", path: path))
        }
        let kind = FileKind(mode: info.st_mode)
        guard kind == .directory else {
            throw Problem(path: path, message: "refusing \(path): it is a \(kind), not a directory (links are not followed); remove it")
        }
        if let owners, !owners.contains(info.st_uid) {
            throw Problem(
                path: path,
                message: "refusing \(path): it belongs to user \(info.st_uid), not to this user (\(geteuid())); another user may have created it to intercept syncctl. Remove it, or set [control] socket to a folder of your own")
        }
        let permissions = info.st_mode & 0o7777
        guard permissions & 0o022 == 0 else {
            throw Problem(
                path: path,
                message: "refusing \(path): other users may write to it (mode \(String(permissions, radix: 8))), so they could replace the control socket. Run 'chmod 700 \(path)', or remove it")
        }
        if let expected, permissions != expected {
            throw Problem(path: path, message: "\(path) has mode \(String(permissions, radix: 8)) after chmod \(String(expected, radix: 8))")
        }
    }

    /// For a client about to talk through a socket in the folder at `path`: the folder must not be a link
    /// nor writable by group or others, and must belong to this user or to root, or else sit in a folder
    /// that only root can write (root made it for the daemon's user: systemd's `RuntimeDirectory=`). A
    /// folder another user made in a shared temporary folder is refused.
    public static func verifyForClient(_ path: String) throws(Problem) {
        let user = geteuid()
        do {
            try verify(path, owners: [user, 0])
        } catch let problem {
            let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            var info = stat()
            guard lstat(parent.isEmpty ? "/" : parent, &info) == 0, FileKind(mode: info.st_mode) == .directory,
                info.st_uid == 0, info.st_mode & 0o022 == 0
            else { throw problem }
            try verify(path, owners: nil)
        }
    }
}
