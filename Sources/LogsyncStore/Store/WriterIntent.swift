import LogsyncPlatform
import Synchronization

/// How an import learns that a local writer waits, so that it commits and lets the writer in.
///
/// An import applies as much as it can in one SQLite transaction: every commit of a batch rewrites the
/// pages it touched, and with random keys that is nearly one page per row, so few large transactions
/// replay much faster than many small ones. A writer must not wait through a large one, though. So every
/// write through a `Store` announces itself to its own process, from before it asks for the write lock
/// until it has committed; and one that finds SQLite's write lock held by another connection announces
/// itself to every process too, until it has committed, with a shared lock on the store's `-writers` file
/// (``AnnouncementLock``). The import checks between remote transactions whether anyone announces; if so
/// it commits at once. An uncontended write, most of them, costs no system call for this.
///
/// Writers that do not use logsync (the `sqlite3` shell, a script) cannot announce: for them an import
/// also commits after ``Store/ImportBatching/maximumMilliseconds``.
final class WriterIntent: Sendable {
    /// nil when the file could not be opened: imports then commit by size and time only.
    private let lock: AnnouncementLock?
    /// Writers of this process announcing now, to this process and to all.
    private let announcing = Mutex((process: 0, all: 0))

    init(storePath: String) {
        lock = try? AnnouncementLock(path: Self.path(of: storePath))
    }

    static func path(of storePath: String) -> String { storePath + "-writers" }

    /// Runs `body`, a write, announced to this process.
    func announced<T>(_ body: () throws -> T) rethrows -> T {
        announcing.withLock { $0.process += 1 }
        defer { announcing.withLock { $0.process -= 1 } }
        return try body()
    }

    /// Runs `wait`, a write's wait for SQLite's write lock and the write itself, announced to every
    /// process: the shared lock is held while any writer of this process is in here.
    func announcedToAll<T>(_ wait: () throws -> T) rethrows -> T {
        announcing.withLock { count in
            if count.all == 0 { try? lock?.announce() }
            count.all += 1
        }
        defer {
            announcing.withLock { count in
                count.all -= 1
                if count.all == 0 { lock?.withdraw() }
            }
        }
        return try wait()
    }

    /// Whether a writer of this process announces itself now.
    var writersOfThisProcess: Bool { announcing.withLock { $0.process > 0 } }

    /// Whether a writer, in this process or another, announces itself now.
    var writerWaits: Bool {
        if writersOfThisProcess { return true }
        return lock?.isAnnounced ?? false
    }
}
