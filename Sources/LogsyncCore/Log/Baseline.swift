/// A baseline: the merged state of every synced row at a ``Frontier`` — each row's causal length,
/// latest delete and column registers (value and clock), deleted rows included — as a self-checking byte
/// stream (`docs/log-format.md`, "Baselines"). The merged state depends only on the transactions applied,
/// and the encoding only on the state (rows in key order, registers in column order, no writer, no
/// time), so two nodes at the same frontier write the same bytes.
///
/// ```
/// magic(8) version(2) headerLength(4) | schemaVersion account frontier headerCRC(4) | zlib body | rows(8) bodyLength(8) CRC(4)
/// ```
package struct BaselineHeader: Sendable, Hashable {
    package var formatVersion: UInt16
    package var schemaVersion: Int
    package var account: String
    package var frontier: Frontier

    package init(formatVersion: UInt16 = BaselineHeader.currentFormatVersion, schemaVersion: Int, account: String, frontier: Frontier) {
        self.formatVersion = formatVersion
        self.schemaVersion = schemaVersion
        self.account = account
        self.frontier = frontier
    }

    package static let currentFormatVersion: UInt16 = 1
    /// `LSBAS`, CR, LF, SUB, as segments' magic.
    static let magic: [UInt8] = [0x4C, 0x53, 0x42, 0x41, 0x53, 0x0D, 0x0A, 0x1A]
    /// Row count (u64), uncompressed body length (u64), CRC-32 (u32).
    static let trailerByteCount = 20
    /// A header names each node of the frontier once.
    static let maximumHeaderByteCount = 4 << 20

    func encoded() -> [UInt8] {
        var fields = ByteWriter()
        fields.writeLittleEndian(Int64(schemaVersion))
        fields.writeString(account)
        let entries = frontier.sorted
        fields.writeLittleEndian(UInt32(entries.count))
        for (node, sequence) in entries {
            fields.writeString(node.rawValue)
            fields.writeLittleEndian(sequence)
        }
        var writer = ByteWriter()
        writer.write(contentsOf: Self.magic)
        writer.writeLittleEndian(formatVersion)
        writer.writeLittleEndian(UInt32(fields.count + 4))
        writer.write(contentsOf: fields.bytes)
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }
}

/// One row of a baseline.
package struct BaselineRow: Sendable, Hashable {
    package var key: RowKey
    package var state: RowState

    package init(key: RowKey, state: RowState) {
        self.key = key
        self.state = state
    }
}

/// Writes a baseline as its rows come, in ``RowKey`` order: memory holds one row and zlib's window, and
/// the caller takes the bytes out (``takeOutput()``) as often as it likes.
package final class BaselineEncoder {
    private let deflater: Deflater
    private var pending: [UInt8]
    private var crc: UInt32 = 0
    private var names: [String: UInt64] = [:]
    private var record = ByteWriter()
    private var previous: RowKey?
    private var bodyLength: UInt64 = 0
    private var finished = false
    package private(set) var rowCount: UInt64 = 0
    /// Bytes handed out so far.
    package private(set) var byteCount: UInt64 = 0

    package init(header: BaselineHeader) throws(SegmentError) {
        deflater = try Deflater()
        pending = header.encoded()
    }

    /// Appends one row; rows must come in strictly increasing key order (entity, then the key in SQLite's
    /// order), which makes the bytes canonical.
    package func append(_ row: BaselineRow) throws(SegmentError) {
        precondition(!finished, "baseline encoder used after finish")
        if let previous, !(previous < row.key) {
            throw SegmentError(.invalidArgument, at: "baseline row \(rowCount + 1)", "rows out of order: \(row.key) after \(previous)")
        }
        previous = row.key
        record.removeAll()
        writeName(row.key.entity)
        writeValue(row.key.primaryKey)
        record.writeVarint(row.state.causalLength)
        if let deleted = row.state.deletedAt {
            record.write(1)
            record.writeLittleEndian(deleted.timestamp.rawValue)
            writeName(deleted.node.rawValue)
        } else {
            record.write(0)
        }
        let registers = row.state.columns.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        record.writeVarint(UInt64(registers.count))
        for (column, register) in registers {
            writeName(column)
            record.writeLittleEndian(register.clock.timestamp.rawValue)
            writeName(register.clock.node.rawValue)
            writeValue(register.value)
        }
        try deflater.write(record.bytes)
        bodyLength += UInt64(record.count)
        rowCount += 1
        pending.append(contentsOf: deflater.takeOutput())
    }

    /// The bytes written since the last call.
    package func takeOutput() -> [UInt8] {
        let out = pending
        pending.removeAll(keepingCapacity: true)
        out.withUnsafeBytes { crc = CRC32.update(crc, $0) }
        byteCount += UInt64(out.count)
        return out
    }

    /// Ends the baseline: returns the last bytes (the end of the body and the trailer).
    package func finish() throws(SegmentError) -> [UInt8] {
        precondition(!finished, "baseline encoder finished twice")
        finished = true
        pending.append(contentsOf: try deflater.finish())
        var trailer = ByteWriter()
        trailer.writeLittleEndian(rowCount)
        trailer.writeLittleEndian(bodyLength)
        pending.append(contentsOf: trailer.bytes)
        var out = takeOutput()
        var crcBytes = ByteWriter()
        crcBytes.writeLittleEndian(crc)
        out.append(contentsOf: crcBytes.bytes)
        byteCount += 4
        return out
    }

    private func writeName(_ name: String) {
        if let index = names[name] {
            record.writeVarint(index + 1)
            return
        }
        names[name] = UInt64(names.count)
        record.writeVarint(0 as UInt64)
        record.writeVarint(name.utf8.count)
        record.write(contentsOf: name.utf8)
    }

    private func writeValue(_ value: DatabaseValue) {
        switch value {
        case .null: record.write(0)
        case .integer(let v):
            record.write(1)
            record.writeVarint(zigzagEncode(v))
        case .real(let v):
            record.write(2)
            record.writeLittleEndian(v.bitPattern)
        case .text(let v):
            record.write(3)
            record.writeVarint(v.utf8.count)
            record.write(contentsOf: v.utf8)
        case .blob(let v):
            record.write(4)
            record.writeVarint(v.count)
            record.write(contentsOf: v)
        case .nonUTF8Text(let v):
            record.write(5)
            record.writeVarint(v.count)
            record.write(contentsOf: v)
        }
    }
}

/// Reads a baseline from a stream of chunks (`source` returns the next bytes, or nil at the end), one row
/// at a time, in bounded memory. The header is checked by its own CRC when the decoder is made; the
/// whole baseline (row count, body length, CRC-32 over everything) once the last row was read, when
/// ``next()`` returns nil. A caller that must not use a damaged baseline's rows checks it first with
/// ``verify(limits:source:)``.
package final class BaselineDecoder {
    package private(set) var header = BaselineHeader(schemaVersion: 0, account: "", frontier: Frontier())
    private var source: CheckedSource
    private let inflater: Inflater
    private let limits: SegmentLimits
    /// Compressed bytes read but not yet inflated.
    private var input: [UInt8] = []
    private var inputOffset = 0
    /// Inflated bytes not yet parsed.
    private var body: [UInt8] = []
    private var bodyOffset = 0
    private var bodyLength: UInt64 = 0
    private var streamEnded = false
    private var names: [String] = []
    private var done = false
    private var previous: RowKey?
    package private(set) var rowCount: UInt64 = 0
    /// The inflated bytes of the rows returned so far: what a reader holding decoded rows bounds itself by.
    package private(set) var rowBytes: UInt64 = 0

    package init(limits: SegmentLimits = .default, source: @escaping () throws -> [UInt8]?) throws {
        self.source = CheckedSource(read: source)
        self.limits = limits
        inflater = try Inflater()
        // The prefix, then the header it announces.
        try fill(to: 14)
        guard input.count >= 14 else { throw Self.error(.truncated, "header", "\(input.count) bytes is too short for a baseline") }
        guard input[0..<8].elementsEqual(BaselineHeader.magic) else {
            throw Self.error(.badMagic, "byte 0", "not a logsync baseline: it does not start with \"LSBAS\"")
        }
        var prefix = ByteReader(input, from: 8, to: 14)
        let version = try prefix.readLittleEndian(UInt16.self, "format version")
        guard version == BaselineHeader.currentFormatVersion else {
            throw Self.error(.unsupportedFormat, "byte 8", "format version \(version); this build reads \(BaselineHeader.currentFormatVersion)")
        }
        let length = Int(try prefix.readLittleEndian(UInt32.self, "header length"))
        guard length >= 18, length <= BaselineHeader.maximumHeaderByteCount else {
            throw Self.error(.malformed, "byte 10", "header length \(length) is out of range")
        }
        let end = 14 + length
        try fill(to: end)
        guard input.count >= end else { throw Self.error(.truncated, "header", "the header is \(end) bytes; the baseline ends before") }
        var crcReader = ByteReader(input, from: end - 4, to: end)
        guard try crcReader.readLittleEndian(UInt32.self, "header CRC") == CRC32.checksum(input, 0..<end - 4) else {
            throw Self.error(.checksumMismatch, "header", "the header's CRC-32 does not match: the baseline is damaged")
        }
        var reader = ByteReader(input, from: 14, to: end - 4)
        let schemaVersion = try reader.readLittleEndian(Int64.self, "schema version")
        let account = try reader.readString("account")
        let count = Int(try reader.readLittleEndian(UInt32.self, "frontier size"))
        var sequences: [NodeID: UInt64] = [:]
        for _ in 0..<min(count, length / 11) {
            let node = NodeID(try reader.readString("node id"))
            let sequence = try reader.readLittleEndian(UInt64.self, "sequence")
            guard sequence <= LogTransaction.maximumSequence else {
                throw Self.error(.limitExceeded, "header", "node \(node)'s sequence \(sequence) is above \(LogTransaction.maximumSequence), the largest a store records")
            }
            sequences[node] = sequence
        }
        guard reader.remaining == 0, sequences.count == count, let schema = Int(exactly: schemaVersion), schema >= 0 else {
            throw Self.error(.malformed, "header", "the header's fields do not add up")
        }
        header = BaselineHeader(formatVersion: version, schemaVersion: schema, account: account, frontier: Frontier(sequences))
        inputOffset = end
    }

    /// The next row, or nil after the last one, once the trailer and the checksum were checked.
    package func next() throws -> BaselineRow? {
        guard !done else { return nil }
        while true {
            if bodyOffset == body.count, streamEnded {
                try finishStream()
                return nil
            }
            var reader = BaselineBodyReader(body, from: bodyOffset, names: names, limits: limits)
            if let row = try reader.row() {
                rowBytes += UInt64(reader.offset - bodyOffset)
                bodyOffset = reader.offset
                names = reader.names
                if let previous, !(previous < row.key) {
                    throw Self.error(.malformed, "row \(rowCount + 1)", "rows out of order: \(row.key) after \(previous)")
                }
                previous = row.key
                rowCount += 1
                return row
            }
            guard !streamEnded else { throw Self.error(.truncated, "row \(rowCount + 1)", "the body ends inside a row") }
            try inflateMore()
        }
    }

    /// Reads a whole baseline and checks it: its header, every row, the trailer and the CRC-32. Returns the
    /// header and the row count.
    package static func verify(limits: SegmentLimits = .default, source: @escaping () throws -> [UInt8]?) throws -> (header: BaselineHeader, rows: UInt64) {
        let decoder = try BaselineDecoder(limits: limits, source: source)
        while try decoder.next() != nil {}
        return (decoder.header, decoder.rowCount)
    }

    /// Checks a whole baseline's bytes without decoding its rows: the header (magic, format version, its
    /// own CRC-32), then the CRC-32 of every byte before the last four, which must equal them. Returns the
    /// header and the number of bytes.
    ///
    /// This catches any damage to the bytes (a flipped bit, a cut or torn copy) in a fraction of a full
    /// decode's time (32 ms for the 50.6 MiB of 1M rows against 1.8-5.3 s for ``verify(limits:source:)``), so a
    /// loader decodes the rows once, as it merges them. What only decoding finds, a row its writer got
    /// wrong under an intact checksum, stops the load when that row is reached; the trailer (row count,
    /// body length) is checked before the load ends (``next()``).
    package static func checkBytes(limits: SegmentLimits = .default, source: @escaping () throws -> [UInt8]?) throws -> (header: BaselineHeader, bytes: UInt64) {
        let decoder = try BaselineDecoder(limits: limits, source: source)
        while try decoder.source.next() != nil {}
        guard decoder.source.byteCount >= UInt64(decoder.inputOffset + BaselineHeader.trailerByteCount) else {
            throw error(.truncated, "trailer", "the baseline ends \(decoder.source.byteCount) bytes in, before its trailer")
        }
        guard decoder.source.storedChecksum == decoder.source.crcBeforeLastFourBytes else {
            throw error(.checksumMismatch, "trailer", "the CRC-32 does not match: the baseline is damaged")
        }
        return (decoder.header, decoder.source.byteCount)
    }

    private func fill(to count: Int) throws {
        while input.count < count, let chunk = try source.next() { input.append(contentsOf: chunk) }
    }

    private func inflateMore() throws {
        // Drop what was parsed; keep a partial row.
        if bodyOffset > 0 {
            body.removeFirst(bodyOffset)
            bodyOffset = 0
        }
        if inputOffset >= input.count {
            guard let chunk = try source.next() else {
                throw Self.error(.truncated, "body", "the baseline ends before its body does")
            }
            input = chunk
            inputOffset = 0
        }
        let start = body.count
        let room = 256 * 1024
        body.append(contentsOf: repeatElement(0, count: room))
        let (consumed, produced, status) = input.withUnsafeBytes { inputBytes in
            body.withUnsafeMutableBytes { out in
                inflater.inflate(
                    from: UnsafeRawBufferPointer(rebasing: inputBytes[inputOffset...]),
                    into: UnsafeMutableRawBufferPointer(rebasing: out[start...]))
            }
        }
        body.removeLast(room - produced)
        inputOffset += consumed
        bodyLength += UInt64(produced)
        switch status {
        case .corrupt(let message): throw Self.error(.compression, "body", "the compressed body is damaged: \(message)")
        case .streamEnd: streamEnded = true
        case .progress, .needsInput: break
        }
    }

    /// After the last row: the trailer must follow the body exactly, and the checksum must match.
    private func finishStream() throws {
        var rest = Array(input[inputOffset...])
        while rest.count <= BaselineHeader.trailerByteCount, let chunk = try source.next() { rest.append(contentsOf: chunk) }
        guard rest.count == BaselineHeader.trailerByteCount else {
            throw Self.error(.malformed, "trailer", "\(rest.count) bytes follow the body; the trailer is \(BaselineHeader.trailerByteCount)")
        }
        var reader = ByteReader(rest)
        let rows = try reader.readLittleEndian(UInt64.self, "row count")
        let length = try reader.readLittleEndian(UInt64.self, "body length")
        let stored = try reader.readLittleEndian(UInt32.self, "CRC")
        guard rows == rowCount, length == bodyLength else {
            throw Self.error(.malformed, "trailer", "the trailer says \(rows) rows and \(length) body bytes; the body holds \(rowCount) and \(bodyLength)")
        }
        guard stored == source.crcBeforeLastFourBytes else {
            throw Self.error(.checksumMismatch, "trailer", "the CRC-32 does not match: the baseline is damaged")
        }
        done = true
    }

    static func error(_ code: SegmentError.Code, _ location: String, _ message: String) -> SegmentError {
        SegmentError(code, at: "baseline \(location)", message)
    }
}

/// A byte source that keeps the CRC-32 of everything it passed on but the last four bytes: at the end,
/// those are the stored checksum.
private struct CheckedSource {
    let read: () throws -> [UInt8]?
    private(set) var crcBeforeLastFourBytes: UInt32 = 0
    /// Bytes passed on so far.
    private(set) var byteCount: UInt64 = 0
    private var held: [UInt8] = []
    private var ended = false

    /// The last four bytes passed on, little-endian: the stored checksum once the source has ended.
    var storedChecksum: UInt32? {
        guard held.count == 4 else { return nil }
        return held.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    init(read: @escaping () throws -> [UInt8]?) { self.read = read }

    mutating func next() throws -> [UInt8]? {
        guard !ended else { return nil }
        guard let chunk = try read() else {
            ended = true
            return nil
        }
        byteCount += UInt64(chunk.count)
        let combined = held + chunk
        let cut = max(0, combined.count - 4)
        combined.withUnsafeBytes { crcBeforeLastFourBytes = CRC32.update(crcBeforeLastFourBytes, UnsafeRawBufferPointer(rebasing: $0[0..<cut])) }
        held = Array(combined[cut...])
        return chunk
    }
}

/// Parses rows from inflated body bytes; nil when the bytes end inside a row (more must be inflated).
private struct BaselineBodyReader {
    let bytes: [UInt8]
    var offset: Int
    var names: [String]
    let limits: SegmentLimits

    init(_ bytes: [UInt8], from offset: Int, names: [String], limits: SegmentLimits) {
        self.bytes = bytes
        self.offset = offset
        self.names = names
        self.limits = limits
    }

    private struct NeedMore: Error {}

    mutating func row() throws -> BaselineRow? {
        let start = offset
        let startNames = names.count
        do {
            let entity = try name()
            let key = try value()
            let causalLength = try varint()
            guard causalLength <= LogChange.maximumCausalLength else {
                throw BaselineDecoder.error(
                    .limitExceeded, "body byte \(start)", "causal length \(causalLength) is above \(LogChange.maximumCausalLength), the largest a store records")
            }
            var deletedAt: Clock?
            switch try byte() {
            case 0: break
            case 1: deletedAt = Clock(HLCTimestamp(rawValue: try fixed()), NodeID(try name()))
            case let flag: throw BaselineDecoder.error(.malformed, "body byte \(offset - 1)", "unknown delete flag \(flag)")
            }
            let count = try varint()
            guard count <= UInt64(limits.maxValuesPerChange) else {
                throw BaselineDecoder.error(.limitExceeded, "body byte \(start)", "\(count) registers in a row; at most \(limits.maxValuesPerChange)")
            }
            var columns: [String: Register] = Dictionary(minimumCapacity: Int(count))
            for _ in 0..<count {
                let column = try name()
                let timestamp = HLCTimestamp(rawValue: try fixed())
                let node = NodeID(try name())
                columns[column] = Register(try value(), Clock(timestamp, node))
            }
            return BaselineRow(key: RowKey(entity, key), state: RowState(causalLength: causalLength, columns: columns, deletedAt: deletedAt))
        } catch is NeedMore {
            offset = start
            names.removeLast(names.count - startNames)
            return nil
        }
    }

    private mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw NeedMore() }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func fixed() throws -> UInt64 {
        guard bytes.count - offset >= 8 else { throw NeedMore() }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
        offset += 8
        return value
    }

    private mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64 else { throw BaselineDecoder.error(.malformed, "body byte \(offset)", "varint too long") }
            result |= UInt64(b & 0x7f) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
    }

    private mutating func raw() throws -> ArraySlice<UInt8> {
        let length = try varint()
        guard length <= UInt64(limits.maxStringBytes) else {
            throw BaselineDecoder.error(.limitExceeded, "body byte \(offset)", "a value of \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
        }
        guard UInt64(bytes.count - offset) >= length else { throw NeedMore() }
        defer { offset += Int(length) }
        return bytes[offset..<offset + Int(length)]
    }

    private mutating func name() throws -> String {
        let reference = try varint()
        if reference > 0 {
            guard reference <= UInt64(names.count) else {
                throw BaselineDecoder.error(.malformed, "body byte \(offset)", "name reference \(reference) with \(names.count) names defined")
            }
            return names[Int(reference - 1)]
        }
        guard names.count < limits.maxNames * 16 else {
            throw BaselineDecoder.error(.limitExceeded, "body byte \(offset)", "more than \(limits.maxNames * 16) names")
        }
        guard let name = try raw().withUnsafeBufferPointer(validUTF8String), !name.isEmpty else {
            throw BaselineDecoder.error(.malformed, "body byte \(offset)", "a name that is empty or not UTF-8")
        }
        names.append(name)
        return name
    }

    private mutating func value() throws -> DatabaseValue {
        switch try byte() {
        case 0: return .null
        case 1: return .integer(zigzagDecode(try varint()))
        case 2: return .real(Double(bitPattern: try fixed()))
        case 3:
            let bytes = try raw()
            guard let text = bytes.withUnsafeBufferPointer(validUTF8String) else {
                throw BaselineDecoder.error(.malformed, "body byte \(offset)", "text tagged UTF-8 is not")
            }
            return .text(text)
        case 4: return .blob(Array(try raw()))
        case 5:
            let bytes = Array(try raw())
            let value = DatabaseValue(textBytes: bytes)
            guard case .nonUTF8Text = value else {
                throw BaselineDecoder.error(.malformed, "body byte \(offset)", "text tagged not UTF-8 is")
            }
            return value
        case let tag: throw BaselineDecoder.error(.malformed, "body byte \(offset - 1)", "unknown value tag \(tag)")
        }
    }
}
