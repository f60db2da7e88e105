#if canImport(Glibc)
import Glibc
#endif

/// Folders a process makes for itself. Files in a folder that others write are read and published
/// through ``Directory``.
public enum DurableFiles {
    /// Creates a directory and its parents (mode 0755); succeeds when it exists.
    public static func makeDirectories(_ path: String) throws(SystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0, errno != EEXIST { throw .last("mkdir", path: current) }
        }
    }
}
