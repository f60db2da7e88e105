import LogsyncCore

/// How SQLite's text functions see values, for filtering unsaved objects exactly as the store would
/// (the order of values is ``DatabaseValue/sqliteOrder(comparedTo:)``).
enum SQLiteOrdering {
    /// The value as SQLite's text functions see it (`instr`, `lower`); nil for NULL.
    static func text(of value: DatabaseValue) -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .blob(let bytes), .nonUTF8Text(let bytes): return String(decoding: bytes, as: UTF8.self)
        }
    }

    static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (65...90).contains(byte) ? byte + 32 : byte
    }
}
