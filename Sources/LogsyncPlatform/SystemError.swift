#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: its name, the path it concerned, and errno captured right after it.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    public var call: String
    public var path: String?
    public var errno: Int32

    public init(call: String, path: String? = nil, errno: Int32) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    /// Captures the current errno for `call`.
    public static func last(_ call: String, path: String? = nil) -> SystemError {
        SystemError(call: call, path: path, errno: Glibc.errno)
    }

    public var description: String {
        let target = path.map { " \($0)" } ?? ""
        return "\(call)\(target): \(String(cString: strerror(errno))) (errno \(errno))"
    }

    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}
