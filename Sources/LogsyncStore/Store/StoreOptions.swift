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

    public init(busyTimeoutMilliseconds: Int32 = 5_000, durability: Durability = .normal) {
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.durability = durability
    }
}
