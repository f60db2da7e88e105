/// How a store file is opened.
public struct StoreOptions: Sendable {
    /// What a commit waits for before returning.
    public enum Durability: String, Sendable {
        /// WAL with `synchronous=NORMAL`: a commit survives a process crash; the last commits before a power
        /// loss may be rolled back. SQLite's recommended setting for WAL, and the default.
        case normal
        /// WAL with `synchronous=FULL`: every commit is fsynced before it returns.
        case full
    }

    /// How the store keeps a transaction undoable until it commits.
    public enum Journal: String, Sendable {
        /// Write-ahead log: readers never wait for the writer. Every store apps use.
        case wal
        /// A rollback journal (`journal_mode=TRUNCATE`, `synchronous=FULL`), for a store no one else opens
        /// yet, being built: each new page is written once, into the database file, where a WAL writes it
        /// twice (into the log, then into the file by a checkpoint). A crash rolls the interrupted
        /// transaction back, as with a WAL. Readers wait while the writer holds its lock: from the first
        /// time a large transaction spills pages into the file until it commits.
        /// ``Store/finishBuilding()`` switches the store to ``wal`` before anyone else opens it.
        case rollback
    }

    /// Whether opening a store that does not exist creates it.
    public enum Creation: Sendable, Hashable {
        /// Creates it, unless an account switch retired its path (`docs/accounts.md`): a write into a store
        /// made there would belong to no account and never ship. Apps open stores this way.
        case unlessRetired
        /// Creates it wherever asked: syncd, for the stores it builds and the active store it syncs.
        case always
        /// Opens an existing store only: syncd, for the stores it retires.
        case never
    }

    /// How long a write waits for another connection (or process) to release the write lock.
    public var busyTimeoutMilliseconds: Int32
    public var durability: Durability
    public var journal: Journal
    /// SQLite's page cache per connection (`PRAGMA cache_size`). A synced row lives in three B-trees
    /// (the table, its row state, its history), so SQLite's 2 MiB default makes imports read pages again
    /// and again; the default here is 32 MiB.
    public var cacheKibibytes: Int
    /// How much of the file SQLite may read through a memory map instead of read(2) (`PRAGMA mmap_size`).
    public var mmapBytes: Int
    public var creation: Creation

    /// The `synchronous` setting of a connection whose file is in WAL mode (`wal`) or has a rollback
    /// journal: FULL for ``Durability/full`` and for a rollback journal, NORMAL for a WAL otherwise.
    func synchronous(wal: Bool) -> String {
        durability == .full || !wal ? "FULL" : "NORMAL"
    }

    public init(
        busyTimeoutMilliseconds: Int32 = 5_000, durability: Durability = .normal, journal: Journal = .wal, cacheKibibytes: Int = 32_768,
        mmapBytes: Int = 256 << 20, creation: Creation = .unlessRetired
    ) {
        self.creation = creation
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.durability = durability
        self.journal = journal
        self.cacheKibibytes = cacheKibibytes
        self.mmapBytes = mmapBytes
    }
}
