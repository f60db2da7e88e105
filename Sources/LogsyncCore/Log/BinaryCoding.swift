// Byte-level building blocks of the segment format: little-endian fixed-width integers, LEB128 varints,
// zigzag for signed values. See docs/log-format.md.

/// Maps signed integers to unsigned ones so that small magnitudes of either sign make short varints:
/// 0 → 0, −1 → 1, 1 → 2, −2 → 3, …
@inline(__always)
func zigzagEncode(_ value: Int64) -> UInt64 {
    UInt64(bitPattern: (value << 1) ^ (value >> 63))
}

@inline(__always)
func zigzagDecode(_ value: UInt64) -> Int64 {
    Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
}

/// Appends encoded values to a growing byte array.
struct ByteWriter {
    var bytes: [UInt8] = []

    var count: Int { bytes.count }

    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    @inline(__always)
    mutating func write(_ byte: UInt8) { bytes.append(byte) }

    mutating func write(contentsOf other: some Collection<UInt8>) { bytes.append(contentsOf: other) }

    mutating func writeLittleEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Only for UUIDs, whose bytes are in the order their hex digits are written.
    mutating func writeBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Unsigned LEB128: seven bits per byte, least significant group first, high bit set on every byte but
    /// the last. Always the shortest form (1 to 10 bytes).
    @inline(__always)
    mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func writeVarint(_ value: Int) { writeVarint(UInt64(value)) }
}

/// Reads fixed-width fields from a byte array, with every read bounds-checked.
///
/// Offsets in errors are positions in `bytes`, which for headers is the segment's own byte offset.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.offset = start
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var remaining: Int { end - offset }

    mutating func readLittleEndian<T: FixedWidthInteger>(_: T.Type, _ field: String) throws(SegmentError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else {
            throw SegmentError(.truncated, at: "byte \(offset)", "\(field) needs \(size) bytes, only \(remaining) left")
        }
        var value: T = 0
        for index in 0..<size {
            value |= T(truncatingIfNeeded: bytes[offset + index]) << (8 * index)
        }
        offset += size
        return value
    }

    mutating func readBytes(_ count: Int, _ field: String) throws(SegmentError) -> ArraySlice<UInt8> {
        guard count >= 0, remaining >= count else {
            throw SegmentError(.truncated, at: "byte \(offset)", "\(field) needs \(count) bytes, only \(remaining) left")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }
}
