// The checksums and framing the harness writes itself, so that the fuzzer's bytes reach the decoders'
// inner parsers: a segment's body, a baseline's rows and a progress record's fields are behind CRC-32s
// that random mutations never match. LogsyncCore keeps its CRC-32 and deflater internal; these are
// small, independent copies of the formats in docs/log-format.md (a zlib stream of stored blocks is a
// valid zlib stream that any inflater reads).

/// CRC-32 (IEEE 802.3, the polynomial zlib's crc32 uses).
enum FuzzCRC32 {
    static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var crc = UInt32(index)
        for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// Appends the CRC-32 of everything so far, little-endian: how every plain object closes its parts.
    mutating func appendCRC() { appendLittleEndian(FuzzCRC32.checksum(self)) }
}

/// A zlib stream (RFC 1950) of stored blocks: `bytes` uncompressed, framed so that any inflater reads it.
func storedZlibStream(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x78, 0x01]
    var start = 0
    repeat {
        let end = Swift.min(start + 65_535, bytes.count)
        out.append(end == bytes.count ? 1 : 0)
        out.appendLittleEndian(UInt16(end - start))
        out.appendLittleEndian(~UInt16(end - start))
        out.append(contentsOf: bytes[start..<end])
        start = end
    } while start < bytes.count
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in bytes {
        a = (a + UInt32(byte)) % 65_521
        b = (b + a) % 65_521
    }
    let adler = b << 16 | a
    out.append(contentsOf: [UInt8(adler >> 24), UInt8(truncatingIfNeeded: adler >> 16), UInt8(truncatingIfNeeded: adler >> 8), UInt8(truncatingIfNeeded: adler)])
    return out
}

/// The plain objects' magics (docs/log-format.md).
enum Magic {
    static let segment: [UInt8] = [0x4C, 0x53, 0x53, 0x45, 0x47, 0x0D, 0x0A, 0x1A]
    static let baseline: [UInt8] = [0x4C, 0x53, 0x42, 0x41, 0x53, 0x0D, 0x0A, 0x1A]
    static let progressRecord: [UInt8] = [0x4C, 0x53, 0x50, 0x52, 0x47, 0x0D, 0x0A, 0x1A]
}

/// A segment around `fields` (the header between its prefix and its CRC) and `body`: the header's CRC,
/// the trailer's length and the whole CRC are right whatever the fields and body say.
func framedSegment(version: UInt16, fields: [UInt8], compressedBody: [UInt8], uncompressedLength: UInt64) -> [UInt8] {
    var out = Magic.segment
    out.appendLittleEndian(version)
    out.appendLittleEndian(UInt16(truncatingIfNeeded: fields.count + 4))
    out += fields
    out.appendCRC()
    out += compressedBody
    out.appendLittleEndian(uncompressedLength)
    out.appendCRC()
    return out
}

/// A baseline around header `fields` and a body, with right CRCs (header and whole) and the trailer's
/// row count as given.
func framedBaseline(version: UInt16, fields: [UInt8], compressedBody: [UInt8], rows: UInt64, uncompressedLength: UInt64) -> [UInt8] {
    var out = Magic.baseline
    out.appendLittleEndian(version)
    out.appendLittleEndian(UInt32(truncatingIfNeeded: fields.count + 4))
    out += fields
    out.appendCRC()
    out += compressedBody
    out.appendLittleEndian(rows)
    out.appendLittleEndian(uncompressedLength)
    out.appendCRC()
    return out
}

/// A progress record around `body`, with the right length and CRC.
func framedProgressRecord(version: UInt16, body: [UInt8]) -> [UInt8] {
    var out = Magic.progressRecord
    out.appendLittleEndian(version)
    out.appendLittleEndian(UInt32(truncatingIfNeeded: body.count))
    out += body
    out.appendCRC()
    return out
}

/// Little-endian reads from a valid fixture (the seed writer's; never from fuzzer input).
func readLittleEndian<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
    (0..<MemoryLayout<T>.size).reduce(T(0)) { $0 | T(truncatingIfNeeded: bytes[offset + $1]) << (8 * $1) }
}
