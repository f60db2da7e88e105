// The uncompressed body of a segment: one record per transaction, names defined on first use, tagged
// values. docs/log-format.md is the specification; the constants and layout here must match it.

/// Value tags: the first byte of every encoded ``DatabaseValue``.
enum ValueTag {
    static let null: UInt8 = 0
    /// Zigzag varint.
    static let integer: UInt8 = 1
    /// IEEE 754 binary64 bit pattern, 8 bytes little-endian.
    static let real: UInt8 = 2
    /// Varint byte length, then UTF-8.
    static let text: UInt8 = 3
    /// Varint byte length, then the bytes.
    static let blob: UInt8 = 4
    /// Text that is a canonical lowercase UUID: the 16 bytes its 32 hex digits spell, in order.
    static let uuidText: UInt8 = 5
    /// Format 2: text whose bytes are not valid UTF-8; varint byte length, then the bytes.
    static let nonUTF8Text: UInt8 = 6
}

/// Transaction flag bits.
enum TransactionFlags {
    static let hasAuthor: UInt8 = 1 << 0
    static let hasContextName: UInt8 = 1 << 1
    static let all: UInt8 = hasAuthor | hasContextName
}

/// Whether `value` is within `limit`, for a limit that a careless caller may have made negative.
@inline(__always)
func fitsLimit(_ value: UInt64, _ limit: Int) -> Bool { value <= UInt64(clamping: limit) }
