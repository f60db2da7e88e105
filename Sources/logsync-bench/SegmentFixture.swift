import CSQLite
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncPlatform
import LogsyncStore

/// Remote history for the `replay` and `stall` suites: Note inserts written into a source store in
/// transactions of ``transactionRows`` rows, exported into its outbox as segments of at most
/// ``maximumChanges`` changes, and the same inserts captured by SQLite's session extension on a plain
/// database, as the baseline's changeset.
enum SegmentFixture {
    static let account = "bench"
    static let author = "bench"
    static let context = "remote"
    static let transactionRows = 1_000
    static let maximumChanges = 2_000

    /// Every visible Note row, in key order, for comparing two stores.
    static let selectRows = #"SELECT "id", "title", "body", "rank", "score" FROM "Note" ORDER BY "id""#

    // MARK: - logsync side

    /// A fresh store at `path` holding `rows`, written with one `store.write` per ``transactionRows`` rows.
    static func sourceStore(_ rows: ArraySlice<NoteRow>, at path: String) throws -> Store {
        let store = try Store(path: path, schema: NoteFixture.schema)
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = min(start + transactionRows, rows.endIndex)
            try store.write(author: author, context: context) { tx in
                for row in rows[start..<end] { try tx.execute(NoteFixture.plainInsertSQL, row.arguments) }
            }
            start = end
        }
        return store
    }

    /// Folds the store's history into its outbox (``maximumChanges`` changes per segment) and returns
    /// the unpublished segments, oldest first.
    static func export(_ store: Store) throws -> [OutboxSegment] {
        _ = try store.sync.exportToOutbox(account: account, maximumChanges: maximumChanges)
        return try store.sync.unpublishedSegments()
    }

    /// Writes `rows` into a source store in a temporary directory and returns its segments (the store is
    /// closed and removed).
    static func segments(_ rows: ArraySlice<NoteRow>) throws -> [OutboxSegment] {
        try withTemporaryDirectory { directory in
            let store = try sourceStore(rows, at: directory.file("source.sqlite"))
            return try export(store)
        }
    }

    /// Decodes a whole segment with ``SegmentDecoder``, checking it completely before returning.
    /// `uncompressedBytes` is the size of the segment's body before zlib.
    static func decode(_ bytes: [UInt8]) throws -> Decoded {
        var decoder = try SegmentDecoder(bytes: bytes)
        var transactions: [LogTransaction] = []
        while let transaction = try decoder.next() { transactions.append(transaction) }
        return (decoder.header, transactions, decoder.uncompressedByteCount)
    }

    /// What ``importAll(_:into:segmentApplied:)`` did.
    struct Imported {
        var transactions = 0
        /// Time the import waited for segments to be decoded, in seconds: part of the import's time. As in
        /// `syncd`, the next segment is decoded on another thread while the current one is applied, so
        /// this is the first segment's decoding plus any decoding that took longer than applying.
        var decodeSeconds = 0.0
        /// Size of the segments' bodies before zlib.
        var uncompressedBytes = 0
    }

    typealias Decoded = (header: SegmentHeader, transactions: [LogTransaction], uncompressedBytes: Int)

    /// Imports `segments`, all from one node, through `importSegments`: each decoded as `syncd` does, on
    /// another thread while the one before it is applied, with its first inserts prepared there
    /// (`FreshRowPreparer`, as `SyncEngine.load` does), and handed over when the import asks for it.
    /// Checks that every segment was applied. `segmentApplied` runs as each segment's outcome is reported
    /// (after its batch committed).
    static func importAll(_ segments: [OutboxSegment], into store: Store, segmentApplied: () -> Void = {}) throws -> Imported {
        var result = Imported()
        var remaining = segments[...]
        let clock = ContinuousClock()
        var applied = Set<UInt64>()
        let preparer = store.sync.freshRowPreparer
        func decodeAhead() -> Prefetch<Result<(segment: SegmentImport, uncompressedBytes: Int), any Error>>? {
            guard let segment = remaining.popFirst() else { return nil }
            return Prefetch {
                Result {
                    let decoded = try decode(segment.bytes)
                    var prepared = SegmentImport(header: decoded.header, transactions: decoded.transactions, checksum: 0)
                    preparer.prepare(&prepared)
                    return (prepared, decoded.uncompressedBytes)
                }
            }
        }
        var ahead = decodeAhead()
        try store.sync.importSegments(
            from: try origin(of: segments), account: account,
            next: { _ in
                guard let current = ahead else { return nil }
                let start = clock.now
                let decoded = try current.value().get()
                result.decodeSeconds += (clock.now - start).seconds
                result.uncompressedBytes += decoded.uncompressedBytes
                ahead = decodeAhead()
                return decoded.segment
            },
            outcome: { header, outcome in
                guard case .applied(let transactions) = outcome else {
                    throw BenchError("segment \(header.firstSequence)...\(header.lastSequence) was not applied: \(outcome)")
                }
                result.transactions += transactions
                applied.insert(header.firstSequence)
                segmentApplied()
            })
        guard applied.count == segments.count else {
            throw BenchError("\(segments.count) segments handed to the import, \(applied.count) applied")
        }
        return result
    }

    /// The import's SQL alone, for `rows` that a source store exported: the rows the import writes, in its
    /// batches, with no merge logic, no decoding and no Swift values in between. Returns the seconds taken.
    ///
    /// A `Store` creates the file (its tables and triggers) and is closed; a raw connection then turns its
    /// triggers off, as the merge does (`MergeCapture.swift`), and runs per row the `Note` insert and the
    /// row-state insert into `_ls_live` by the row's rowid (a blob of `stateBytes`, the import's average);
    /// per remote transaction, the look for any state of `Note` in `_ls_row` (and per row, the look for the
    /// row's, if there are), a history row with the inserts' keys, and a marker. This is as fast as the
    /// import can get while it stores what it stores now (`docs/BENCHMARKS-history.md`).
    static func importSQLAlone(_ rows: ArraySlice<NoteRow>, stateBytes: Int, at path: String) throws -> Double {
        do { _ = try Store(path: path, schema: NoteFixture.schema) }
        let db = try PlainDatabase(path: path)
        guard case .integer(let entity)? = try db.scalar("SELECT id FROM _ls_entity WHERE name = 'Note'") else {
            throw BenchError("the store at \(path) has no entity Note")
        }
        guard csqlite_enable_triggers(db.handle, 0) == 0 else { throw BenchError("could not turn triggers off") }
        let anyState = try db.prepare("SELECT 1 FROM _ls_row WHERE entity = ? LIMIT 1")
        let lookup = try db.prepare("SELECT cl, state FROM _ls_row WHERE entity = ? AND pk = ?")
        var entityHasStates = true
        // The transaction's inserts packed in one history row (kind 4; 15: all four columns), as the merge does.
        let history = try db.prepare("INSERT INTO _ls_log(kind, entity, pk, cols) VALUES (4, ?, ?, 15)")
        var packedKeys: [UInt8] = []
        let state = try db.prepare("INSERT INTO _ls_live(id, pk, cl, state) VALUES ((? << 40) | ?, ?, 1, ?)")
        let insert = try db.prepare(NoteFixture.plainInsertSQL)
        let marker = try db.prepare(
            "INSERT INTO _ls_log(kind, hlc, author, context, origin) VALUES (0, ?, '\(author)', '\(context)', 'source')")
        let blob = [UInt8](repeating: 0x5a, count: stateBytes)
        let batch = ImportBatching().maximumChanges
        let seconds = try timed {
            var start = rows.startIndex
            while start < rows.endIndex {
                let end = min(start + batch, rows.endIndex)
                try db.execute("BEGIN IMMEDIATE")
                for (offset, row) in rows[start..<end].enumerated() {
                    if (start + offset - rows.startIndex) % transactionRows == 0 {
                        try anyState.bind(entity, at: 1)
                        entityHasStates = try anyState.hasRow()
                    }
                    if entityHasStates {
                        try lookup.bind(entity, at: 1)
                        try lookup.bind(row.id, at: 2)
                        guard try !lookup.hasRow() else { throw BenchError("row \(row.id) already has a state") }
                    }
                    try insert.run(row)
                    let rowID = db.lastInsertedRowID
                    packedKeys.append(3)
                    packedKeys.append(UInt8(row.id.utf8.count))
                    packedKeys.append(contentsOf: row.id.utf8)
                    try state.bind(entity, at: 1)
                    try state.bind(rowID, at: 2)
                    try state.bind(row.id, at: 3)
                    try state.bind(bytes: blob, at: 4)
                    try state.run()
                    if (start + offset + 1 - rows.startIndex) % transactionRows == 0 {
                        try history.bind(entity, at: 1)
                        try history.bind(bytes: packedKeys, at: 2)
                        try history.run()
                        packedKeys.removeAll(keepingCapacity: true)
                        try marker.bind(Int64(start + offset), at: 1)
                        try marker.run()
                    }
                }
                try db.execute("COMMIT")
                start = end
            }
        }
        guard try db.scalar(#"SELECT count(*) FROM "Note""#) == .integer(Int64(rows.count)),
            try db.scalar("SELECT count(*) FROM _ls_log WHERE kind = 4") == .integer(Int64(rows.count / transactionRows))
        else { throw BenchError("the import's SQL alone did not leave \(rows.count) Note rows, with their history") }
        return seconds
    }

    /// The node that exported `segments` (the first one's header says).
    private static func origin(of segments: [OutboxSegment]) throws -> NodeID {
        guard let first = segments.first else { throw BenchError("no segments to import") }
        return try SegmentDecoder(bytes: first.bytes).header.node
    }

    static func changeCount(_ segments: [OutboxSegment]) throws -> Int {
        try segments.reduce(0) { total, segment in
            total + (try decode(segment.bytes)).transactions.reduce(0) { $0 + $1.changes.count }
        }
    }

    static func expectRows(_ store: Store, _ count: Int, _ what: String) throws {
        let found = try store.read(#"SELECT count(*) FROM "Note""#).first?.first
        guard found == .integer(Int64(count)) else {
            throw BenchError("\(what) holds \(String(describing: found)) Note rows, expected \(count)")
        }
    }

    // MARK: - Session extension side

    /// Inserts `rows` into a fresh plain database at `path` (the store's DDL and pragmas) in transactions of
    /// ``transactionRows`` rows, with a session attached to `Note` before the first insert, and returns the
    /// session's changeset.
    static func sessionChangeset(_ rows: ArraySlice<NoteRow>, at path: String) throws -> [UInt8] {
        try sessionChangeset(at: path) { try insertPlain(rows, into: $0) }
    }

    /// A fresh plain database at `path` (the store's DDL and pragmas) holding `starting` (inserted before the
    /// session exists), then a session attached to `Note` while `write` runs: returns the session's changeset,
    /// the net change `write` made to each row.
    static func sessionChangeset(
        at path: String, holding starting: ArraySlice<NoteRow> = [], _ write: (PlainDatabase) throws -> Void
    ) throws -> [UInt8] {
        let db = try PlainDatabase(path: path)
        try db.execute(NoteFixture.plainDDL)
        try insertPlain(starting, into: db)
        return try withExtendedLifetime(db) {
            var created: OpaquePointer?
            var rc = sqlite3session_create(db.handle, "main", &created)
            guard rc == SQLITE_OK, let session = created else { throw db.error(rc, "sqlite3session_create") }
            defer { sqlite3session_delete(session) }
            rc = sqlite3session_attach(session, "Note")
            guard rc == SQLITE_OK else { throw db.error(rc, "sqlite3session_attach(Note)") }

            try write(db)

            var size: Int32 = 0
            var buffer: UnsafeMutableRawPointer?
            rc = sqlite3session_changeset(session, &size, &buffer)
            guard rc == SQLITE_OK, let buffer else { throw db.error(rc, "sqlite3session_changeset") }
            defer { sqlite3_free(buffer) }
            return Array(UnsafeRawBufferPointer(start: buffer, count: Int(size)))
        }
    }

    /// Seconds for `sqlite3changeset_apply` to apply `changeset` to a fresh plain database at `path` (same
    /// DDL and pragmas) that holds `starting` (inserted untimed); it runs the whole changeset in one savepoint
    /// of its own, and a conflict aborts it. Checks that `rows` rows are left.
    static func applyChangeset(
        _ changeset: [UInt8], rows: Int, at path: String, holding starting: ArraySlice<NoteRow> = [], describe: Bool = false
    ) throws -> Double {
        let db = try PlainDatabase(path: path)
        try db.execute(NoteFixture.plainDDL)
        try insertPlain(starting, into: db)
        var changeset = changeset
        let seconds = try withExtendedLifetime(db) {
            var rc: Int32 = SQLITE_OK
            let seconds = timed {
                rc = changeset.withUnsafeMutableBytes { raw in
                    sqlite3changeset_apply(
                        db.handle, Int32(raw.count), raw.baseAddress, nil, { _, _, _ in SQLITE_CHANGESET_ABORT }, nil)
                }
            }
            guard rc == SQLITE_OK else { throw db.error(rc, "sqlite3changeset_apply") }
            return seconds
        }
        let found = try db.scalar(#"SELECT count(*) FROM "Note""#)
        guard found == .integer(Int64(rows)) else {
            throw BenchError("changeset_apply left \(String(describing: found)) Note rows, expected \(rows)")
        }
        if describe, case .integer(let pages)? = try db.scalar("PRAGMA page_count"),
            case .integer(let size)? = try db.scalar("PRAGMA page_size")
        {
            Report.progress("    changeset_apply target on disk: \(grouped(Int(pages * size) / 1024)) KiB (Note and its key index only)")
        }
        return seconds
    }

    /// Inserts `rows` into `db` in transactions of ``transactionRows`` rows.
    static func insertPlain(_ rows: ArraySlice<NoteRow>, into db: PlainDatabase) throws {
        let insert = try db.prepare(NoteFixture.plainInsertSQL)
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = min(start + transactionRows, rows.endIndex)
            try db.execute("BEGIN IMMEDIATE")
            for row in rows[start..<end] { try insert.run(row) }
            try db.execute("COMMIT")
            start = end
        }
    }
}

/// How many remote changes `replay` and `stall` import, and how many rounds they measure: one definition,
/// so both suites always speak of the same workload.
struct ImportSizes {
    var changes: Int
    var rounds: Int

    static let full = ImportSizes(changes: 100_000, rounds: 3)
    static let quick = ImportSizes(changes: 20_000, rounds: 2)
    static let warmUp = ImportSizes(changes: 4_000, rounds: 1)
}
