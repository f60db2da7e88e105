/// A value stored in, or read from, a column of a synced table.
///
/// The cases mirror SQLite's storage classes, so a value round-trips through the store unchanged, byte for
/// byte: text may hold NUL characters, and text whose bytes are not valid UTF-8 (which SQLite stores as
/// given, from any writer) is ``nonUTF8Text(_:)`` rather than a repaired `String`.
public enum DatabaseValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    /// TEXT that is valid UTF-8 (NUL characters included).
    case text(String)
    case blob([UInt8])
    /// TEXT whose bytes are not valid UTF-8, kept exactly as stored. Never holds valid UTF-8: text that is
    /// valid is always ``text(_:)``, so equal text is always the same case. Build one with
    /// ``init(textBytes:)``.
    case nonUTF8Text([UInt8])

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// TEXT with exactly these bytes: ``text(_:)`` when they are valid UTF-8, else ``nonUTF8Text(_:)``.
    public init(textBytes bytes: UnsafeBufferPointer<UInt8>) {
        if let string = validUTF8String(bytes) {
            self = .text(string)
        } else {
            self = .nonUTF8Text(Array(bytes))
        }
    }

    /// TEXT with exactly these bytes: ``text(_:)`` when they are valid UTF-8, else ``nonUTF8Text(_:)``.
    public init(textBytes bytes: [UInt8]) {
        self = bytes.withUnsafeBufferPointer { DatabaseValue(textBytes: $0) }
    }

    /// Whether this is TEXT (valid UTF-8 or not).
    public var isText: Bool {
        switch self {
        case .text, .nonUTF8Text: return true
        default: return false
        }
    }

    /// The bytes of TEXT as SQLite stores them, whether or not they are valid UTF-8; nil for other values.
    public var textBytes: [UInt8]? {
        switch self {
        case .text(let string): return Array(string.utf8)
        case .nonUTF8Text(let bytes): return bytes
        default: return nil
        }
    }
}

extension DatabaseValue: CustomStringConvertible {
    /// The value as an SQL literal that evaluates to exactly this value. Text that holds a NUL or is not
    /// valid UTF-8 is written as `CAST(X'…' AS TEXT)`, so that printing it never cuts or alters it.
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .text(let value):
            if value.utf8.contains(0) { return "CAST(X'\(hexString(value.utf8))' AS TEXT)" }
            return "'\(value.replacingOccurrences(of: "'", with: "''"))'"
        case .blob(let bytes): return "X'\(hexString(bytes))'"
        case .nonUTF8Text(let bytes): return "CAST(X'\(hexString(bytes))' AS TEXT)"
        }
    }
}

extension DatabaseValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByNilLiteral, ExpressibleByBooleanLiteral
{
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
}

/// Lowercase hexadecimal digits of `bytes`, two per byte.
public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// The bytes that the hexadecimal digits in `hex` spell (either case), or nil when `hex` holds anything
/// else or an odd number of digits.
public func bytes(hex: some StringProtocol) -> [UInt8]? {
    var result: [UInt8] = []
    result.reserveCapacity(hex.utf8.count / 2)
    var high: UInt8?
    for character in hex.utf8 {
        let nibble: UInt8
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
        default: return nil
        }
        if let h = high {
            result.append(h << 4 | nibble)
            high = nil
        } else {
            high = nibble
        }
    }
    return high == nil ? result : nil
}

/// The string `bytes` spell, or nil when they are not valid UTF-8.
///
/// `String(decoding:as:)` has a fast path for contiguous UTF-8 and copies valid input unchanged (invalid
/// input is repaired with U+FFFD), so comparing its bytes with the input validates at memcmp speed; the
/// generic `String(validating:as:)` is several times slower.
package func validUTF8String(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
    var string = String(decoding: bytes, as: UTF8.self)
    let unchanged = string.withUTF8 { decoded in
        decoded.count == bytes.count && (bytes.isEmpty || decoded.elementsEqual(bytes))
    }
    return unchanged ? string : nil
}
