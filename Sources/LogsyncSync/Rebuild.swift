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
    @discardableResult
    public func rebuild(cancellation: Cancellation? = nil, progress: (RebuildProgress) -> Void = { _ in }) throws -> RebuildProgress {
        var totals = RebuildProgress()
        while !(cancellation?.isCancelled ?? false) {
            let report = try sync(cancellation: cancellation)
            guard !report.applied.isEmpty else { break }
            totals.transactions += report.appliedTransactions
            totals.segments += report.applied.count
            totals.rounds += 1
            progress(totals)
        }
        return totals
    }
}
