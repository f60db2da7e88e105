import CSQLite

/// A failed SQLite call: the result code, SQLite's own message, and the statement it came from.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The primary result code (SQLITE_BUSY, SQLITE_CORRUPT, ...).
    public var code: Int32
    /// The extended result code, e.g. SQLITE_CONSTRAINT_UNIQUE.
    public var extendedCode: Int32
    public var message: String
    public var sql: String?

    public var description: String {
        let name = String(cString: sqlite3_errstr(extendedCode))
        var text = "SQLite error \(extendedCode) (\(name)): \(message)"
        if let sql { text += " — in: \(sql.prefix(200))" }
        return text
    }

    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    public var isConstraint: Bool { code == SQLITE_CONSTRAINT }
    public var isNotADatabase: Bool { code == SQLITE_NOTADB || code == SQLITE_CORRUPT }
    /// `sqlite3_interrupt` ended the statement (a time limit).
    public var isInterrupt: Bool { code == SQLITE_INTERRUPT }
    /// The disk (or the file size limit) is full.
    public var isFull: Bool { code == SQLITE_FULL }
}
