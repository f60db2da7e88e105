/// How an import groups other nodes' transactions into SQLite transactions (batches).
///
/// Each batch rewrites every page it touched, and with random keys that is nearly a page per row, so an
/// import runs fastest in few large batches. A batch ends, at the end of a whole remote transaction:
/// - as soon as a writer announces itself (every write through a `Store`, in any process, does: see
///   `WriterIntent`), so that it waits for one remote transaction, not for the batch;
/// - after ``maximumChanges`` changes, which bounds the WAL a batch leaves to checkpoint;
/// - after ``maximumMilliseconds``, for writers that cannot announce themselves (the `sqlite3` shell).
public struct ImportBatching: Sendable, Hashable {
    public var maximumChanges: Int
    public var maximumMilliseconds: Int

    public init(maximumChanges: Int = 50_000, maximumMilliseconds: Int = 100) {
        self.maximumChanges = maximumChanges
        self.maximumMilliseconds = maximumMilliseconds
    }
}
