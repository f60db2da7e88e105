import CSQLite
import LogsyncSQLite

/// A raw libsqlite3 connection for baselines: no logsync, opened with the same pragmas a `Store` uses
/// (WAL, synchronous=NORMAL, foreign_keys, recursive_triggers, busy timeout 5000 ms, no memory statistics).
///
/// Not thread-safe; each benchmark keeps its own instance local to one function.
final class PlainDatabase {
    /// The raw connection, for baselines that call libsqlite3 directly (the session extension).
    let handle: OpaquePointer

    init(path: String) throws {
        // The process-wide setting a `Store`'s connections make (`Connection.configured`).
        _ = csqlite_disable_memory_statistics()
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw BenchError("sqlite3_open_v2 \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(handle, 5_000)
        guard case .text(let mode)? = try scalar("PRAGMA journal_mode = WAL"), mode.lowercased() == "wal" else {
            throw BenchError("could not switch \(path) to WAL mode")
        }
        try execute(
            """
            PRAGMA synchronous = NORMAL;
            PRAGMA foreign_keys = ON;
            PRAGMA recursive_triggers = ON;
            PRAGMA cache_size = -32768;
            PRAGMA mmap_size = 268435456;
            """)
    }

    deinit { sqlite3_close_v2(handle) }

    /// The rowid of the last row inserted on this connection.
    var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The version of the libsqlite3 this process runs with.
    static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    /// Runs statements that return no rows (or whose rows are ignored).
    func execute(_ sql: String) throws {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql) }
    }

    func prepare(_ sql: String) throws -> PlainStatement {
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw error(rc, sql) }
        return PlainStatement(raw, database: self, sql: sql)
    }

    /// The first column of the first row, as text or integer; nil when there is no row.
    func scalar(_ sql: String) throws -> ScalarValue? {
        let statement = try prepare(sql)
        return try statement.firstValue()
    }

    enum ScalarValue: Equatable {
        case integer(Int64)
        case text(String)
        case other
    }

    func error(_ rc: Int32, _ sql: String) -> BenchError {
        BenchError("SQLite error \(rc) (\(String(cString: sqlite3_errmsg(handle)))) in: \(sql)")
    }
}

/// A prepared statement of a ``PlainDatabase``, finalized when released.
final class PlainStatement {
    private let handle: OpaquePointer
    private let database: PlainDatabase
    private let sql: String

    fileprivate init(_ handle: OpaquePointer, database: PlainDatabase, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    func bind(_ text: String, at index: Int32) throws {
        var text = text
        let rc = text.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                let empty: StaticString = ""
                let base = chars.baseAddress ?? UnsafeRawPointer(empty.utf8Start).assumingMemoryBound(to: CChar.self)
                return csqlite_bind_text(handle, index, base, Int32(chars.count))
            }
        }
        guard rc == SQLITE_OK else { throw database.error(rc, sql) }
    }

    func bind(bytes: [UInt8], at index: Int32) throws {
        let rc = bytes.withUnsafeBytes { csqlite_bind_blob(handle, index, $0.baseAddress, Int32($0.count)) }
        guard rc == SQLITE_OK else { throw database.error(rc, sql) }
    }

    func bind(_ value: Int64, at index: Int32) throws {
        let rc = sqlite3_bind_int64(handle, index, value)
        guard rc == SQLITE_OK else { throw database.error(rc, sql) }
    }

    func bind(_ value: Double, at index: Int32) throws {
        let rc = sqlite3_bind_double(handle, index, value)
        guard rc == SQLITE_OK else { throw database.error(rc, sql) }
    }

    /// Steps a statement that returns no rows to completion and resets it for the next bindings.
    func run() throws {
        let rc = sqlite3_step(handle)
        sqlite3_reset(handle)
        guard rc == SQLITE_DONE else { throw database.error(rc, sql) }
    }

    /// Whether the statement returns a row (it is reset afterwards).
    func hasRow() throws -> Bool { try firstValue() != nil }

    fileprivate func firstValue() throws -> PlainDatabase.ScalarValue? {
        defer { sqlite3_reset(handle) }
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW:
            switch sqlite3_column_type(handle, 0) {
            case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, 0))
            case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(handle, 0)))
            default: return .other
            }
        case SQLITE_DONE: return nil
        default: throw database.error(rc, sql)
        }
    }
}
