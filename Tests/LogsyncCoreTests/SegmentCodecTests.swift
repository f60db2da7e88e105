@testable import LogsyncCore
import LogsyncTestKit
import Testing

// MARK: - Fixtures

/// The shared seeded generator, with the two draws these tests use most.
private typealias SegmentTestRandom = SeededRandom

extension SeededRandom {
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

/// CRC-32 written out bit by bit, independent of the codec's (zlib's) implementation.
private func referenceCRC32(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
    }
    return ~crc
}

private func uuidText(_ rng: inout SegmentTestRandom) -> String {
    let digits = Array("0123456789abcdef")
    var text = ""
    for index in 0..<32 {
        if index == 8 || index == 12 || index == 16 || index == 20 { text.append("-") }
        text.append(digits[rng.below(16)])
    }
    return text
}

private let edgeTexts: [String] = [
    "", "a", "héllo wörld", "你好，世界", "🚀👩‍👩‍👧‍👦🏳️‍🌈", "e\u{301}", "nul\u{0}inside", "tab\tnew\nline", String(repeating: "x", count: 300),
    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6", "f81d4fae-7dec-11d0-a765-00A0C91E6BF6",  // upper and mixed case
    "f81d4fae-7dec-11d0-a765-00a0c91e6bf", "f81d4fae-7dec-11d0-a765-00a0c91e6bf6a",  // 35 and 37 characters
    "f81d4fae7dec-11d0-a765-00a0c91e6bf6-", "g81d4fae-7dec-11d0-a765-00a0c91e6bf6",  // dashes misplaced, non-hex
    "{f81d4fae-7dec-11d0-a765-00a0c91e6bf}", "f81d4fae-7dec-11d0-a765-00a0c91e6bé",  // braces; 36 bytes, not 36 ASCII
]

private let edgeReals: [Double] = [
    0.0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
    .leastNormalMagnitude, 1.0, -1.5, .pi,
]

private func randomText(_ rng: inout SegmentTestRandom) -> String {
    let ranges: [ClosedRange<UInt32>] = [0x20...0x7E, 0xA0...0xFF, 0x391...0x3C9, 0x4E00...0x4FFF, 0x1F600...0x1F64F, 0x300...0x36F]
    var text = ""
    for _ in 0..<rng.below(24) {
        let range = ranges[rng.below(ranges.count)]
        let scalar = range.lowerBound + UInt32(rng.below(Int(range.upperBound - range.lowerBound) + 1))
        text.unicodeScalars.append(Unicode.Scalar(scalar)!)
    }
    return text
}

private func randomValue(_ rng: inout SegmentTestRandom) -> DatabaseValue {
    switch rng.below(11) {
    case 0: return .null
    case 1: return .integer(Int64(bitPattern: rng.next()))
    case 2: return .integer(Int64(rng.below(2001)) - 1000)
    case 3: return .integer([Int64.min, Int64.max, 0, -1, 1][rng.below(5)])
    case 4:
        let real = Double(bitPattern: rng.next())
        return .real(real.isNaN ? 0.5 : real)
    case 5: return .real(edgeReals[rng.below(edgeReals.count)])
    case 6: return .text(randomText(&rng))
    case 7: return .text(uuidText(&rng))
    case 8: return .text(rng.chance(50) ? uuidText(&rng).uppercased() : edgeTexts[rng.below(edgeTexts.count)])
    case 9: return .blob((0..<rng.below(40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
    default: return .blob([])
    }
}

private let entities = ["Note", "Folder", "Tag", "Attachment", "Ünïcode"]
private let columns = ["title", "body", "folder", "rank", "score", "created", "data", "flag", "ünï", ""]

private func randomTransactions(_ rng: inout SegmentTestRandom, count: Int, firstSequence: UInt64 = 1) -> [LogTransaction] {
    var timestamp = HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0).rawValue
    return (0..<count).map { index in
        switch rng.below(10) {
        case 0: timestamp &-= UInt64(rng.below(100_000))  // clocks may step back between transactions
        case 1: timestamp = rng.next()  // and the delta coding must survive any jump
        default: timestamp &+= UInt64(rng.below(5_000))
        }
        let changes = (0..<(rng.chance(10) ? 0 : rng.below(8) + 1)).map { _ in
            let kind = [ChangeKind.insert, .update, .delete][rng.below(3)]
            var values: [String: DatabaseValue] = [:]
            if kind != .delete {
                for _ in 0..<rng.below(6) { values[columns[rng.below(columns.count)]] = randomValue(&rng) }
            }
            let primaryKey: DatabaseValue = rng.chance(80) ? .text(uuidText(&rng)) : randomValue(&rng)
            return LogChange(
                entity: entities[rng.below(entities.count)], primaryKey: primaryKey, kind: kind,
                causalLength: rng.chance(90) ? UInt64(rng.below(5)) : rng.next() % (LogChange.maximumCausalLength + 1), values: values)
        }
        return LogTransaction(
            sequence: firstSequence &+ UInt64(index), timestamp: HLCTimestamp(rawValue: timestamp),
            author: rng.chance(50) ? nil : ["app", "syncd", "", "写作者"][rng.below(4)],
            contextName: rng.chance(50) ? nil : ["viewContext", "background \(rng.below(3))"][rng.below(2)],
            changes: changes)
    }
}

private let node = NodeID("3f2a9c1e-7b4d-4e8a-9f10-2c3d4e5f6a7b")

private func encode(_ transactions: [LogTransaction], limits: SegmentLimits = .default) throws -> [UInt8] {
    try SegmentEncoder.encode(schemaVersion: 7, account: "alice@example.com", node: node, transactions: transactions, limits: limits)
}

/// The error a full decode ends with, or nil when the segment decodes completely.
private func decodeError(_ bytes: [UInt8], limits: SegmentLimits = .default) -> SegmentError? {
    do {
        _ = try SegmentDecoder.decode(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}

/// Equal down to the bits: the sign of zero, the exact UTF-8 of text.
private func identical(_ a: DatabaseValue, _ b: DatabaseValue) -> Bool {
    switch (a, b) {
    case (.real(let x), .real(let y)): return x.bitPattern == y.bitPattern
    case (.text(let x), .text(let y)): return Array(x.utf8) == Array(y.utf8)
    default: return a == b
    }
}

private func identical(_ a: LogTransaction, _ b: LogTransaction) -> Bool {
    guard a == b, a.author.map({ Array($0.utf8) }) == b.author.map({ Array($0.utf8) }) else { return false }
    for (x, y) in zip(a.changes, b.changes) {
        guard identical(x.primaryKey, y.primaryKey), Array(x.entity.utf8) == Array(y.entity.utf8) else { return false }
        for (column, value) in x.values {
            guard let other = y.values[column], identical(value, other) else { return false }
        }
    }
    return true
}

/// A segment around a hand-made uncompressed body, with valid checksums: what a hostile writer can make.
private func craftedSegment(
    body: [UInt8], transactionCount: Int = 1, firstSequence: UInt64 = 1, minTimestamp: UInt64 = 0,
    maxTimestamp: UInt64 = 0, statedLength: Int? = nil, compressed: [UInt8]? = nil, formatVersion: UInt16 = 1
) throws -> [UInt8] {
    let deflater = try Deflater()
    try deflater.write(body)
    let header = SegmentHeader(
        formatVersion: formatVersion, schemaVersion: 1, account: "acct", node: NodeID("node"), firstSequence: firstSequence,
        lastSequence: firstSequence + UInt64(transactionCount) - 1, minTimestamp: HLCTimestamp(rawValue: minTimestamp),
        maxTimestamp: HLCTimestamp(rawValue: maxTimestamp), transactionCount: transactionCount)
    return SegmentFormat.assemble(
        header: header, compressedBody: try compressed ?? deflater.finish(), uncompressedByteCount: statedLength ?? body.count)
}

/// One transaction (sequence delta 0, timestamp 0, no author or context) with one change, whose bytes
/// after the entity name are `rest`.
private func oneChangeBody(_ rest: [UInt8]) -> [UInt8] {
    [0, 0, 0, 1, /* entity: new name "E" */ 0, 1, UInt8(ascii: "E")] + rest
}

private func varint(_ value: UInt64) -> [UInt8] {
    var writer = ByteWriter()
    writer.writeVarint(value)
    return writer.bytes
}

private func patchedChecksums(_ bytes: [UInt8]) -> [UInt8] {
    var bytes = bytes
    let headerEnd = SegmentFormat.prefixByteCount + Int(UInt16(bytes[10]) | UInt16(bytes[11]) << 8)
    let headerCRC = referenceCRC32(bytes[0..<headerEnd - 4])
    let segmentCRC: UInt32
    for index in 0..<4 { bytes[headerEnd - 4 + index] = UInt8(truncatingIfNeeded: headerCRC >> (8 * index)) }
    segmentCRC = referenceCRC32(bytes[0..<bytes.count - 4])
    for index in 0..<4 { bytes[bytes.count - 4 + index] = UInt8(truncatingIfNeeded: segmentCRC >> (8 * index)) }
    return bytes
}

// MARK: - Tests

@Suite("Segment codec")
struct SegmentCodecTests {
    @Test("random transactions with every kind of value round-trip exactly, and the header describes them")
    func roundTrip() throws {
        var rng = SegmentTestRandom(seed: 0x5EED_0001)
        for (count, firstSequence) in [(1, UInt64(1)), (300, 42), (3, LogTransaction.maximumSequence - 2)] {
            let transactions = randomTransactions(&rng, count: count, firstSequence: firstSequence)
            let bytes = try encode(transactions)
            let (header, decoded) = try SegmentDecoder.decode(bytes)
            #expect(decoded == transactions)
            #expect(zip(decoded, transactions).allSatisfy { identical($0, $1) })
            #expect(header.formatVersion == 1, "no value needs format 2, so the segment is readable by format-1 readers")
            #expect(header.schemaVersion == 7)
            #expect(header.account == "alice@example.com")
            #expect(header.node == node)
            #expect(header.firstSequence == firstSequence)
            #expect(header.lastSequence == firstSequence &+ UInt64(count - 1))
            #expect(header.transactionCount == count)
            let timestamps = transactions.map { $0.timestamp }
            #expect(header.minTimestamp == timestamps.min())
            #expect(header.maxTimestamp == timestamps.max())
            #expect(try SegmentDecoder.readHeader(Array(bytes.prefix(SegmentDecoder.maximumHeaderByteCount))) == header)
        }
    }

    @Test("edge values keep their exact bits and bytes")
    func edgeValues() throws {
        var values: [String: DatabaseValue] = [:]
        let all: [DatabaseValue] =
            [.null, .integer(.min), .integer(.max), .integer(0), .integer(-1), .blob([]), .blob([0, 255])]
            + edgeReals.map { .real($0) } + edgeTexts.map { .text($0) }
        for (index, value) in all.enumerated() { values["c\(index)"] = value }
        let changes = all.map { LogChange(entity: "E", primaryKey: $0, kind: .insert, causalLength: 1) }
            + [LogChange(entity: "E", primaryKey: .text("x"), kind: .update, causalLength: LogChange.maximumCausalLength, values: values)]
        let transaction = LogTransaction(
            sequence: 1, timestamp: HLCTimestamp(rawValue: .max), author: "", contextName: "🚀", changes: changes)
        let empty = LogTransaction(sequence: 2, timestamp: .zero, author: nil, contextName: nil, changes: [])
        let decoded = try SegmentDecoder.decode(try encode([transaction, empty])).transactions
        #expect(decoded == [transaction, empty])
        #expect(identical(decoded[0], transaction))
        let negativeZero = decoded[0].changes.last?.values["c\(all.firstIndex { identical($0, .real(-0.0)) }!)"]
        #expect(negativeZero.map { identical($0, .real(-0.0)) } == true)

        // NaN payloads survive too (compared by bits: NaN is not equal to itself).
        let nan = Double(bitPattern: 0x7FF8_0000_0000_1234)
        let nanTransaction = LogTransaction(
            sequence: 1, timestamp: .zero, author: nil, contextName: nil,
            changes: [LogChange(entity: "E", primaryKey: .real(nan), kind: .delete, causalLength: 2)])
        let decodedNaN = try SegmentDecoder.decode(try encode([nanTransaction])).transactions
        guard case .real(let value)? = decodedNaN.first?.changes.first?.primaryKey else {
            Issue.record("NaN did not decode as a real")
            return
        }
        #expect(value.bitPattern == nan.bitPattern)
    }

    @Test("text that is not UTF-8 keeps its bytes, in format 2 only when a segment holds some")
    func nonUTF8Text() throws {
        let odd: [[UInt8]] = [[0x66, 0xFF, 0x00, 0xFE, 0x41], [0xC3], [0xED, 0xA0, 0x80], [0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]]
        for bytes in odd {
            guard case .nonUTF8Text = DatabaseValue(textBytes: bytes) else {
                Issue.record("\(bytes) was taken for valid UTF-8")
                continue
            }
        }
        #expect(DatabaseValue(textBytes: Array("nul\u{0}é".utf8)) == .text("nul\u{0}é"))
        let values = Dictionary(uniqueKeysWithValues: odd.enumerated().map { ("c\($0.offset)", DatabaseValue.nonUTF8Text($0.element)) })
        let withOdd = LogTransaction(
            sequence: 1, timestamp: .zero, author: nil, contextName: nil,
            changes: [LogChange(entity: "E", primaryKey: .nonUTF8Text([0xFF]), kind: .insert, causalLength: 1, values: values)])
        let plain = LogTransaction(
            sequence: 2, timestamp: .zero, author: nil, contextName: nil,
            changes: [LogChange(entity: "E", primaryKey: .text("x"), kind: .insert, causalLength: 1, values: ["t": .text("y")])])
        let bytes = try encode([withOdd, plain])
        let (header, decoded) = try SegmentDecoder.decode(bytes)
        #expect(decoded == [withOdd, plain])
        #expect(header.formatVersion == 2)
        #expect(try SegmentDecoder.decode(try encode([plain])).header.formatVersion == 1)

        // A segment that needs format 2 but says 1 is malformed, not read some other way.
        var downgraded = bytes
        downgraded[8] = 1
        #expect(decodeError(patchedChecksums(downgraded))?.code == .malformed)
        // Tag 6 holding valid UTF-8 would give one value two encodings: refused.
        // (kind insert, causal length 1, key NULL, one value: new name "t", tag 6, one byte.)
        let twoSpellings = oneChangeBody([1, 1, 0, 1, 0, 1, UInt8(ascii: "t"), 6, 1, UInt8(ascii: "a")])
        #expect(decodeError(try craftedSegment(body: twoSpellings, formatVersion: 2))?.code == .malformed)
        let valid = oneChangeBody([1, 1, 0, 1, 0, 1, UInt8(ascii: "t"), 6, 1, 0xFF])
        #expect(decodeError(try craftedSegment(body: valid, formatVersion: 2)) == nil)
        #expect(decodeError(try craftedSegment(body: valid, formatVersion: 1))?.code == .malformed)
    }

    @Test("a canonical lowercase UUID costs 16 bytes; any other spelling is kept as text")
    func uuidTextIsCompact() throws {
        func bodySize(_ key: String) throws -> Int {
            var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node)
            try encoder.append(
                LogTransaction(
                    sequence: 1, timestamp: .zero, author: nil, contextName: nil,
                    changes: [LogChange(entity: "E", primaryKey: .text(key), kind: .delete, causalLength: 2)]))
            return encoder.uncompressedByteCount
        }
        let lower = "f81d4fae-7dec-11d0-a765-00a0c91e6bf6"
        // tag + 16 bytes, against tag + length + 36 bytes.
        #expect(try bodySize(lower.uppercased()) - bodySize(lower) == 21)
        #expect(try bodySize("f81d4fae-7dec-11d0-a765-00a0c91e6bF6") == bodySize(lower.uppercased()))
        for text in [lower, lower.uppercased(), "F81d4fae-7dec-11d0-a765-00a0c91e6bf6"] {
            let transaction = LogTransaction(
                sequence: 9, timestamp: .zero, author: nil, contextName: nil,
                changes: [LogChange(entity: "E", primaryKey: .text(text), kind: .insert, causalLength: 1, values: ["ref": .text(text)])])
            let decoded = try SegmentDecoder.decode(try encode([transaction])).transactions
            #expect(decoded == [transaction])
            #expect(decoded.first.map { identical($0, transaction) } == true)
        }
    }

    @Test("encoding is deterministic whatever order a change's values were inserted in")
    func deterministic() throws {
        var forward: [String: DatabaseValue] = [:]
        var backward: [String: DatabaseValue] = [:]
        let names = (0..<40).map { "column\($0)" }
        for name in names { forward[name] = .text(name) }
        for name in names.reversed() { backward[name] = .text(name) }
        func segment(_ values: [String: DatabaseValue]) throws -> [UInt8] {
            try encode([
                LogTransaction(
                    sequence: 1, timestamp: .zero, author: "a", contextName: nil,
                    changes: [LogChange(entity: "E", primaryKey: "k", kind: .insert, causalLength: 1, values: values)])
            ])
        }
        #expect(try segment(forward) == segment(backward))
    }

    @Test("the checksum is standard CRC-32 over everything before it")
    func checksumIsCRC32() throws {
        #expect(referenceCRC32(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum(Array("123456789".utf8), 0..<9) == 0xCBF4_3926)
        var rng = SegmentTestRandom(seed: 3)
        let bytes = try encode(randomTransactions(&rng, count: 5))
        let stored = bytes.suffix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        #expect(stored == referenceCRC32(bytes.dropLast(4)))
        #expect(Array(bytes.prefix(8)) == Array("LSSEG\r\n\u{1A}".utf8))
    }

    @Test("every single-bit flip is rejected, never accepted and never a crash")
    func bitFlips() throws {
        var rng = SegmentTestRandom(seed: 0xF11F)
        let bytes = try encode(randomTransactions(&rng, count: 40))
        #expect((2_000...12_000).contains(bytes.count), "want a segment of a few KB, got \(bytes.count)")
        #expect(decodeError(bytes) == nil)
        var codes: Set<String> = []
        for bit in 0..<(bytes.count * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            guard let error = decodeError(flipped) else {
                Issue.record("flipping bit \(bit) went unnoticed")
                continue
            }
            codes.insert(error.code.description)
        }
        #expect(codes.contains("checksumMismatch"))
        #expect(codes.contains("badMagic"))
        #expect(codes.isSubset(of: ["checksumMismatch", "badMagic", "unsupportedFormat", "malformed", "truncated"]))
    }

    @Test("every truncation is rejected")
    func truncations() throws {
        var rng = SegmentTestRandom(seed: 0x7256)
        let bytes = try encode(randomTransactions(&rng, count: 20))
        for length in 0..<bytes.count {
            let error = decodeError(Array(bytes.prefix(length)))
            #expect(error != nil, "a segment cut to \(length) of \(bytes.count) bytes was accepted")
            if length < 12 { #expect(error?.code == .truncated) }
        }
    }

    @Test("a newer format version is refused as unsupported, even with valid checksums")
    func newerFormat() throws {
        var rng = SegmentTestRandom(seed: 0xF0F0)
        var bytes = try encode(randomTransactions(&rng, count: 3))
        #expect(bytes[8] == 1 && bytes[9] == 0)  // format version 1, little-endian
        bytes[8] = UInt8(SegmentHeader.currentFormatVersion + 1)
        bytes = patchedChecksums(bytes)
        let error = decodeError(bytes)
        #expect(error?.code == .unsupportedFormat)
        #expect(error?.message.contains("newer") == true)
        #expect(throws: SegmentError.self) { try SegmentDecoder.readHeader(bytes) }
        do {
            _ = try SegmentDecoder.readHeader(bytes)
        } catch {
            #expect(error.code == .unsupportedFormat)
        }
        bytes[8] = 0
        #expect(decodeError(patchedChecksums(bytes))?.code == .malformed)
        bytes[8] = 1
        #expect(decodeError(patchedChecksums(bytes)) == nil)
    }

    @Test("readHeader needs only the header, and says when the prefix is too short")
    func readHeader() throws {
        var rng = SegmentTestRandom(seed: 11)
        let bytes = try encode(randomTransactions(&rng, count: 4))
        let headerLength = SegmentFormat.headerByteCount(account: "alice@example.com", node: node)
        let header = try SegmentDecoder.readHeader(Array(bytes.prefix(headerLength)))
        #expect(header.transactionCount == 4)
        for length in [0, 5, 12, headerLength - 1] {
            do {
                _ = try SegmentDecoder.readHeader(Array(bytes.prefix(length)))
                Issue.record("a \(length)-byte prefix was accepted")
            } catch {
                #expect(error.code == .truncated)
            }
        }
        #expect(decodeError(Array("not a segment at all, just some text".utf8))?.code == .badMagic)
    }

    @Test("the encoder refuses oversized values, and the segment stays as it was")
    func encoderLimits() throws {
        let limits = SegmentLimits(maxStringBytes: 100, maxNames: 10)
        func transaction(_ sequence: UInt64, _ values: [String: DatabaseValue], author: String? = nil) -> LogTransaction {
            LogTransaction(
                sequence: sequence, timestamp: HLCTimestamp(rawValue: sequence), author: author, contextName: nil,
                changes: [LogChange(entity: "E", primaryKey: "k", kind: .insert, causalLength: 1, values: values)])
        }
        var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node, limits: limits)
        let first = transaction(1, ["ok": .text(String(repeating: "x", count: 100))])
        try encoder.append(first)
        let size = encoder.uncompressedByteCount
        let oversized: [LogTransaction] = [
            transaction(2, ["new": .text(String(repeating: "x", count: 101))]),
            transaction(2, ["new": .blob(Array(repeating: 1, count: 101))]),
            transaction(2, [String(repeating: "c", count: 101): .null]),
            transaction(2, ["new": .null], author: String(repeating: "a", count: 101)),
            transaction(2, Dictionary(uniqueKeysWithValues: (0..<65).map { ("c\($0)", DatabaseValue.null) })),
        ]
        for bad in oversized {
            do {
                try encoder.append(bad)
                Issue.record("an oversized transaction was accepted")
            } catch {
                #expect(error.code == .limitExceeded)
                #expect(error.message.contains("maxStringBytes") || error.message.contains("maxValuesPerChange"))
            }
            #expect(encoder.transactionCount == 1)
            #expect(encoder.uncompressedByteCount == size)
        }
        // Names the refused transactions defined were forgotten: only these fit the 10-name table.
        let second = transaction(2, (0..<8).reduce(into: [:]) { $0["d\($1)"] = DatabaseValue.integer(Int64($1)) })
        try encoder.append(second)
        do {
            try encoder.append(transaction(3, ["one": .null, "too": .null, "many": .null]))
            Issue.record("an eleventh name was accepted")
        } catch {
            #expect(error.code == .segmentFull)
        }
        let decoded = try SegmentDecoder.decode(try encoder.finish(), limits: limits).transactions
        #expect(decoded == [first, second])
    }

    @Test("sequences must be consecutive")
    func sequenceGaps() throws {
        func transaction(_ sequence: UInt64) -> LogTransaction {
            LogTransaction(sequence: sequence, timestamp: .zero, author: nil, contextName: nil, changes: [])
        }
        for (first, second) in [(UInt64(5), UInt64(7)), (5, 5), (5, 4), (LogTransaction.maximumSequence, 0)] {
            var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node)
            try encoder.append(transaction(first))
            do {
                try encoder.append(transaction(second))
                Issue.record("sequence \(second) after \(first) was accepted")
            } catch {
                #expect(error.code == .sequenceGap)
            }
            #expect(try SegmentDecoder.decode(try encoder.finish()).transactions == [transaction(first)])
        }
    }

    @Test("an empty segment, and unusable header fields, are refused")
    func emptyAndInvalid() throws {
        let encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node)
        do {
            _ = try encoder.finish()
            Issue.record("an empty segment was produced")
        } catch {
            #expect(error.code == .empty)
        }
        let invalid: [(String, NodeID, Int)] = [
            ("", node, 1), ("a", NodeID(""), 1), (String(repeating: "a", count: 1025), node, 1), ("a", node, -1),
        ]
        for (account, nodeID, schema) in invalid {
            do {
                _ = try SegmentEncoder(schemaVersion: schema, account: account, node: nodeID)
                Issue.record("an encoder was made with account \(account.count) bytes, node '\(nodeID)', schema \(schema)")
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
    }

    @Test("the decoder refuses a segment over its limits")
    func decoderLimits() throws {
        var rng = SegmentTestRandom(seed: 0x11)
        let bytes = try encode(randomTransactions(&rng, count: 50))
        #expect(decodeError(bytes, limits: SegmentLimits(maxSegmentBytes: bytes.count)) == nil)
        #expect(decodeError(bytes, limits: SegmentLimits(maxSegmentBytes: bytes.count - 1))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxUncompressedBodyBytes: 100))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxTransactions: 49))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxStringBytes: 8))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxValuesPerChange: 2))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxChangesPerTransaction: 3))?.code == .limitExceeded)
        #expect(decodeError(bytes, limits: SegmentLimits(maxNames: 5))?.code == .limitExceeded)
    }

    @Test("a full segment says so, stays within maxSegmentBytes, and compressible data fills it")
    func segmentFull() throws {
        var rng = SegmentTestRandom(seed: 0xB10B)
        let limits = SegmentLimits(maxSegmentBytes: 16 * 1024)
        for compressible in [false, true] {
            var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node, limits: limits)
            var sequence: UInt64 = 1
            while true {
                let payload: [UInt8] = compressible
                    ? Array(repeating: UInt8(sequence % 7), count: 1000)
                    : (0..<1000).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                let transaction = LogTransaction(
                    sequence: sequence, timestamp: .zero, author: nil, contextName: nil,
                    changes: [LogChange(entity: "E", primaryKey: .integer(Int64(sequence)), kind: .insert, causalLength: 1, values: ["v": .blob(payload)])])
                do {
                    try encoder.append(transaction)
                    sequence += 1
                } catch {
                    #expect(error.code == .segmentFull)
                    break
                }
            }
            let body = encoder.uncompressedByteCount
            let bytes = try encoder.finish()
            #expect(bytes.count <= limits.maxSegmentBytes)
            if compressible {
                #expect(body > 4 * limits.maxSegmentBytes)  // the limit is on bytes shipped, not bytes described
            } else {
                #expect(bytes.count > limits.maxSegmentBytes * 3 / 4)  // and the estimate is not wildly cautious
            }
            #expect(try SegmentDecoder.decode(bytes, limits: limits).transactions.count == Int(sequence - 1))
        }
        // A transaction too big for even an empty segment can never fit: a different error.
        var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node, limits: limits)
        let huge = (0..<20_000).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        do {
            try encoder.append(
                LogTransaction(
                    sequence: 1, timestamp: .zero, author: nil, contextName: nil,
                    changes: [LogChange(entity: "E", primaryKey: 1, kind: .insert, causalLength: 1, values: ["v": .blob(huge)])]))
            Issue.record("a transaction larger than the segment limit was accepted")
        } catch {
            #expect(error.code == .limitExceeded)
        }
        // But one that only compresses small enough is tried for real, and fits.
        try encoder.append(
            LogTransaction(
                sequence: 1, timestamp: .zero, author: nil, contextName: nil,
                changes: [LogChange(entity: "E", primaryKey: 1, kind: .insert, causalLength: 1, values: ["v": .blob(Array(repeating: 0, count: 200_000))])]))
        #expect(try SegmentDecoder.decode(try encoder.finish(), limits: limits).transactions.count == 1)
    }

    @Test("10,000 inserts of a five-column row cost well under a changeset's 97 bytes per row")
    func bytesPerChange() throws {
        var rng = SegmentTestRandom(seed: 0x5123)
        let words = [
            "alpha", "budget", "meeting", "notes", "project", "review", "draft", "weekly", "plan", "ideas", "todo",
            "summary", "launch", "design", "call", "follow", "up", "client", "report", "travel", "groceries", "book",
        ]
        func sentence(_ length: Int) -> String {
            var text = ""
            while text.utf8.count < length { text += (text.isEmpty ? "" : " ") + words[rng.below(words.count)] }
            return String(text.prefix(length))
        }
        let changes = (0..<10_000).map { _ in
            LogChange(
                entity: "Note", primaryKey: .text(uuidText(&rng)), kind: .insert, causalLength: 1,
                values: [
                    "title": .text(sentence(8 + rng.below(16))),
                    "body": .text(sentence(40)),
                    "rank": .integer(Int64(rng.below(100_000))),
                    "created": .real(1_700_000_000 + Double(rng.below(100_000_000)) / 1000),
                ])
        }
        var timestamp = HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0)
        func transactions(_ perTransaction: Int) -> [LogTransaction] {
            stride(from: 0, to: changes.count, by: perTransaction).enumerated().map { index, start in
                timestamp = HybridLogicalClock.successor(of: timestamp)
                return LogTransaction(
                    sequence: UInt64(index + 1), timestamp: timestamp, author: "app", contextName: "viewContext",
                    changes: Array(changes[start..<min(start + perTransaction, changes.count)]))
            }
        }
        for perTransaction in [1_000, 1] {
            let bytes = try encode(transactions(perTransaction))
            let perChange = Double(bytes.count) / Double(changes.count)
            print("segment bytes per change, \(perTransaction) change(s) per transaction: \(perChange)")
            #expect(perChange < 97)
            #expect(perChange < 60, "aiming well below the changeset; got \(perChange)")
        }
    }

    @Test("a large segment is iterated with bounded memory")
    func streaming() throws {
        var rng = SegmentTestRandom(seed: 0x2000)
        var encoder = try SegmentEncoder(schemaVersion: 1, account: "a", node: node)
        for sequence in 1...2_000 {
            let changes = (0..<100).map { index in
                LogChange(
                    entity: "Note", primaryKey: .text(uuidText(&rng)), kind: .insert, causalLength: 1,
                    values: ["title": .text("note \(sequence)-\(index)"), "rank": .integer(Int64(index))])
            }
            try encoder.append(LogTransaction(sequence: UInt64(sequence), timestamp: .zero, author: nil, contextName: nil, changes: changes))
        }
        let bytes = try encoder.finish()
        var decoder = try SegmentDecoder(bytes: bytes)
        #expect(decoder.uncompressedByteCount > 5_000_000)
        var transactions = 0
        var changes = 0
        var peakBuffered = 0
        while let transaction = try decoder.next() {
            transactions += 1
            changes += transaction.changes.count
            peakBuffered = max(peakBuffered, decoder.bufferedByteCount)
        }
        #expect(transactions == 2_000)
        #expect(changes == 200_000)
        #expect(peakBuffered <= 256 * 1024, "held \(peakBuffered) inflated bytes at once")
        #expect(try decoder.next() == nil)
    }

    @Test("hand-made hostile bodies with valid checksums are refused with the right error")
    func hostileBodies() throws {
        // The fixture itself is sound.
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0])) == nil)
        #expect(decodeError(try craftedSegment(body: oneChangeBody([1, 1, 0, 0]))) == nil)

        let cases: [(String, [UInt8], SegmentError.Code)] = [
            ("huge text length", oneChangeBody([1, 1, 3] + varint(1 << 62)), .limitExceeded),
            ("text longer than the body", oneChangeBody([1, 1, 3, 100, 65]), .malformed),
            ("name index out of range", oneChangeBody([1, 1, 0, 1, 7, 0]), .malformed),
            ("invalid UTF-8", oneChangeBody([1, 1, 3, 2, 0xC3, 0x28, 0]), .malformed),
            ("unknown value tag", oneChangeBody([1, 1, 9, 0]), .malformed),
            ("change kind 0", oneChangeBody([0, 1, 0, 0]), .malformed),
            ("change kind 4", oneChangeBody([4, 1, 0, 0]), .malformed),
            ("varint over 64 bits", oneChangeBody([1] + Array(repeating: 0xFF, count: 10) + [1, 0, 0]), .malformed),
            ("causal length above 2^62", oneChangeBody([1] + varint((1 << 62) + 1) + [0, 0]), .limitExceeded),
            ("causal length 2^63 + 5", oneChangeBody([1] + varint((1 << 63) + 5) + [0, 0]), .limitExceeded),
            ("varint not in shortest form", oneChangeBody([1, 0x81, 0x00, 0, 0]), .malformed),
            ("value count over the limit", oneChangeBody([1, 1, 0, 65]), .limitExceeded),
            ("change count over the limit", [0, 0, 0] + varint(1_000_001), .limitExceeded),
            ("duplicate column", oneChangeBody([1, 1, 0, 2, 0, 1, 99, 0, 2, 0]), .malformed),
            ("name defined twice", oneChangeBody([1, 1, 0, 1, 0, 1, UInt8(ascii: "E"), 0]), .malformed),
            ("unknown transaction flag", [0, 0, 4, 0], .malformed),
            ("first sequence delta not 0", [1, 0, 0, 0], .sequenceGap),
            ("bytes after the last transaction", [0, 0, 0, 0, 0], .malformed),
            ("body ends inside a transaction", [0, 0, 0], .malformed),
            ("empty body", [], .malformed),
        ]
        for (name, body, code) in cases {
            let error = decodeError(try craftedSegment(body: body))
            #expect(error?.code == code, "\(name): \(error.map(String.init(describing:)) ?? "accepted")")
        }

        // The largest causal length a store records is accepted; sequences past 2^63 − 1 are not.
        #expect(decodeError(try craftedSegment(body: oneChangeBody([1] + varint(1 << 62) + [0, 0]))) == nil)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], firstSequence: 1 << 63))?.code == .limitExceeded)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], firstSequence: UInt64(Int64.max))) == nil)
        // Two transactions whose second sequence delta is 2.
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0, 2, 0, 0, 0], transactionCount: 2))?.code == .sequenceGap)
        // The header promises two transactions; the body holds one.
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], transactionCount: 2))?.code == .malformed)
        // The header's timestamp range is not the transactions'.
        // (Timestamp delta 4 is zigzag for +2.)
        #expect(decodeError(try craftedSegment(body: [0, 4, 0, 0], minTimestamp: 2, maxTimestamp: 2)) == nil)
        #expect(decodeError(try craftedSegment(body: [0, 4, 0, 0], minTimestamp: 2, maxTimestamp: 3))?.code == .malformed)
        #expect(decodeError(try craftedSegment(body: [0, 4, 0, 0], minTimestamp: 1, maxTimestamp: 2))?.code == .malformed)
        // The trailer's length is wrong either way.
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], statedLength: 5))?.code == .malformed)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], statedLength: 3))?.code == .malformed)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], statedLength: 0))?.code == .malformed)
        // A decompression bomb: 10 MB of zeros claimed to be 4 bytes.
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0] + Array(repeating: 0, count: 10_000_000), statedLength: 4))?.code == .malformed)

        // The compressed stream itself: cut short, followed by garbage, or not zlib at all.
        let deflater = try Deflater()
        try deflater.write([0, 0, 0, 0])
        let compressed = try deflater.finish()
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], compressed: compressed)) == nil)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], compressed: compressed.dropLast(3) + [])) != nil)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], compressed: compressed + [1, 2, 3]))?.code == .malformed)
        #expect(decodeError(try craftedSegment(body: [0, 0, 0, 0], compressed: Array(repeating: 0xAB, count: 20)))?.code == .compression)
    }

    @Test("randomly mutated bodies with valid checksums never crash the decoder")
    func fuzzedBodies() throws {
        var rng = SegmentTestRandom(seed: 0xF022)
        let transactions = randomTransactions(&rng, count: 12)
        var encoder = BodyEncoder(limits: .default)
        var writer = ByteWriter()
        var body: [UInt8] = []
        for transaction in transactions {
            try encoder.encode(transaction, into: &writer)
            encoder.commit(transaction)
            body += writer.bytes
        }
        let (minimum, maximum) = (transactions.map(\.timestamp.rawValue).min()!, transactions.map(\.timestamp.rawValue).max()!)
        #expect(
            try SegmentDecoder.decode(
                try craftedSegment(body: body, transactionCount: 12, minTimestamp: minimum, maxTimestamp: maximum)
            ).transactions == transactions)

        var outcomes: [String: Int] = [:]
        for _ in 0..<3_000 {
            var mutated = body
            for _ in 0..<(1 + rng.below(4)) {
                let position = rng.below(mutated.count)
                switch rng.below(6) {
                case 0: mutated[position] = UInt8(truncatingIfNeeded: rng.next())
                case 1: mutated[position] ^= 1 << UInt8(rng.below(8))
                case 2: mutated.insert(UInt8(truncatingIfNeeded: rng.next()), at: position)
                case 3: mutated.remove(at: position)
                case 4: mutated.replaceSubrange(position..<position, with: Array(repeating: 0xFF, count: rng.below(12)))
                default: mutated.removeSubrange(position..<min(mutated.count, position + rng.below(40)))
                }
                if mutated.isEmpty { mutated = [0] }
            }
            let error = decodeError(
                try craftedSegment(body: mutated, transactionCount: 12, minTimestamp: minimum, maxTimestamp: maximum))
            outcomes[error?.code.description ?? "accepted", default: 0] += 1
        }
        #expect(outcomes["malformed", default: 0] > 0)
        #expect(outcomes.keys.allSatisfy { ["accepted", "malformed", "limitExceeded", "sequenceGap"].contains($0) }, "\(outcomes)")
    }
}
