import LogsyncCore

/// Building a store from its account's logs: what an account switch does for the new account's store.
extension SyncEngine {
    /// How far a rebuild is.
    public struct RebuildProgress: Sendable {
        public var transactions = 0
        public var segments = 0
        public var rounds = 0
    }

    /// Imports everything the transport holds for this store's account: round after round (each streams
    /// the segments and applies them in bounded batches, every batch one SQLite transaction with its
    /// cursors, so a crash resumes where it stopped), until a round applies nothing or `cancellation`
    /// asks to stop. `progress` is called after every round that applied something.
    ///
    /// Batches end after ``ImportBatching/maximumChanges`` changes or when a writer announces itself, but
    /// not after ``ImportBatching/maximumMilliseconds`` (see ``rebuildBatching``).
    @discardableResult
    public func rebuild(cancellation: Cancellation? = nil, progress: (RebuildProgress) -> Void = { _ in }) throws -> RebuildProgress {
        var settings = configuration
        settings.batching = Self.rebuildBatching(configuration.batching)
        let engine = reconfigured(settings)
        var totals = RebuildProgress()
        while !(cancellation?.isCancelled ?? false) {
            let report = try engine.sync(cancellation: cancellation)
            guard !report.applied.isEmpty else { break }
            totals.transactions += report.appliedTransactions
            totals.segments += report.applied.count
            totals.rounds += 1
            progress(totals)
        }
        return totals
    }

    /// How a rebuild batches: in batches of at least ``rebuildBatchChanges`` changes, not cut short after
    /// a fraction of a second.
    ///
    /// Each batch writes again every page of the primary-key index it touched, which with random keys is
    /// nearly a page per row, so a rebuild runs fastest in few large batches: 1M changes took 26.5 s of CPU
    /// in batches cut at 100 ms, 12.5 s in batches of 50,000 and 8.5–8.8 s of wall time in batches of
    /// 250,000 (`docs/BENCHMARKS-history.md`, rebuild). Memory does not grow with the batch (a batch keeps only
    /// the headers of the segments it applied), its journal on disk does: a store being built has a
    /// rollback journal (``StoreOptions/rebuilding``), which holds the pages the batch changed that
    /// existed before it; in a store with a WAL, about 0.4 GB for 250,000 changes of the benchmark's rows,
    /// checkpointed after each batch.
    ///
    /// The time bound is for writers that cannot announce themselves (the `sqlite3` shell), so that they
    /// wait for a short batch rather than a long one. A store being built has no such writers: nobody
    /// uses it until it is swapped in. A writer that announces itself still ends the batch at once, and one
    /// minute remains as the bound for one that cannot. Cancellation is seen between batches: a stop
    /// during a rebuild waits for the batch in progress (2–5 s), and the switch resumes at the next start.
    static func rebuildBatching(_ batching: ImportBatching) -> ImportBatching {
        ImportBatching(
            maximumChanges: max(batching.maximumChanges, rebuildBatchChanges), maximumMilliseconds: max(batching.maximumMilliseconds, 60_000))
    }

    /// The fewest changes a rebuild's batch holds (unless the logs end or a writer announces itself).
    static let rebuildBatchChanges = 250_000
}
