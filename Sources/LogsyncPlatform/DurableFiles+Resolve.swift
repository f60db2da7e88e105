#if canImport(Glibc)
import Glibc
#endif

extension DurableFiles {
    /// `path` with every symbolic link and `.`/`..` resolved (`realpath`): the name of the file itself,
    /// whichever link named it. When the file does not exist yet, its folder is resolved and its name
    /// kept; when neither can be resolved, `path` as it is. Files kept beside another file (SQLite's
    /// `-wal`, a relay's `-credentials` marker) are named after this, so that every process finds them
    /// whatever path it was given.
    public static func resolvingLinks(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        guard let resolved = realpath(folder.isEmpty ? "/" : folder, nil) else { return path }
        defer { free(resolved) }
        let base = String(cString: resolved)
        return (base == "/" ? "" : base) + "/" + name
    }
}
