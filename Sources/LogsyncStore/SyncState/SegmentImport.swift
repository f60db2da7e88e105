import LogsyncCore
import LogsyncPlatform

private typealias Value = DatabaseValue

/// What importing one segment did.
package enum ImportOutcome: Sendable, Hashable {
    case applied(transactions: Int)
    /// Already applied (a re-delivery): nothing done.
    case alreadyApplied
    /// Its first sequence is not the next one expected from that node: wait for the missing ones.
    case gap(expected: UInt64)
    /// Part of it was applied from different bytes: the node's history diverged. Quarantine it.
    case divergent
}

/// A verified segment from another node, decoded, ready to import.
package struct SegmentImport: Sendable {
    package var header: SegmentHeader
    package var transactions: [LogTransaction]
    /// The checksum of its bytes: a segment interrupted between batches resumes only with the same bytes.
    package var checksum: UInt64
    /// Its first inserts, prepared on the thread that decoded it (``FreshRowPreparer``).
    var fresh: FreshRows?
    /// For a segment written under a newer schema: by index in ``transactions``, the part of each
    /// transaction that this store's schema does not declare (``ChangeRules/split(_:)``), kept with the
    /// cursor's advance until the app registers that schema (``SyncLedger/applyKeptChanges(limits:)``).
    package var kept: [Int: KeptPart]

    package init(header: SegmentHeader, transactions: [LogTransaction], checksum: UInt64, kept: [Int: KeptPart] = [:]) {
        self.header = header
        self.transactions = transactions
        self.checksum = checksum
        self.kept = kept
    }

    /// A kept part, encoded as the one-transaction segment `_ls_kept` stores, where it was split: on the
    /// thread that decodes segments, not inside the writer's transaction. (`logsync-bench upgrade`'s
    /// `mixed_import_vs_same` went from 1.16 to 1.15 x with it, within the run-to-run spread: the encoding
    /// was not where the difference lies.)
    package struct KeptPart: Sendable {
        package let sequence: UInt64
        package let changeCount: Int
        package let segment: [UInt8]

        package init(_ kept: LogTransaction, of header: SegmentHeader, limits: SegmentLimits) throws(SegmentError) {
            sequence = kept.sequence
            changeCount = kept.changes.count
            segment = try SegmentEncoder.encode(
                schemaVersion: header.schemaVersion, account: header.account, node: header.node, transactions: [kept], limits: limits)
        }
    }
}

extension SyncLedger {
    /// What a segment from another node must be to be merged here (``ChangeRules``): checked where
    /// segments are decoded, off the writer's thread.
    package var changeRules: ChangeRules { store.changeRules }

    /// Applies a verified segment from another node, exactly once (``importSegments(from:account:maximumChanges:batching:limits:next:outcome:)``
    /// with one segment).
    package func importSegment(
        header: SegmentHeader, transactions: [LogTransaction], checksum: UInt64, account: String,
        maximumChanges: Int = 2_000, batching: ImportBatching = ImportBatching(), limits: SegmentLimits = .default
    ) throws -> ImportOutcome {
        var segment: SegmentImport? = SegmentImport(header: header, transactions: transactions, checksum: checksum)
        var result = ImportOutcome.alreadyApplied
        try importSegments(
            from: header.node, account: account, maximumChanges: maximumChanges, batching: batching, limits: limits,
            next: { _ in defer { segment = nil }; return segment },
            outcome: { _, outcome in
                // A segment applied over several batches reports once, with all its transactions.
                result = outcome
            })
        return result
    }

    /// Applies verified segments from `origin`, in sequence order, each exactly once.
    ///
    /// `next` is asked for the next segment, with the sequence applied so far from `origin` (the cursor,
    /// as the open transaction sees it), until it returns nil. It is asked for the first one before any
    /// write transaction begins, so that a round with nothing to import writes nothing; after that it runs
    /// while the store's write lock is held, so it should only read and verify the segment. `outcome` is told what became of each segment
    /// once that is committed, outside the lock.
    ///
    /// Remote transactions are applied in batches (``ImportBatching``); each batch — local history folded
    /// into the outbox first, then remote transactions merged and recorded in history with their origin,
    /// then the node's cursor advanced — is one SQLite transaction, so a crash leaves whole batches. A
    /// segment interrupted between batches resumes where the cursor stopped, but only with the same bytes
    /// (the checksum recorded with its first batch); different bytes are ``ImportOutcome/divergent``.
    /// Re-deliveries and segments after a gap change nothing.
    ///
    /// `isCancelled` is asked before each batch: once it answers yes, the import returns after the last
    /// committed batch (a stop never waits for a whole import, and loses nothing: the cursor says where
    /// the next import goes on).
    package func importSegments(
        from origin: NodeID, account: String, maximumChanges: Int = 2_000, batching: ImportBatching = ImportBatching(),
        limits: SegmentLimits = .default, isCancelled: () -> Bool = { false },
        next: (_ cursor: UInt64) throws -> SegmentImport?,
        outcome: (SegmentHeader, ImportOutcome) throws -> Void
    ) throws {
        guard origin != store.node else {
            while let segment = try next(0) { try outcome(segment.header, .alreadyApplied) }
            return
        }
        guard let first = try next(appliedSequence(from: origin)) else { return }
        var run = Store.ImportRun(origin: origin, batching: batching, limits: limits, handed: first)
        while !isCancelled() {
            let localWriters = (try? store.localHistoryWaits()) ?? false
            if localWriters {
                // Local writers are busy: a checkpoint running alongside the batch would make it, and so
                // their wait, longer. Let the pages of the last batch be copied first, and copy this one's
                // before the next (see `Checkpoints`).
                store.waitForBackgroundCheckpoints()
                // Folding their writes can be a good part of a batch's work while they keep coming: fold
                // them in a transaction of their own first, so that a writer waiting for the lock waits
                // for one of the two, not both. The batch folds whatever is written in between.
                try store.foldIntoOutbox(account: account, maximumChanges: maximumChanges, limits: limits)
            }
            let end = try store.syncTransaction(checkpointInBackground: !localWriters) { state, _ in
                try store.foldIntoOutbox(&state, account: account, maximumChanges: maximumChanges, limits: limits)
                return try store.applyBatch(&run, state: &state, next: next)
            }
            for (header, decided) in run.decided { try outcome(header, decided) }
            run.decided.removeAll()
            guard end != .exhausted else { return }
            FaultInjection.point("import.between-batches")
            switch end {
            case .writerWaits:
                store.letForeignWriterIn()
            case .timeUp:
                // A writer that cannot announce itself may be polling for the lock: leave it a moment.
                Pause.microseconds(1_000)
            case .full, .exhausted:
                break
            }
        }
    }
}

/// The work of an import inside its sync transactions.
extension Store {
    /// Why a batch ended.
    fileprivate enum BatchEnd {
        case exhausted, full, writerWaits, timeUp
    }

    /// The state of an import across its batches.
    fileprivate struct ImportRun {
        let origin: NodeID
        let batching: ImportBatching
        let limits: SegmentLimits
        /// A segment handed over by `next` but not yet looked at: the first one, asked for before the
        /// first batch.
        var handed: SegmentImport?
        /// The segment being applied, and how many of its transactions were applied so far.
        var current: SegmentImport?
        var appliedOfCurrent = 0
        /// Outcomes decided in the open transaction, reported once it commits: headers only, so that a
        /// batch does not keep the transactions of every segment it applied in memory until it ends.
        var decided: [(SegmentHeader, ImportOutcome)] = []

        init(origin: NodeID, batching: ImportBatching, limits: SegmentLimits, handed: SegmentImport) {
            self.origin = origin
            self.batching = batching
            self.limits = limits
            self.handed = handed
        }
    }

    /// Inside a sync transaction: applies remote transactions until the batch ends.
    fileprivate func applyBatch(
        _ run: inout ImportRun, state: inout WriterState, next: (_ cursor: UInt64) throws -> SegmentImport?
    ) throws -> BatchEnd {
        let connection = state.connection
        let origin = Value.text(run.origin.rawValue)
        var cursor = UInt64(try connection.int64("SELECT last_seq FROM _ls_cursor WHERE node = ?", [origin]) ?? 0)
        try publishNodeIndex(&state.nodes, of: run.origin, connection: connection)
        let deadline = ContinuousClock.now + .milliseconds(run.batching.maximumMilliseconds)
        var changes = 0
        var end = BatchEnd.exhausted
        batch: while true {
            if run.current == nil {
                let handed = run.handed
                run.handed = nil
                guard let segment = try handed ?? next(cursor) else { break batch }
                let header = segment.header
                guard header.node == run.origin else {
                    throw StoreError(.schema, "a segment of node \(header.node) was handed to the import from node \(run.origin)", path: path)
                }
                if header.lastSequence <= cursor {
                    run.decided.append((segment.header, .alreadyApplied))
                    continue
                }
                guard header.firstSequence <= cursor + 1 else {
                    run.decided.append((segment.header, .gap(expected: cursor + 1)))
                    continue
                }
                if cursor >= header.firstSequence {
                    let recorded = try connection.int64(
                        "SELECT checksum FROM _ls_segment WHERE node = ? AND first_seq = ? AND last_seq = ?",
                        [origin, .integer(Int64(header.firstSequence)), .integer(Int64(header.lastSequence))])
                    guard recorded == Int64(bitPattern: segment.checksum) else {
                        run.decided.append((segment.header, .divergent))
                        continue
                    }
                }
                run.current = segment
                run.appliedOfCurrent = 0
            }
            // Taken out of the run, so that nothing but this binding holds it once it is applied.
            guard let segment = run.current.take() else { continue }
            var last: LogTransaction?
            let fresh = segment.fresh.flatMap { $0.matches(state.nodes) ? $0.rows : nil }
            for (index, transaction) in segment.transactions.enumerated() where transaction.sequence > cursor {
                // Kept parts count as changes: a batch of changes this schema does not declare is still bounded.
                let size = transaction.changes.count + (segment.kept[index]?.changeCount ?? 0)
                if changes > 0, let reason = batchEnd(run.batching, changes: changes, adding: size, deadline: deadline) {
                    end = reason
                    break
                }
                if !transaction.changes.isEmpty {
                    _ = try applyRemote(transaction, from: run.origin, state: &state, fresh: fresh?[index])
                }
                if let kept = segment.kept[index] { try keep(kept, of: segment.header, state: &state) }
                changes += size
                run.appliedOfCurrent += 1
                cursor = transaction.sequence
                last = transaction
                FaultInjection.point("import.mid-batch")
            }
            if let last { try recordProgress(segment, through: last, state: &state) }
            if end != .exhausted {
                run.current = segment
                break batch
            }
            run.decided.append((segment.header, .applied(transactions: run.appliedOfCurrent)))
            // Its transactions are freed on another thread, outside the write transaction (``Release``).
            _ = consume fresh
            Release.elsewhere(consume segment)
        }
        if changes > 0 { try skipOwnMergeHistory(&state) }
        return end
    }

    /// Whether the batch ends before a remote transaction of `adding` changes, and why.
    private func batchEnd(_ batching: ImportBatching, changes: Int, adding: Int, deadline: ContinuousClock.Instant) -> BatchEnd? {
        if changes + adding > batching.maximumChanges { return .full }
        if intent.writerWaits { return .writerWaits }
        if ContinuousClock.now >= deadline { return .timeUp }
        return nil
    }

    /// Advances the node's cursor to `last` and records the segment's checksum, so that it resumes only
    /// with the same bytes.
    private func recordProgress(_ segment: SegmentImport, through last: LogTransaction, state: inout WriterState) throws {
        let connection = state.connection
        let origin = Value.text(segment.header.node.rawValue)
        try connection.execute(
            "INSERT OR REPLACE INTO _ls_cursor(node, last_seq, last_hlc, applied_at) VALUES (?, ?, ?, ?)",
            [origin, .integer(Int64(last.sequence)), .integer(last.timestamp.storageValue), .integer(Int64(WallClock.milliseconds()))])
        try connection.execute(
            "INSERT OR REPLACE INTO _ls_segment(node, first_seq, last_seq, checksum) VALUES (?, ?, ?, ?)",
            [origin, .integer(Int64(segment.header.firstSequence)), .integer(Int64(segment.header.lastSequence)),
             .integer(Int64(bitPattern: segment.checksum))])
        try SegmentImport.notePeerSchema(origin, version: segment.header.schemaVersion, connection: connection)
    }

    /// After a batch that ended for an announced writer. One in this process holds the next ticket of the
    /// fair writer lock; still, step aside for a millisecond: on two cores an import that starts its next
    /// batch at once competes for a core with the writer and the checkpoint thread, and the writer's
    /// longest wait grew from 23 to 38–50 ms without this pause (`logsync-bench stall`). One in another
    /// process polls for SQLite's lock: wait (briefly) until it has written.
    fileprivate func letForeignWriterIn() {
        guard !intent.writersOfThisProcess else {
            Pause.microseconds(1_000)
            return
        }
        let deadline = ContinuousClock.now + .milliseconds(50)
        while intent.writerWaits, ContinuousClock.now < deadline { Pause.microseconds(200) }
    }

    /// Whether local history waits to be folded, as far as a read outside the write transaction can tell
    /// (the batch folds again in any case): local writers are busy.
    func localHistoryWaits() throws -> Bool {
        try reading { connection in
            try connection.int64(
                "SELECT 1 FROM _ls_log WHERE seq > ifnull((SELECT value FROM _ls_meta WHERE key = 'export_token'), 0) LIMIT 1") != nil
        }
    }
}
