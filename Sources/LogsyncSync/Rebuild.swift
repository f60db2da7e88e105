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

    /// How a rebuild batches: as `batching`, but a batch is not cut short after a fraction of a second.
    ///
    /// The time bound is for writers that cannot announce themselves (the `sqlite3` shell), so that they
    /// wait for a short batch rather than a long one. A store being built has no such writers: nobody
    /// uses it until it is swapped in. Cut by time, a rebuild's batches are small (about 8,000 changes
    /// at 80,000 changes/s, far fewer on a busy machine), and each batch writes again every page of the
    /// primary-key index it touched, which with random keys is nearly a page per row: 1M changes took
    /// 26.5 s of CPU in batches cut at 100 ms and 12.5 s in batches of 50,000 (`docs/BENCHMARKS.md`,
    /// rebuild). A writer that announces itself still ends the batch at once, and one minute remains as
    /// the bound for one that cannot.
    static func rebuildBatching(_ batching: ImportBatching) -> ImportBatching {
        ImportBatching(maximumChanges: batching.maximumChanges, maximumMilliseconds: max(batching.maximumMilliseconds, 60_000))
    }
}
