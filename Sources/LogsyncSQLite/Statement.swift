import CSQLite
import LogsyncCore

/// A prepared statement. Owned by its connection's cache; never shared across threads.
package final class Statement {
    private let handle: OpaquePointer
    private unowned let connection: Connection
    package let sql: String

    /// Per parameter, a buffer this statement owns and SQLite reads bound text and blobs from
    /// (`SQLITE_STATIC`). SQLite's own copy (`SQLITE_TRANSIENT`) allocates and frees memory for every bind;
    /// for the merge's per-row statements that was a tenth of an import (`docs/BENCHMARKS-history.md`). A buffer
    /// is overwritten only when its parameter is bound again, and freed after the statement is finalized.
    private var lent: [UnsafeMutableRawBufferPointer] = []
    /// Bytes larger than this are copied by SQLite instead, so that a statement kept in a cache does not
    /// hold a large buffer for good.
    private static let largestLent = 4_096

    package init(_ handle: OpaquePointer, connection: Connection, sql: String) {
        self.handle = handle
        self.connection = connection
        self.sql = sql
    }

    deinit {
        sqlite3_finalize(handle)
        for buffer in lent { buffer.deallocate() }
    }

    package func reset() {
        sqlite3_reset(handle)
    }

    /// Binds every parameter; a count that does not match the statement's parameters is an error rather
    /// than a silent reuse of the previous call's values.
    package func bind(_ arguments: [DatabaseValue]) throws(SQLiteError) {
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard arguments.count == expected else {
            throw SQLiteError(
                code: SQLITE_RANGE, extendedCode: SQLITE_RANGE,
                message: "the statement takes \(expected) arguments, \(arguments.count) were given", sql: sql)
        }
        for (offset, value) in arguments.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Binds an integer; for the merge's hot statements, which bind each parameter in place instead of
    /// building an array of values per row.
    package func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        let rc = sqlite3_bind_int64(handle, index, value)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Binds bytes as a blob without wrapping them in a ``DatabaseValue``.
    package func bind(bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        let rc = bindCopy(of: bytes, at: index, asText: false)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Binds bytes as text (UTF-8 or not, as ``DatabaseValue/nonUTF8Text(_:)`` binds) without making a
    /// `String` of them.
    package func bind(textBytes bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        let rc = bindCopy(of: bytes, at: index, asText: true)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    package func bind(_ value: Double, at index: Int32) throws(SQLiteError) {
        let rc = sqlite3_bind_double(handle, index, value)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    package func bindNull(at index: Int32) throws(SQLiteError) {
        let rc = sqlite3_bind_null(handle, index)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Binds a copy of `bytes` as text or a blob: in the parameter's own buffer (``lent``) when they fit,
    /// else copied by SQLite.
    private func bindCopy(of bytes: UnsafeRawBufferPointer, at index: Int32, asText: Bool) -> Int32 {
        guard bytes.count <= Self.largestLent, index >= 1, index <= sqlite3_bind_parameter_count(handle) else {
            // Past the buffers' size, so never empty (or out of range, which SQLite reports without reading).
            let empty: StaticString = ""
            let base = bytes.baseAddress ?? UnsafeRawPointer(empty.utf8Start)
            return asText
                ? csqlite_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
                : csqlite_bind_blob(handle, index, base, Int32(bytes.count))
        }
        let slot = Int(index) - 1
        while lent.count <= slot {
            lent.append(.allocate(byteCount: 64, alignment: 8))
        }
        if lent[slot].count < bytes.count {
            lent[slot].deallocate()
            lent[slot] = .allocate(byteCount: max(bytes.count, 2 * lent[slot].count), alignment: 8)
        }
        let buffer = lent[slot]
        if let source = bytes.baseAddress { buffer.baseAddress!.copyMemory(from: source, byteCount: bytes.count) }
        // A zero-length buffer still has an address: SQLite would read a null pointer as NULL, not as ''.
        return asText
            ? csqlite_bind_text_static(handle, index, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
            : csqlite_bind_blob_static(handle, index, buffer.baseAddress!, Int32(bytes.count))
    }

    package func bind(_ value: DatabaseValue, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .real(let v): rc = sqlite3_bind_double(handle, index, v)
        case .text(var v):
            rc = v.withUTF8 { bindCopy(of: UnsafeRawBufferPointer($0), at: index, asText: true) }
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { bindCopy(of: $0, at: index, asText: false) }
        case .nonUTF8Text(let bytes):
            rc = bytes.withUnsafeBytes { bindCopy(of: $0, at: index, asText: true) }
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Advances to the next row; false when done. Resets the statement after the last row or an error.
    package func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            let error = connection.error(rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs a statement that returns no rows (or whose rows are not wanted) to completion.
    package func run() throws(SQLiteError) {
        while try step() {}
    }

    /// Binds `arguments` (``bind(_:)``) and runs the statement to completion.
    package func run(_ arguments: [DatabaseValue]) throws(SQLiteError) {
        try bind(arguments)
        try run()
    }

    /// Binds `arguments` (``bind(_:)``) and returns every row as an array of values.
    package func rows(_ arguments: [DatabaseValue]) throws(SQLiteError) -> [[DatabaseValue]] {
        try bind(arguments)
        var result: [[DatabaseValue]] = []
        while try step() {
            result.append((0..<columnCount).map { value(at: $0) })
        }
        return result
    }

    package var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// Whether the statement cannot change the database (`sqlite3_stmt_readonly`): a query, not an
    /// `INSERT … RETURNING`.
    package var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }

    /// Calls `body` with the bytes of a BLOB (or TEXT) column of the current row, without copying them.
    /// The bytes are valid only inside `body`: the next step or reset frees them.
    package func withBytes<T>(at column: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let index = Int32(column)
        // sqlite3_column_blob first, then sqlite3_column_bytes: the order SQLite documents as safe.
        guard let base = sqlite3_column_blob(handle, index) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: base, count: Int(sqlite3_column_bytes(handle, index))))
    }

    package func value(at column: Int) -> DatabaseValue {
        let index = Int32(column)
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, index))
        case SQLITE_TEXT: return DatabaseValue(textBytes: textBytes(at: index))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, index))
            guard count > 0, let base = sqlite3_column_blob(handle, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: base, count: count)))
        default: return .null
        }
    }

    package func isInteger(at column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_INTEGER }
    package func isBlob(at column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_BLOB }

    package func int64(at column: Int) -> Int64 { sqlite3_column_int64(handle, Int32(column)) }
    package func isNull(at column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL }
    /// A TEXT column as a string; nil for NULL. Text that is not valid UTF-8 is repaired here, so this is
    /// only for logsync's own bookkeeping columns (authors, node ids, JSON), never for synced values, which
    /// ``value(at:)`` reads byte for byte.
    package func text(at column: Int) -> String? {
        guard sqlite3_column_type(handle, Int32(column)) != SQLITE_NULL else { return nil }
        return String(decoding: textBytes(at: Int32(column)), as: UTF8.self)
    }

    /// The bytes of a column read as text, NUL characters included: SQLite's length, not the C string's.
    private func textBytes(at index: Int32) -> UnsafeBufferPointer<UInt8> {
        // sqlite3_column_text first, then sqlite3_column_bytes: the order SQLite documents as safe.
        guard let base = sqlite3_column_text(handle, index) else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: base, count: Int(sqlite3_column_bytes(handle, index)))
    }
}
