import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

/// An encoded segment of this node's history, waiting in the outbox or already published.
package struct OutboxSegment: Sendable, Hashable {
    package var firstSequence: UInt64
    package var lastSequence: UInt64
    package var bytes: [UInt8]
}

/// Accumulates folded transactions into segments and stores them in the outbox, in the same SQLite
/// transaction as the fold, so a crash can never lose or renumber exported history: what is published
/// later is exactly what was committed here.
final class OutboxWriter {
    let connection: Connection
    let schemaVersion: Int
    let account: String
    let node: NodeID
    let maximumChanges: Int
    let limits: SegmentLimits
    private var encoder: SegmentEncoder?
    private var changes = 0
    private(set) var segments = 0

    init(connection: Connection, schemaVersion: Int, account: String, node: NodeID, maximumChanges: Int, limits: SegmentLimits) {
        self.connection = connection
        self.schemaVersion = schemaVersion
        self.account = account
        self.node = node
        self.maximumChanges = maximumChanges
        self.limits = limits
    }

    func append(_ transaction: LogTransaction) throws {
        if changes > 0, changes + transaction.changes.count > maximumChanges {
            try flush()
        }
        var current: SegmentEncoder
        if let open = encoder.take() {
            current = open
        } else {
            current = try SegmentEncoder(schemaVersion: schemaVersion, account: account, node: node, limits: limits)
        }
        do {
            try current.append(transaction)
        } catch {
            // The segment is full: store it and start the next one with this transaction.
            guard error.code == .segmentFull || error.code == .limitExceeded, changes > 0 else { throw error }
            try store(current)
            current = try SegmentEncoder(schemaVersion: schemaVersion, account: account, node: node, limits: limits)
            try current.append(transaction)
        }
        changes += transaction.changes.count
        encoder = consume current
    }

    func flush() throws {
        guard let open = encoder.take() else { return }
        try store(open)
    }

    private func store(_ segment: consuming SegmentEncoder) throws {
        changes = 0
        guard let first = segment.firstSequence, let last = segment.lastSequence else { return }
        let bytes = try segment.finish()
        try connection.execute(
            "INSERT INTO _ls_outbox(first_seq, last_seq, bytes, shipped) VALUES (?, ?, ?, 0)",
            [.integer(Int64(first)), .integer(Int64(last)), .blob(bytes)])
        segments += 1
    }
}

extension SyncLedger {
    /// Folds all local history not yet exported into segments in the outbox (at most `maximumChanges`
    /// changes per segment, unless one transaction is larger), committed with `synchronous=FULL` so
    /// that a segment is never published for history a power loss could roll back. Returns how many
    /// segments were added.
    package func exportToOutbox(account: String, maximumChanges: Int = 2_000, limits: SegmentLimits = .default) throws -> Int {
        try store.durably {
            try store.syncTransaction { state, _ in
                try store.foldIntoOutbox(&state, account: account, maximumChanges: maximumChanges, limits: limits)
            }
        }
    }

    /// Segments in the outbox not yet published, oldest first. Only the outbox after the published mark
    /// is read (see ``markPublished(firstSequence:)``), so the cost does not grow with what was shipped.
    package func unpublishedSegments() throws -> [OutboxSegment] {
        try store.reading { connection in
            try connection.rows(
                "SELECT first_seq, last_seq, bytes FROM _ls_outbox WHERE first_seq >= \(Store.publishedMark) AND shipped = 0 ORDER BY first_seq"
            ).compactMap { row in
                guard case .integer(let first) = row[0], case .integer(let last) = row[1], case .blob(let bytes) = row[2] else { return nil }
                return OutboxSegment(firstSequence: UInt64(first), lastSequence: UInt64(last), bytes: bytes)
            }
        }
    }

    /// Records that a segment is durably published. Its bytes stay in the outbox until pruning deletes the
    /// segment: a carrier that loses it (a relay restored from a backup) gets it again
    /// (``markRetainedUnpublished()``). The published mark (`published_seq` in `_ls_meta`) moves up to it
    /// when nothing before it waits: every outbox segment that starts below the mark is published.
    package func markPublished(firstSequence: UInt64) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            let first = DatabaseValue.integer(Int64(firstSequence))
            try tx.execute("UPDATE _ls_outbox SET shipped = 1 WHERE first_seq = ?", [first])
            try tx.execute("INSERT OR IGNORE INTO _ls_meta(key, value) VALUES ('published_seq', 0)")
            try tx.execute(
                """
                UPDATE _ls_meta SET value = ?1 WHERE key = 'published_seq' AND value < ?1
                AND NOT EXISTS (SELECT 1 FROM _ls_outbox WHERE first_seq >= _ls_meta.value AND first_seq < ?1 AND shipped = 0)
                """, [first])
        }
    }

    /// The last sequence this node has exported.
    package func exportedSequence() throws -> UInt64 {
        try store.reading { UInt64(try $0.int64("SELECT value FROM _ls_meta WHERE key = 'export_seq'") ?? 0) }
    }
}

extension Store {
    /// Where unpublished outbox segments start at the earliest.
    static let publishedMark = "ifnull((SELECT value FROM _ls_meta WHERE key = 'published_seq'), 0)"

    /// Folds local history not yet exported into segments in the outbox, in a sync transaction of its own.
    func foldIntoOutbox(account: String, maximumChanges: Int, limits: SegmentLimits) throws {
        _ = try syncTransaction { state, _ in
            try foldIntoOutbox(&state, account: account, maximumChanges: maximumChanges, limits: limits)
        }
    }

    /// Inside a sync transaction: folds local history not yet exported into segments in the outbox (at
    /// most `maximumChanges` changes per segment, unless one transaction is larger). Returns how many
    /// segments were added.
    @discardableResult
    func foldIntoOutbox(_ state: inout WriterState, account: String, maximumChanges: Int, limits: SegmentLimits) throws -> Int {
        let outbox = OutboxWriter(
            connection: state.connection, schemaVersion: schema.version, account: account, node: node,
            maximumChanges: maximumChanges, limits: limits)
        _ = try foldAll(&state, emit: outbox.append)
        try outbox.flush()
        return outbox.segments
    }
}
