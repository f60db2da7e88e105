import CSQLite
import LogsyncCore
import LogsyncPlatform

/// One libsqlite3 connection: the only type that owns an `sqlite3*`.
///
/// Not thread-safe by itself; every connection lives behind a lock owned by the store.
package final class Connection {
    package struct OpenOptions: OptionSet, Sendable {
        package let rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }
        package static let readWrite = OpenOptions(rawValue: SQLITE_OPEN_READWRITE)
        package static let create = OpenOptions(rawValue: SQLITE_OPEN_CREATE)
        package static let readOnly = OpenOptions(rawValue: SQLITE_OPEN_READONLY)
    }

    package let path: String
    private let handle: OpaquePointer
    private var statementCache: [String: Statement] = [:]
    private var triggerFilter: TriggerFilter?

    /// Process-wide SQLite settings, applied once before the first connection opens: SQLite's count of
    /// the memory it holds is off (nothing here reads it, and it took a global mutex on every allocation,
    /// about 3% of a rebuild's time).
    private static let configured: Void = {
        _ = csqlite_disable_memory_statistics()
    }()

    package init(path: String, options: OpenOptions = [.readWrite, .create]) throws(SQLiteError) {
        _ = Self.configured
        var db: OpaquePointer?
        let flags = options.rawValue | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc & 0xff, extendedCode: rc, message: message, sql: nil)
        }
        // Every identifier logsync generates is double-quoted; with SQLite's legacy fallback on, one that
        // names no column (a column renamed by another program) would silently read as a string literal.
        let dqs = csqlite_disable_double_quoted_strings(db)
        guard dqs == SQLITE_OK else {
            sqlite3_close_v2(db)
            throw SQLiteError(code: dqs, extendedCode: dqs, message: "could not turn off double-quoted string literals", sql: nil)
        }
        self.path = path
        self.handle = db
    }

    deinit {
        if deadline != nil { sqlite3_progress_handler(handle, 0, nil, nil) }
        statementCache.removeAll()
        if walState != nil { sqlite3_wal_hook(handle, nil, nil) }
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    package func execute(_ sql: String) throws(SQLiteError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
    }

    /// Runs one statement without arguments, prepared once and kept (`BEGIN`, `COMMIT` on a write path):
    /// ``execute(_:)`` compiles its SQL on every call.
    package func run(_ sql: String) throws(SQLiteError) {
        try cached(sql).run()
    }

    /// Runs one statement with arguments, discarding any rows.
    package func execute(_ sql: String, _ arguments: [DatabaseValue]) throws(SQLiteError) {
        try cached(sql).run(arguments)
    }

    /// A prepared statement, reused across calls with the same SQL.
    package func cached(_ sql: String) throws(SQLiteError) -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql)
        statementCache[sql] = statement
        return statement
    }

    package func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw error(rc, sql: sql) }
        return Statement(raw, connection: self, sql: sql)
    }

    /// Rows of a query as arrays of values.
    package func rows(_ sql: String, _ arguments: [DatabaseValue] = []) throws(SQLiteError) -> [[DatabaseValue]] {
        try cached(sql).rows(arguments)
    }

    /// The first column of the first row, or nil when there is no row.
    package func scalar(_ sql: String, _ arguments: [DatabaseValue] = []) throws(SQLiteError) -> DatabaseValue? {
        let statement = try cached(sql)
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        let value = statement.value(at: 0)
        statement.reset()
        return value
    }

    package func int64(_ sql: String, _ arguments: [DatabaseValue] = []) throws(SQLiteError) -> Int64? {
        if case .integer(let value)? = try scalar(sql, arguments) { return value }
        return nil
    }

    /// Clears prepared statements; required before DDL changes that would invalidate them wholesale.
    package func clearStatementCache() {
        statementCache.removeAll()
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE (not counting triggers).
    package var changes: Int { Int(sqlite3_changes(handle)) }

    package var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Waits up to `milliseconds` for another connection's lock, retrying every millisecond.
    ///
    /// SQLite's own busy timeout sleeps in growing steps (up to 100 ms), so a waiting writer keeps missing
    /// the short gaps a batched import leaves between its transactions. Polling each millisecond costs a
    /// few wake-ups while waiting and turns those gaps into turns.
    package func setBusyTimeout(milliseconds: Int32) throws(SQLiteError) {
        busyMilliseconds = milliseconds
        try installBusyHandler(milliseconds: milliseconds)
    }

    /// The wait ``setBusyTimeout(milliseconds:)`` set, which ``beginImmediateUnlessBusy()`` puts back.
    private var busyMilliseconds: Int32 = 0

    /// `BEGIN IMMEDIATE` if SQLite's write lock is free now; false, and no transaction, when another
    /// connection holds it (the caller can then say that it waits, and wait).
    package func beginImmediateUnlessBusy() throws(SQLiteError) -> Bool {
        try installBusyHandler(milliseconds: 0)
        defer { try? installBusyHandler(milliseconds: busyMilliseconds) }
        do {
            try run("BEGIN IMMEDIATE")
            return true
        } catch where error.code == SQLITE_BUSY {
            return false
        }
    }

    private func installBusyHandler(milliseconds: Int32) throws(SQLiteError) {
        let limit = UnsafeMutableRawPointer(bitPattern: Int(max(milliseconds, 0)) + 1)
        let rc = sqlite3_busy_handler(handle, { limit, attempts in
            let milliseconds = Int32(Int(bitPattern: limit) - 1)
            guard attempts < milliseconds else { return 0 }
            Pause.microseconds(1_000)
            return 1
        }, limit)
        guard rc == SQLITE_OK else { throw error(rc, sql: nil) }
    }

    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Compiles every column read inside the triggers `matching` names to NULL on this connection (the
    /// store uses it to make its per-row displacement triggers no-ops on its own connections, whose
    /// `recursive_triggers` record what a `REPLACE` deletes anyway). SQLite consults the authorizer when a
    /// statement is compiled, with the name of the trigger doing the read: nothing is checked while
    /// statements run.
    package func ignoreColumnReads(inTriggers matching: @escaping @Sendable (String) -> Bool) throws(SQLiteError) {
        let filter = TriggerFilter(matching)
        let rc = sqlite3_set_authorizer(handle, { context, action, _, _, _, trigger in
            guard action == SQLITE_READ, let context, let trigger,
                Unmanaged<TriggerFilter>.fromOpaque(context).takeUnretainedValue().matches(String(cString: trigger))
            else { return SQLITE_OK }
            return SQLITE_IGNORE
        }, Unmanaged.passUnretained(filter).toOpaque())
        guard rc == SQLITE_OK else { throw error(rc, sql: nil) }
        triggerFilter = filter
    }

    /// The predicate ``ignoreColumnReads(inTriggers:)`` installed, kept alive as long as the connection.
    private final class TriggerFilter {
        let matches: @Sendable (String) -> Bool
        init(_ matches: @escaping @Sendable (String) -> Bool) { self.matches = matches }
    }

    /// When statements on this connection give up (see ``interrupt(at:)``).
    private final class Deadline {
        let instant: ContinuousClock.Instant
        init(_ instant: ContinuousClock.Instant) { self.instant = instant }
    }

    private var deadline: Deadline?

    /// Makes a statement on this connection stop with `SQLITE_INTERRUPT` once `instant` has passed
    /// (looked at every 1,000 steps of SQLite's virtual machine); nil lifts the bound.
    package func interrupt(at instant: ContinuousClock.Instant?) {
        guard let instant else {
            sqlite3_progress_handler(handle, 0, nil, nil)
            deadline = nil
            return
        }
        let box = Deadline(instant)
        deadline = box
        sqlite3_progress_handler(handle, 1_000, { context in
            guard let context else { return 0 }
            return ContinuousClock.now >= Unmanaged<Deadline>.fromOpaque(context).takeUnretainedValue().instant ? 1 : 0
        }, Unmanaged.passUnretained(box).toOpaque())
    }

    /// Turns this connection's triggers on or off (`SQLITE_DBCONFIG_ENABLE_TRIGGER`). Changing the
    /// setting expires every prepared statement of the connection: each is compiled again, with or without
    /// trigger programs, the next time it runs.
    package func setTriggersEnabled(_ enabled: Bool) throws(SQLiteError) {
        guard csqlite_enable_triggers(handle, enabled ? 1 : 0) == (enabled ? 1 : 0) else {
            throw SQLiteError(
                code: SQLITE_ERROR, extendedCode: SQLITE_ERROR,
                message: "could not turn triggers \(enabled ? "on" : "off") (sqlite3_db_config ENABLE_TRIGGER)", sql: nil)
        }
    }

    /// What SQLite's WAL hook last reported on this connection.
    private final class WALState {
        /// Frames in the WAL after the connection's last commit.
        var frames: Int32 = 0
        /// Past this many frames the connection checkpoints by itself, inside its commit.
        let fallbackFrames: Int32

        init(fallbackFrames: Int32) { self.fallbackFrames = fallbackFrames }
    }

    private var walState: WALState?

    /// Takes over SQLite's automatic checkpoint on this connection: its commits record how many frames
    /// the WAL holds (``walFrames``), so that the owner can checkpoint from another connection once the
    /// writer's lock is released. Only past `fallbackFrames` — nobody else checkpointed — does a commit
    /// checkpoint by itself, as SQLite's automatic checkpoint would.
    package func trackWALFrames(fallbackFrames: Int32) {
        let state = WALState(fallbackFrames: fallbackFrames)
        walState = state
        sqlite3_wal_hook(handle, { context, db, name, frames in
            guard let context else { return SQLITE_OK }
            let state = Unmanaged<WALState>.fromOpaque(context).takeUnretainedValue()
            state.frames = frames
            // Errors are ignored, as SQLite's own automatic checkpoint ignores them: the commit succeeded.
            if frames >= state.fallbackFrames { sqlite3_wal_checkpoint(db, name) }
            return SQLITE_OK
        }, Unmanaged.passUnretained(state).toOpaque())
    }

    /// Frames in the WAL after this connection's last commit, once ``trackWALFrames(fallbackFrames:)`` is on.
    package var walFrames: Int { Int(walState?.frames ?? 0) }

    /// A passive checkpoint (`sqlite3_wal_checkpoint_v2(PASSIVE)`): copies what it can of the WAL into the
    /// database without waiting for, or blocking, writers.
    package func checkpointPassively() throws(SQLiteError) {
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

    package func error(_ rc: Int32, sql: String?) -> SQLiteError {
        SQLiteError(
            code: rc & 0xff, extendedCode: sqlite3_extended_errcode(handle),
            message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// The raw handle, for the few places (benchmarks, the session extension) that need the C API.
    package var sqliteConnection: OpaquePointer { handle }
}
