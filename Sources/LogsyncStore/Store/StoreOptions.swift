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

    /// How long a write waits for another connection (or process) to release the write lock.
    public var busyTimeoutMilliseconds: Int32
    public var durability: Durability
    /// SQLite's page cache per connection (`PRAGMA cache_size`). A synced row lives in three B-trees
    /// (the table, its row state, its history), so SQLite's 2 MiB default makes imports read pages again
    /// and again; the default here is 32 MiB.
    public var cacheKibibytes: Int
    /// How much of the file SQLite may read through a memory map instead of read(2) (`PRAGMA mmap_size`).
    public var mmapBytes: Int

    public init(
        busyTimeoutMilliseconds: Int32 = 5_000, durability: Durability = .normal, cacheKibibytes: Int = 32_768,
        mmapBytes: Int = 256 << 20
    ) {
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.durability = durability
        self.cacheKibibytes = cacheKibibytes
        self.mmapBytes = mmapBytes
    }
}
