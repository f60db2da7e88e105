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

// MARK: - Canonical UUID text

enum CanonicalUUID {
    /// The 128 bits of `text` when it is a canonical lowercase UUID (8-4-4-4-12 lowercase hex digits
    /// with dashes), or nil. Uppercase and other spellings are ordinary text: they must round-trip exactly.
    static func parse(_ text: String) -> (high: UInt64, low: UInt64)? {
        guard text.utf8.count == 36 else { return nil }
        var text = text
        return text.withUTF8 { utf8 -> (high: UInt64, low: UInt64)? in
            let dash = UInt8(ascii: "-")
            guard utf8[8] == dash, utf8[13] == dash, utf8[18] == dash, utf8[23] == dash else { return nil }
            var high: UInt64 = 0
            var low: UInt64 = 0
            var digits = 0
            for index in 0..<36 where index != 8 && index != 13 && index != 18 && index != 23 {
                let byte = utf8[index]
                let nibble: UInt8
                if byte &- UInt8(ascii: "0") < 10 {
                    nibble = byte &- UInt8(ascii: "0")
                } else if byte &- UInt8(ascii: "a") < 6 {
                    nibble = byte &- UInt8(ascii: "a") &+ 10
                } else {
                    return nil
                }
                if digits < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
                digits += 1
            }
            return (high, low)
        }
    }

    /// The canonical lowercase spelling of 16 bytes.
    static func format(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let hex: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { output in
            hex.withUTF8Buffer { digits in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        output[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    let byte = bytes[index]
                    output[position] = digits[Int(byte >> 4)]
                    output[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
            }
            return 36
        }
    }
}

// MARK: - Encoding

/// Encodes transactions into body records, keeping the segment's name table.
///
/// Encoding one transaction either succeeds or leaves the encoder exactly as it was, so a transaction that
/// does not fit can go to the next segment.
struct BodyEncoder {
    let limits: SegmentLimits
    private var nameIndices: [String: UInt64] = [:]
    private var names: [String] = []
    private var namesBeforeLastEncode = 0
    private var previousTimestamp: UInt64 = 0
    private var committedCount = 0
    /// The record being encoded holds a value only format 2 can carry.
    private var recordNeedsFormat2 = false
    /// The lowest format version that can carry every committed record: 1 unless one holds text that is
    /// not valid UTF-8 (``ValueTag/nonUTF8Text``). Older readers keep a format-2 segment unapplied instead
    /// of misreading it, so segments use format 2 only when they must.
    private(set) var formatVersion: UInt16 = 1

    init(limits: SegmentLimits) { self.limits = limits }

    /// Where a problem is, built only when there is one.
    private struct Site {
        var sequence: UInt64
        var change: Int?
        var column: String?

        var description: String {
            var text = "transaction \(sequence)"
            if let change { text += ", change \(change)" }
            if let column { text += ", column '\(column)'" }
            return text
        }
    }

    /// Replaces `writer`'s bytes with the record for `transaction`. Call ``commit(_:)`` once the record is
    /// in the segment, or ``rollback()`` if it is not.
    mutating func encode(_ transaction: LogTransaction, into writer: inout ByteWriter) throws(SegmentError) {
        namesBeforeLastEncode = names.count
        recordNeedsFormat2 = false
        writer.removeAll()
        do {
            try encodeRecord(transaction, into: &writer)
        } catch {
            rollback()
            throw error
        }
    }

    /// Forgets the names the last ``encode(_:into:)`` defined.
    mutating func rollback() {
        for name in names[namesBeforeLastEncode...] { nameIndices[name] = nil }
        names.removeSubrange(namesBeforeLastEncode...)
    }

    /// Records that the last encoded transaction is in the segment: later timestamps are relative to it.
    mutating func commit(_ transaction: LogTransaction) {
        previousTimestamp = transaction.timestamp.rawValue
        committedCount += 1
        namesBeforeLastEncode = names.count
        if recordNeedsFormat2 { formatVersion = max(formatVersion, 2) }
    }

    private mutating func encodeRecord(_ transaction: LogTransaction, into writer: inout ByteWriter) throws(SegmentError) {
        var site = Site(sequence: transaction.sequence)
        writer.writeVarint(committedCount == 0 ? 0 as UInt64 : 1)
        writer.writeVarint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue &- previousTimestamp)))
        var flags: UInt8 = 0
        if transaction.author != nil { flags |= TransactionFlags.hasAuthor }
        if transaction.contextName != nil { flags |= TransactionFlags.hasContextName }
        writer.write(flags)
        if let author = transaction.author { try writeName(author, "author", site, into: &writer) }
        if let contextName = transaction.contextName { try writeName(contextName, "context name", site, into: &writer) }

        guard fitsLimit(UInt64(transaction.changes.count), limits.maxChangesPerTransaction) else {
            throw SegmentError(
                .limitExceeded, at: site.description,
                "\(transaction.changes.count) changes; maxChangesPerTransaction is \(limits.maxChangesPerTransaction)")
        }
        writer.writeVarint(transaction.changes.count)
        for (index, change) in transaction.changes.enumerated() {
            site.change = index
            try writeName(change.entity, "entity name", site, into: &writer)
            writer.write(UInt8(truncatingIfNeeded: change.kind.rawValue))
            writer.writeVarint(change.causalLength)
            try writeValue(change.primaryKey, site, into: &writer)
            guard fitsLimit(UInt64(change.values.count), limits.maxValuesPerChange) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "\(change.values.count) values; maxValuesPerChange is \(limits.maxValuesPerChange)")
            }
            writer.writeVarint(change.values.count)
            // Sorted by name, so the same change always encodes to the same bytes.
            for (column, value) in change.values.sorted(by: { $0.key < $1.key }) {
                site.column = column
                try writeName(column, "column name", site, into: &writer)
                try writeValue(value, site, into: &writer)
            }
            site.column = nil
        }
    }

    /// A name reference: the varint index + 1 of a name already in the table, or 0 followed by a new name
    /// (varint length, UTF-8), which takes the next index.
    private mutating func writeName(_ name: String, _ what: String, _ site: Site, into writer: inout ByteWriter) throws(SegmentError) {
        if let index = nameIndices[name] {
            writer.writeVarint(index + 1)
            return
        }
        let length = name.utf8.count
        guard fitsLimit(UInt64(length), limits.maxStringBytes) else {
            throw SegmentError(
                .limitExceeded, at: site.description,
                "the \(what) is \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
        }
        guard fitsLimit(UInt64(names.count + 1), limits.maxNames) else {
            // If the segment is empty, this transaction alone has too many names for any segment.
            throw SegmentError(
                committedCount == 0 ? .limitExceeded : .segmentFull, at: site.description,
                "the \(what) would be name \(names.count + 1) in the segment's name table; maxNames is \(limits.maxNames)")
        }
        nameIndices[name] = UInt64(names.count)
        names.append(name)
        writer.writeVarint(0 as UInt64)
        writer.writeVarint(length)
        writer.write(contentsOf: name.utf8)
    }

    private mutating func writeValue(_ value: DatabaseValue, _ site: Site, into writer: inout ByteWriter) throws(SegmentError) {
        switch value {
        case .null:
            writer.write(ValueTag.null)
        case .integer(let integer):
            writer.write(ValueTag.integer)
            writer.writeVarint(zigzagEncode(integer))
        case .real(let real):
            writer.write(ValueTag.real)
            writer.writeLittleEndian(real.bitPattern)
        case .text(let text):
            if let uuid = CanonicalUUID.parse(text) {
                writer.write(ValueTag.uuidText)
                writer.writeBigEndian(uuid.high)
                writer.writeBigEndian(uuid.low)
                return
            }
            let length = text.utf8.count
            guard fitsLimit(UInt64(length), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description, "a text value is \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            writer.write(ValueTag.text)
            writer.writeVarint(length)
            writer.write(contentsOf: text.utf8)
        case .blob(let bytes):
            guard fitsLimit(UInt64(bytes.count), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "a blob value is \(bytes.count) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            writer.write(ValueTag.blob)
            writer.writeVarint(bytes.count)
            writer.write(contentsOf: bytes)
        case .nonUTF8Text(let bytes):
            guard fitsLimit(UInt64(bytes.count), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "a text value is \(bytes.count) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            recordNeedsFormat2 = true
            writer.write(ValueTag.nonUTF8Text)
            writer.writeVarint(bytes.count)
            writer.write(contentsOf: bytes)
        }
    }
}

// MARK: - Decoding

/// The uncompressed body, inflated on demand in bounded chunks from the segment's compressed bytes.
struct BodySource {
    static let chunkSize = 64 * 1024

    private let segment: [UInt8]
    private var inputOffset: Int
    private let inputEnd: Int
    private let inflater: Inflater
    /// The trailer's uncompressed length: zlib is never asked for more than this (plus one byte, to notice
    /// a body that is longer).
    let expectedLength: Int

    private var buffer: [UInt8] = []
    private var position = 0
    /// The body offset of `buffer[0]`.
    private var bufferStart = 0
    private var inflatedCount = 0
    private var streamEnded = false

    init(segment: [UInt8], compressedRange: Range<Int>, expectedLength: Int) throws(SegmentError) {
        self.segment = segment
        self.inputOffset = compressedRange.lowerBound
        self.inputEnd = compressedRange.upperBound
        self.expectedLength = expectedLength
        self.inflater = try Inflater()
    }

    /// The body offset of the next byte to read.
    var offset: Int { bufferStart + position }

    /// Inflated bytes held in memory: what bounded decoding keeps bounded.
    var bufferedByteCount: Int { buffer.capacity }

    @inline(__always)
    mutating func readByte() throws(SegmentError) -> UInt8 {
        if position == buffer.count { try refill(atLeast: 1) }
        let byte = buffer[position]
        position += 1
        return byte
    }

    /// An unsigned LEB128 varint, which must be in its shortest form and fit 64 bits.
    @inline(__always)
    mutating func readVarint() throws(SegmentError) -> UInt64 {
        // Most varints are one byte.
        if position < buffer.count, buffer[position] < 0x80 {
            defer { position += 1 }
            return UInt64(buffer[position])
        }
        return try readLongVarint()
    }

    private mutating func readLongVarint() throws(SegmentError) -> UInt64 {
        let start = offset
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try readByte()
            if shift == 63 && byte > 1 {
                throw SegmentError(.malformed, at: "body byte \(start)", "varint does not fit 64 bits")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    throw SegmentError(.malformed, at: "body byte \(start)", "varint is not in its shortest form")
                }
                return result
            }
            shift += 7
        }
    }

    /// Hands the next `count` bytes to `body`, then moves past them.
    mutating func withBytes<R>(_ count: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) throws(SegmentError) -> R {
        if buffer.count - position < count { try refill(atLeast: count) }
        let start = position
        position += count
        return buffer.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[start..<start + count])) }
    }

    /// Checks that the body ends exactly here: nothing more inflates, the compressed stream ends where the
    /// trailer begins, and the length is the trailer's.
    mutating func finish() throws(SegmentError) {
        guard position == buffer.count else {
            throw SegmentError(.malformed, at: "body byte \(offset)", "\(buffer.count - position) bytes follow the last transaction")
        }
        while !streamEnded {
            try inflateMore(minimum: 1)
            guard position == buffer.count else {
                throw SegmentError(.malformed, at: "body byte \(offset)", "bytes follow the last transaction")
            }
        }
        guard inflatedCount == expectedLength else {
            throw SegmentError(
                .malformed, at: "body byte \(offset)",
                "the body is \(inflatedCount) bytes but the trailer says \(expectedLength)")
        }
        guard inputOffset == inputEnd else {
            throw SegmentError(
                .malformed, at: "byte \(inputOffset)", "\(inputEnd - inputOffset) bytes follow the end of the compressed body")
        }
    }

    private mutating func refill(atLeast needed: Int) throws(SegmentError) {
        if position > 0 {
            buffer.removeSubrange(0..<position)
            bufferStart += position
            position = 0
        }
        while buffer.count < needed {
            guard !streamEnded else {
                throw SegmentError(
                    .malformed, at: "body byte \(bufferStart + buffer.count)",
                    "the body ends inside a record (\(needed - buffer.count) more bytes needed)")
            }
            try inflateMore(minimum: needed - buffer.count)
        }
    }

    private mutating func inflateMore(minimum: Int) throws(SegmentError) {
        let room = min(max(Self.chunkSize, minimum), expectedLength - inflatedCount + 1)
        let oldCount = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: room))
        let (inputOffset, inputEnd, inflater) = (self.inputOffset, self.inputEnd, self.inflater)
        let result = segment.withUnsafeBytes { input in
            buffer.withUnsafeMutableBytes { output in
                inflater.inflate(
                    from: UnsafeRawBufferPointer(rebasing: input[inputOffset..<inputEnd]),
                    into: UnsafeMutableRawBufferPointer(rebasing: output[oldCount...]))
            }
        }
        buffer.removeLast(room - result.produced)
        self.inputOffset += result.consumed
        inflatedCount += result.produced
        guard inflatedCount <= expectedLength else {
            throw SegmentError(
                .malformed, at: "body byte \(expectedLength)", "the body inflates to more than the \(expectedLength) bytes the trailer says")
        }
        switch result.status {
        case .progress:
            guard result.consumed > 0 || result.produced > 0 else {
                throw SegmentError(.compression, at: "byte \(self.inputOffset)", "zlib made no progress inflating the body")
            }
        case .streamEnd:
            streamEnded = true
        case .needsInput:
            throw SegmentError(.truncated, at: "byte \(inputEnd)", "the compressed body ends before its end marker")
        case .corrupt(let message):
            throw SegmentError(.compression, at: "byte \(self.inputOffset)", "the compressed body is corrupt: \(message)")
        }
    }
}

/// Decodes body records one transaction at a time, checking each against the header and the limits.
struct BodyDecoder {
    let header: SegmentHeader
    let limits: SegmentLimits
    private var source: BodySource
    private var names: [String] = []
    private var knownNames: Set<String> = []
    private var decodedCount = 0
    private var previousTimestamp: UInt64 = 0
    private var minTimestamp = UInt64.max
    private var maxTimestamp = UInt64.min
    private var currentChange: Int?
    private var failure: SegmentError?
    private var finished = false

    init(header: SegmentHeader, limits: SegmentLimits, source: BodySource) {
        self.header = header
        self.limits = limits
        self.source = source
    }

    var bufferedByteCount: Int { source.bufferedByteCount }

    mutating func next() throws(SegmentError) -> LogTransaction? {
        if let failure { throw failure }
        do {
            return try decodeNext()
        } catch {
            var error = error
            if decodedCount < header.transactionCount {
                error.location += " (transaction \(decodedCount + 1) of \(header.transactionCount)"
                    + ", sequence \(header.firstSequence &+ UInt64(decodedCount))"
                    + (currentChange.map { ", change \($0)" } ?? "") + ")"
            }
            failure = error
            throw error
        }
    }

    private mutating func decodeNext() throws(SegmentError) -> LogTransaction? {
        if finished { return nil }
        guard decodedCount < header.transactionCount else {
            try source.finish()
            guard minTimestamp == header.minTimestamp.rawValue, maxTimestamp == header.maxTimestamp.rawValue else {
                throw SegmentError(
                    .malformed, at: "header",
                    "the header says timestamps \(header.minTimestamp)...\(header.maxTimestamp); the transactions span "
                        + "\(HLCTimestamp(rawValue: minTimestamp))...\(HLCTimestamp(rawValue: maxTimestamp))")
            }
            finished = true
            return nil
        }
        currentChange = nil
        let offset = source.offset
        let sequenceDelta = try source.readVarint()
        let expectedDelta: UInt64 = decodedCount == 0 ? 0 : 1
        guard sequenceDelta == expectedDelta else {
            throw SegmentError(
                .sequenceGap, at: "body byte \(offset)",
                "sequence delta \(sequenceDelta) where \(expectedDelta) is required: sequences must run consecutively from the header's first sequence")
        }
        // Cannot overflow: the header checked lastSequence − firstSequence == transactionCount − 1.
        let sequence = header.firstSequence + UInt64(decodedCount)
        let timestamp = previousTimestamp &+ UInt64(bitPattern: zigzagDecode(try source.readVarint()))
        let flagsOffset = source.offset
        let flags = try source.readByte()
        guard flags & ~TransactionFlags.all == 0 else {
            throw SegmentError(.malformed, at: "body byte \(flagsOffset)", "unknown transaction flags 0x\(String(flags, radix: 16))")
        }
        let author = flags & TransactionFlags.hasAuthor != 0 ? try readName("author") : nil
        let contextName = flags & TransactionFlags.hasContextName != 0 ? try readName("context name") : nil
        let countOffset = source.offset
        let changeCount = try source.readVarint()
        guard fitsLimit(changeCount, limits.maxChangesPerTransaction) else {
            throw SegmentError(
                .limitExceeded, at: "body byte \(countOffset)",
                "\(changeCount) changes; maxChangesPerTransaction is \(limits.maxChangesPerTransaction)")
        }
        var changes: [LogChange] = []
        // Reserve by what is plausible, never by what an unchecked count claims.
        changes.reserveCapacity(min(Int(changeCount), 1024))
        for index in 0..<Int(changeCount) {
            currentChange = index
            changes.append(try readChange())
        }
        currentChange = nil

        decodedCount += 1
        previousTimestamp = timestamp
        minTimestamp = min(minTimestamp, timestamp)
        maxTimestamp = max(maxTimestamp, timestamp)
        return LogTransaction(
            sequence: sequence, timestamp: HLCTimestamp(rawValue: timestamp), author: author, contextName: contextName,
            changes: changes)
    }

    private mutating func readChange() throws(SegmentError) -> LogChange {
        let entity = try readName("entity name")
        let kindOffset = source.offset
        let kindByte = try source.readByte()
        guard let kind = ChangeKind(rawValue: Int(kindByte)) else {
            throw SegmentError(
                .malformed, at: "body byte \(kindOffset)", "change kind \(kindByte) is not 1 (insert), 2 (update) or 3 (delete)")
        }
        let causalLength = try source.readVarint()
        let primaryKey = try readValue()
        let countOffset = source.offset
        let valueCount = try source.readVarint()
        guard fitsLimit(valueCount, limits.maxValuesPerChange) else {
            throw SegmentError(
                .limitExceeded, at: "body byte \(countOffset)",
                "\(valueCount) values; maxValuesPerChange is \(limits.maxValuesPerChange)")
        }
        var values: [String: DatabaseValue] = Dictionary(minimumCapacity: Int(valueCount))
        for _ in 0..<Int(valueCount) {
            let columnOffset = source.offset
            let column = try readName("column name")
            let value = try readValue()
            guard values.updateValue(value, forKey: column) == nil else {
                throw SegmentError(.malformed, at: "body byte \(columnOffset)", "column '\(column)' appears twice in one change")
            }
        }
        return LogChange(entity: entity, primaryKey: primaryKey, kind: kind, causalLength: causalLength, values: values)
    }

    private mutating func readName(_ what: String) throws(SegmentError) -> String {
        let offset = source.offset
        let reference = try source.readVarint()
        guard reference == 0 else {
            guard reference <= UInt64(names.count) else {
                throw SegmentError(
                    .malformed, at: "body byte \(offset)",
                    "the \(what) refers to name \(reference), but the name table holds \(names.count)")
            }
            return names[Int(reference - 1)]
        }
        guard fitsLimit(UInt64(names.count + 1), limits.maxNames) else {
            throw SegmentError(.limitExceeded, at: "body byte \(offset)", "more than maxNames (\(limits.maxNames)) names")
        }
        let name = try readText(what)
        guard knownNames.insert(name).inserted else {
            throw SegmentError(.malformed, at: "body byte \(offset)", "the \(what) '\(name)' is defined twice in the name table")
        }
        names.append(name)
        return name
    }

    private mutating func readLength(_ what: String) throws(SegmentError) -> Int {
        let offset = source.offset
        let length = try source.readVarint()
        guard fitsLimit(length, limits.maxStringBytes) else {
            throw SegmentError(
                .limitExceeded, at: "body byte \(offset)", "the \(what) is \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
        }
        return Int(length)
    }

    private mutating func readText(_ what: String) throws(SegmentError) -> String {
        let length = try readLength(what)
        let offset = source.offset
        guard let text = try source.withBytes(length, validUTF8String) else {
            throw SegmentError(.malformed, at: "body byte \(offset)", "the \(what) is not valid UTF-8")
        }
        return text
    }

    private mutating func readValue() throws(SegmentError) -> DatabaseValue {
        let offset = source.offset
        let tag = try source.readByte()
        switch tag {
        case ValueTag.null:
            return .null
        case ValueTag.integer:
            return .integer(zigzagDecode(try source.readVarint()))
        case ValueTag.real:
            let bits = try source.withBytes(8) { bytes in
                var bits: UInt64 = 0
                for index in 0..<8 { bits |= UInt64(bytes[index]) << (8 * index) }
                return bits
            }
            return .real(Double(bitPattern: bits))
        case ValueTag.text:
            return .text(try readText("text value"))
        case ValueTag.blob:
            let length = try readLength("blob value")
            return .blob(try source.withBytes(length) { Array($0) })
        case ValueTag.uuidText:
            return .text(try source.withBytes(16) { CanonicalUUID.format($0) })
        case ValueTag.nonUTF8Text where header.formatVersion >= 2:
            let length = try readLength("text value")
            let value = try source.withBytes(length) { DatabaseValue(textBytes: $0) }
            guard case .nonUTF8Text = value else {
                // One spelling per value: valid UTF-8 is tag 3 (or 5), so that encoding stays deterministic.
                throw SegmentError(.malformed, at: "body byte \(offset)", "a non-UTF-8 text value (tag 6) holds valid UTF-8")
            }
            return value
        default:
            throw SegmentError(.malformed, at: "body byte \(offset)", "unknown value tag \(tag)")
        }
    }
}
