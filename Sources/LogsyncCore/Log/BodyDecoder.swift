/// The uncompressed body, inflated on demand in bounded chunks from the segment's compressed bytes.
struct BodySource {
    static let chunkSize = 64 * 1024

    let segment: [UInt8]
    var inputOffset: Int
    let inputEnd: Int
    let inflater: Inflater
    /// The trailer's uncompressed length: zlib is never asked for more than this (plus one byte, to notice
    /// a body that is longer).
    let expectedLength: Int

    var buffer: [UInt8] = []
    var position = 0
    /// The body offset of `buffer[0]`.
    var bufferStart = 0
    var inflatedCount = 0
    var streamEnded = false

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
    var source: BodySource
    var names: [String] = []
    var knownNames: Set<String> = []
    var decodedCount = 0
    var previousTimestamp: UInt64 = 0
    var minTimestamp = UInt64.max
    var maxTimestamp = UInt64.min
    var currentChange: Int?
    var failure: SegmentError?
    var finished = false

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
        let causalOffset = source.offset
        let causalLength = try source.readVarint()
        guard causalLength <= LogChange.maximumCausalLength else {
            throw SegmentError(
                .limitExceeded, at: "body byte \(causalOffset)",
                "causal length \(causalLength) is above \(LogChange.maximumCausalLength), the largest a store records")
        }
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
