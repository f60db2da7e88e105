/// The framing of a segment: magic, header, compressed body, trailer. docs/log-format.md is the
/// specification; the constants and layout here must match it.
///
/// ```
/// magic(8) version(2) headerLength(2) | header fields … headerCRC(4) | zlib body | bodyLength(8) CRC(4)
/// ```
enum SegmentFormat {
    /// `LSSEG`, CR, LF, SUB: the line-ending and end-of-file bytes catch text-mode mangling, as in PNG.
    static let magic: [UInt8] = [0x4C, 0x53, 0x53, 0x45, 0x47, 0x0D, 0x0A, 0x1A]
    /// Magic, format version and header length: what a reader needs before it knows anything else.
    static let prefixByteCount = 12
    /// The header fields after the prefix, without the two strings: five u64/i64, a u32, two u16 string
    /// lengths and the header CRC.
    static let fixedFieldsByteCount = 52
    /// Uncompressed body length (u64) and the CRC-32 of everything before it (u32).
    static let trailerByteCount = 12
    /// The longest account and node id, in UTF-8 bytes.
    static let maximumHeaderStringBytes = 1024
    /// The largest possible header, prefix included.
    static let maximumHeaderByteCount = prefixByteCount + fixedFieldsByteCount + 2 * maximumHeaderStringBytes
    /// The smallest complete zlib stream (two header bytes, an empty final block, the Adler-32).
    static let minimumBodyByteCount = 8

    static func headerByteCount(account: String, node: NodeID) -> Int {
        prefixByteCount + fixedFieldsByteCount + account.utf8.count + node.rawValue.utf8.count
    }

    /// Checks a header string the encoder is given.
    static func validateHeaderString(_ value: String, _ field: String) throws(SegmentError) {
        guard !value.isEmpty else {
            throw SegmentError(.invalidArgument, at: "header", "the \(field) must not be empty")
        }
        guard value.utf8.count <= maximumHeaderStringBytes else {
            throw SegmentError(
                .invalidArgument, at: "header",
                "the \(field) is \(value.utf8.count) bytes of UTF-8; at most \(maximumHeaderStringBytes) fit a segment header")
        }
    }

    // MARK: Writing

    static func encodeHeader(_ header: SegmentHeader) -> [UInt8] {
        let account = Array(header.account.utf8)
        let node = Array(header.node.rawValue.utf8)
        var writer = ByteWriter()
        writer.bytes.reserveCapacity(prefixByteCount + fixedFieldsByteCount + account.count + node.count)
        writer.write(contentsOf: magic)
        writer.writeLittleEndian(header.formatVersion)
        writer.writeLittleEndian(UInt16(fixedFieldsByteCount + account.count + node.count))
        writer.writeLittleEndian(Int64(header.schemaVersion))
        writer.writeLittleEndian(header.firstSequence)
        writer.writeLittleEndian(header.lastSequence)
        writer.writeLittleEndian(header.minTimestamp.rawValue)
        writer.writeLittleEndian(header.maxTimestamp.rawValue)
        writer.writeLittleEndian(UInt32(header.transactionCount))
        writer.writeLittleEndian(UInt16(account.count))
        writer.write(contentsOf: account)
        writer.writeLittleEndian(UInt16(node.count))
        writer.write(contentsOf: node)
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }

    /// The complete segment: header, compressed body, trailer.
    static func assemble(header: SegmentHeader, compressedBody: [UInt8], uncompressedByteCount: Int) -> [UInt8] {
        var writer = ByteWriter()
        writer.bytes = encodeHeader(header)
        writer.bytes.reserveCapacity(writer.count + compressedBody.count + trailerByteCount)
        writer.write(contentsOf: compressedBody)
        writer.writeLittleEndian(UInt64(uncompressedByteCount))
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }

    // MARK: Reading

    /// Checks the magic and format version, and returns the version and where the header ends.
    static func readPrefix(_ bytes: [UInt8]) throws(SegmentError) -> (formatVersion: UInt16, headerEnd: Int) {
        let available = min(bytes.count, magic.count)
        guard bytes[0..<available].elementsEqual(magic[0..<available]) else {
            throw SegmentError(.badMagic, at: "byte 0", "not a logsync segment: it does not start with the segment magic \"LSSEG\"")
        }
        guard bytes.count >= prefixByteCount else {
            throw SegmentError(
                .truncated, at: "byte \(bytes.count)",
                "a segment starts with \(prefixByteCount) bytes of magic, format version and header length; only \(bytes.count) are present")
        }
        var reader = ByteReader(bytes, from: magic.count)
        let version = try reader.readLittleEndian(UInt16.self, "format version")
        guard version != 0 else {
            throw SegmentError(.malformed, at: "byte 8", "format version 0 does not exist")
        }
        guard version <= SegmentHeader.currentFormatVersion else {
            throw SegmentError(
                .unsupportedFormat, at: "byte 8",
                "the segment is written in format version \(version), newer than the versions this build reads (up to \(SegmentHeader.currentFormatVersion)); keep it for a newer logsync")
        }
        let length = Int(try reader.readLittleEndian(UInt16.self, "header length"))
        let smallest = fixedFieldsByteCount + 2
        let largest = fixedFieldsByteCount + 2 * maximumHeaderStringBytes
        guard (smallest...largest).contains(length) else {
            throw SegmentError(.malformed, at: "byte 10", "header length \(length) is outside \(smallest)...\(largest)")
        }
        return (version, prefixByteCount + length)
    }

    /// Reads and checks the header (its own CRC included), returning it and the offset where it ends.
    static func decodeHeader(_ bytes: [UInt8], limits: SegmentLimits) throws(SegmentError) -> (SegmentHeader, headerEnd: Int) {
        let (version, headerEnd) = try readPrefix(bytes)
        guard bytes.count >= headerEnd else {
            throw SegmentError(
                .truncated, at: "byte \(bytes.count)", "the header is \(headerEnd) bytes long; only \(bytes.count) are present")
        }
        let crcOffset = headerEnd - 4
        var crcReader = ByteReader(bytes, from: crcOffset, to: headerEnd)
        let storedCRC = try crcReader.readLittleEndian(UInt32.self, "header CRC")
        let actualCRC = CRC32.checksum(bytes, 0..<crcOffset)
        guard storedCRC == actualCRC else {
            throw SegmentError(
                .checksumMismatch, at: "byte \(crcOffset)",
                "header CRC-32 is \(hex(storedCRC)) but the header hashes to \(hex(actualCRC)): the header is corrupt")
        }

        var reader = ByteReader(bytes, from: prefixByteCount, to: crcOffset)
        let rawSchemaVersion = try reader.readLittleEndian(Int64.self, "schema version")
        let firstSequence = try reader.readLittleEndian(UInt64.self, "first sequence")
        let lastSequence = try reader.readLittleEndian(UInt64.self, "last sequence")
        let minTimestamp = HLCTimestamp(rawValue: try reader.readLittleEndian(UInt64.self, "minimum timestamp"))
        let maxTimestamp = HLCTimestamp(rawValue: try reader.readLittleEndian(UInt64.self, "maximum timestamp"))
        let count = Int(try reader.readLittleEndian(UInt32.self, "transaction count"))
        let account = try readHeaderString(&reader, "account")
        let node = try readHeaderString(&reader, "node id")
        guard reader.remaining == 0 else {
            throw SegmentError(
                .malformed, at: "byte \(reader.offset)", "\(reader.remaining) unexplained bytes at the end of the header")
        }

        guard let schemaVersion = Int(exactly: rawSchemaVersion), schemaVersion >= 0 else {
            throw SegmentError(.malformed, at: "byte 12", "schema version \(rawSchemaVersion) is negative")
        }
        guard count >= 1 else {
            throw SegmentError(.malformed, at: "byte 52", "a segment holds at least one transaction; the header says 0")
        }
        guard count <= limits.effectiveMaxTransactions else {
            throw SegmentError(
                .limitExceeded, at: "byte 52",
                "the header says \(count) transactions; maxTransactions is \(limits.maxTransactions)")
        }
        guard firstSequence >= 1, lastSequence <= LogTransaction.maximumSequence else {
            throw SegmentError(
                .limitExceeded, at: "byte 20",
                "sequences \(firstSequence)...\(lastSequence) are outside 1...\(LogTransaction.maximumSequence), the range a store records")
        }
        guard firstSequence <= lastSequence, lastSequence - firstSequence == UInt64(count - 1) else {
            throw SegmentError(
                .malformed, at: "byte 20",
                "sequences \(firstSequence)...\(lastSequence) do not match the transaction count \(count)")
        }
        guard minTimestamp <= maxTimestamp else {
            throw SegmentError(.malformed, at: "byte 36", "minimum timestamp \(minTimestamp) is after maximum \(maxTimestamp)")
        }
        let header = SegmentHeader(
            formatVersion: version, schemaVersion: schemaVersion, account: account, node: NodeID(node),
            firstSequence: firstSequence, lastSequence: lastSequence, minTimestamp: minTimestamp,
            maxTimestamp: maxTimestamp, transactionCount: count)
        return (header, headerEnd)
    }

    private static func readHeaderString(_ reader: inout ByteReader, _ field: String) throws(SegmentError) -> String {
        let offset = reader.offset
        let length = Int(try reader.readLittleEndian(UInt16.self, "\(field) length"))
        guard length >= 1, length <= maximumHeaderStringBytes else {
            throw SegmentError(
                .malformed, at: "byte \(offset)", "\(field) length \(length) is outside 1...\(maximumHeaderStringBytes)")
        }
        let utf8 = try reader.readBytes(length, field)
        guard let value = String(validating: utf8, as: UTF8.self) else {
            throw SegmentError(.malformed, at: "byte \(offset + 2)", "\(field) is not valid UTF-8")
        }
        return value
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }
}
