import CSQLite
import LogsyncCore

/// A plain SQLite connection to a store's file, as a program that has never heard of logsync would open
/// it: none of logsync's pragmas (recursive triggers and foreign keys off unless a test turns them on),
/// double-quoted string literals allowed, its own busy timeout. For tests of what capture sees.
public final class ForeignConnection {
    public struct Failure: Error, CustomStringConvertible {
        public let code: Int32
        public let message: String
        public let sql: String
        public var description: String { "SQLite error \(code) (\(message)) in: \(sql)" }
    }

    private let handle: OpaquePointer

    public init(path: String, busyTimeoutMilliseconds: Int32 = 5_000) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil)
        guard rc == SQLITE_OK, let db else {
            sqlite3_close_v2(db)
            throw Failure(code: rc, message: String(cString: sqlite3_errstr(rc)), sql: "open \(path)")
        }
        handle = db
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs one statement with `arguments` bound to its parameters, and returns its rows.
    @discardableResult
    public func execute(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw failure(sql)
        }
        defer { sqlite3_finalize(statement) }
        for (offset, value) in arguments.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .integer(let v): sqlite3_bind_int64(statement, index, v)
            case .real(let v): sqlite3_bind_double(statement, index, v)
            case .text, .nonUTF8Text:
                // One byte more than the text, so that even empty text has an address (NULL would bind NULL).
                let bytes = (value.textBytes ?? []) + [0]
                _ = bytes.withUnsafeBytes { csqlite_bind_text(statement, index, $0.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(bytes.count - 1)) }
            case .blob(let bytes):
                let padded = bytes + [0]
                _ = padded.withUnsafeBytes { csqlite_bind_blob(statement, index, $0.baseAddress!, Int32(bytes.count)) }
            }
        }
        var rows: [[DatabaseValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw failure(sql) }
            rows.append((0..<sqlite3_column_count(statement)).map { Self.value(statement, $0) })
        }
    }

    /// Whether a transaction is open (after `BEGIN`, or a savepoint outside one).
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Runs statements that take no arguments, one after another (`sqlite3_exec`).
    public func script(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw failure(sql) }
    }

    private func failure(_ sql: String) -> Failure {
        Failure(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    private static func value(_ statement: OpaquePointer, _ column: Int32) -> DatabaseValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            guard let base = sqlite3_column_text(statement, column) else { return .text("") }
            return DatabaseValue(textBytes: UnsafeBufferPointer(start: base, count: Int(sqlite3_column_bytes(statement, column))))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let base = sqlite3_column_blob(statement, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: base, count: count)))
        default: return .null
        }
    }
}
