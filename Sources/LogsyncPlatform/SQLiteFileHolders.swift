#if canImport(Glibc)
import Glibc
#endif

/// Who has an SQLite database in WAL mode open: this process (any descriptor on the file or its `-wal`
/// or `-shm`), or another process.
///
/// Every connection to a WAL database holds a shared POSIX lock on the "dead man switch" byte of the
/// `-shm` file (offset 128, SQLite's `UNIX_SHM_DMS`) from its first read until it closes; asking with
/// `F_GETLK` for an exclusive lock on that byte names one holder. `F_GETLK` does not see this process's own
/// locks, so this process is checked through `/proc/self/fd`. A process that opened the file but has not
/// read it yet holds no lock and is not seen (see `docs/accounts.md`).
public enum SQLiteFileHolders {
    /// The byte of the `-shm` file every open connection holds a shared lock on.
    static let deadManSwitchOffset = 128

    /// A process that holds the database open, if any. When this process holds it itself, that is the
    /// answer (its own pid), without looking further: closing the descriptor opened here for the question
    /// would drop this process's POSIX locks on the `-shm` file, which its connections rely on.
    public static func holder(of path: String) -> Int32? {
        if heldByThisProcess(path) { return getpid() }
        let shm = path + "-shm"
        let fd = open(shm, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(deadManSwitchOffset)
        lock.l_len = 1
        guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
        return lock.l_pid
    }

    /// Whether this process has a descriptor open on the database, its `-wal`, `-shm` or `-journal`.
    public static func heldByThisProcess(_ path: String) -> Bool {
        let names = Set(["", "-wal", "-shm", "-journal"].map { canonical(path) + $0 })
        guard let folder = opendir("/proc/self/fd") else { return false }
        defer { closedir(folder) }
        var buffer = [CChar](repeating: 0, count: 4096)
        while let entry = readdir(folder) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            guard name.first?.isNumber == true else { continue }
            let count = readlink("/proc/self/fd/" + name, &buffer, buffer.count - 1)
            guard count > 0 else { continue }
            if names.contains(String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)) { return true }
        }
        return false
    }

    /// `path` resolved (links, `..`), as `/proc/self/fd` shows it.
    static func canonical(_ path: String) -> String { DurableFiles.resolvingLinks(path) }
}
