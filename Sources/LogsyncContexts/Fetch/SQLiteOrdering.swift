import LogsyncCore

/// SQLite's ordering of values, for sorting and filtering unsaved objects exactly as the store would:
/// NULL first, then numbers (integers and reals by value), then text (byte by byte: the BINARY
/// collation), then blobs (byte by byte).
enum SQLiteOrdering {
    /// Negative, zero or positive as `lhs` sorts before, with, or after `rhs`.
    static func compare(_ lhs: DatabaseValue, _ rhs: DatabaseValue) -> Int {
        let (lhsClass, rhsClass) = (storageClass(lhs), storageClass(rhs))
        if lhsClass != rhsClass { return lhsClass < rhsClass ? -1 : 1 }
        switch (lhs, rhs) {
        case (.integer(let a), .integer(let b)): return a < b ? -1 : (a == b ? 0 : 1)
        case (.text(let a), .text(let b)): return bytes(Array(a.utf8), Array(b.utf8))
        case (.blob(let a), .blob(let b)): return bytes(a, b)
        case (.null, .null): return 0
        default:
            let (a, b) = (number(lhs), number(rhs))
            return a < b ? -1 : (a == b ? 0 : 1)
        }
    }

    private static func storageClass(_ value: DatabaseValue) -> Int {
        switch value {
        case .null: return 0
        case .integer, .real: return 1
        case .text: return 2
        case .blob: return 3
        }
    }

    private static func number(_ value: DatabaseValue) -> Double {
        switch value {
        case .integer(let value): return Double(value)
        case .real(let value): return value
        default: return 0
        }
    }

    private static func bytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    /// The value as SQLite's text functions see it (`instr`, `lower`); nil for NULL.
    static func text(of value: DatabaseValue) -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .blob(let bytes): return String(decoding: bytes, as: UTF8.self)
        }
    }

    static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (65...90).contains(byte) ? byte + 32 : byte
    }
}
