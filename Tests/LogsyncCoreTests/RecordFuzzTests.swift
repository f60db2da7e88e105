@testable import LogsyncCore
import LogsyncTestKit
import Testing

/// Baselines and progress records with hostile contents, every checksum recomputed: the decoders refuse
/// them with a `SegmentError` or return values within the format's limits, and never crash or hang.
@Suite("Hostile baselines and progress records")
struct RecordFuzzTests {
    /// The same seeds variable as the import fuzz (`docs/architecture.md`).
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_SEGMENT_FUZZ_SEEDS", default: 60, from: 0x5E6_F022) }

    static func uuid(_ rng: inout SeededRandom) -> String {
        let hex = Array("0123456789abcdef")
        return String((0..<36).map { [8, 13, 18, 23].contains($0) ? "-" : hex[Int(rng.next() % 16)] })
    }

    // MARK: Progress records

    static func progress(_ rng: inout SeededRandom) -> ProgressRecord {
        var sequences: [NodeID: UInt64] = [:]
        for _ in 0..<(1 + rng.next() % 4) { sequences[NodeID(uuid(&rng))] = 1 + rng.next() % 1_000 }
        return ProgressRecord(
            account: "acct", node: NodeID(uuid(&rng)), applied: Frontier(sequences), prunedThrough: rng.next() % 100,
            activeAtMilliseconds: 1_700_000_000_000, schemaVersion: rng.next() % 2 == 0 ? nil : Int(rng.next() % 5))
    }

    /// `body` as a record of `version`: magic, version, length, CRC-32 recomputed.
    static func progressBytes(body: [UInt8], version: UInt16 = 1) -> [UInt8] {
        var writer = ByteWriter()
        writer.write(contentsOf: ProgressRecord.magic)
        writer.writeLittleEndian(version)
        writer.writeLittleEndian(UInt32(body.count))
        writer.write(contentsOf: body)
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }

    @Test("progress records carry the schema version from format 2; later versions are read in the fields this build knows; version 1 with more bytes, or version 0, is refused")
    func laterProgressVersions() throws {
        let record = ProgressRecord(
            account: "acct", node: NodeID("a"), applied: Frontier([NodeID("b"): 7]), prunedThrough: 3, activeAtMilliseconds: 1_700_000_000_000)
        let body = Array(record.encoded().dropFirst(14).dropLast(4))
        #expect(record.encoded()[8] == 1, "a record without a schema version is written as version 1")
        #expect(try ProgressRecord(decoding: record.encoded()) == record)
        // Version 2 appends the schema version.
        var versioned = record
        versioned.schemaVersion = 3
        #expect(versioned.encoded()[8] == 2)
        #expect(Array(versioned.encoded().dropFirst(14).dropLast(4)) == body + [3, 0, 0, 0])
        #expect(try ProgressRecord(decoding: versioned.encoded()) == versioned)
        // A later version appends more: read in the fields this build knows.
        let later = try ProgressRecord(decoding: Self.progressBytes(body: body + [2, 0, 0, 0, 0xAB, 0xCD], version: 9))
        #expect(later.applied[NodeID("b")] == 7 && later.prunedThrough == 3 && later.node == NodeID("a") && later.schemaVersion == 2)
        #expect(throws: SegmentError.self, "version 2 without its field") { try ProgressRecord(decoding: Self.progressBytes(body: body, version: 2)) }
        #expect(throws: SegmentError.self) { try ProgressRecord(decoding: Self.progressBytes(body: body + [2, 0, 0, 0], version: 1)) }
        #expect(throws: SegmentError.self) { try ProgressRecord(decoding: Self.progressBytes(body: body, version: 0)) }
    }

    @Test("progress records: values past SQLite's integers are refused")
    func progressLimits() throws {
        func body(activeAt: UInt64, pruned: UInt64, sequence: UInt64) -> [UInt8] {
            var body = ByteWriter()
            body.writeString("acct")
            body.writeString("node")
            body.writeLittleEndian(activeAt)
            body.writeLittleEndian(pruned)
            body.writeLittleEndian(UInt32(1))
            body.writeString("other")
            body.writeLittleEndian(sequence)
            return body.bytes
        }
        #expect(try ProgressRecord(decoding: Self.progressBytes(body: body(activeAt: 1, pruned: 1, sequence: 1))).applied[NodeID("other")] == 1)
        for (activeAt, pruned, sequence) in [(UInt64.max, UInt64(1), UInt64(1)), (1, 1 << 63, 1), (1, 1, (1 << 63) + 5)] {
            #expect(throws: SegmentError.self) { try ProgressRecord(decoding: Self.progressBytes(body: body(activeAt: activeAt, pruned: pruned, sequence: sequence))) }
        }
    }

    @Test("mutated progress records with valid checksums: refused or within limits, never a crash")
    func fuzzedProgressRecords() throws {
        var outcomes: [String: Int] = [:]
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let bytes = Self.progress(&rng).encoded()
            let version = UInt16(bytes[8])
            var body = Array(bytes[14..<(bytes.count - 4)])
            for _ in 0..<(1 + rng.next() % 4) {
                let position = Int(rng.next() % UInt64(body.count))
                switch rng.next() % 5 {
                case 0: body[position] = UInt8(truncatingIfNeeded: rng.next())
                case 1: body[position] ^= 1 << UInt8(rng.next() % 8)
                case 2: body.insert(contentsOf: Array(repeating: 0xFF, count: Int(rng.next() % 9)), at: position)
                case 3: body.remove(at: position)
                default: body.replaceSubrange(position..<body.count, with: Array(repeating: 0xFF, count: 8))
                }
                if body.isEmpty { body = [0] }
            }
            do {
                let record = try ProgressRecord(decoding: Self.progressBytes(body: body, version: version))
                #expect(record.activeAtMilliseconds <= UInt64(Int64.max) && record.prunedThrough <= LogTransaction.maximumSequence)
                #expect(record.applied.sequences.values.allSatisfy { $0 <= LogTransaction.maximumSequence })
                outcomes["accepted", default: 0] += 1
            } catch {
                outcomes[error.code.description, default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == Self.seeds.count)
    }

    // MARK: Baselines

    static func baseline(_ rng: inout SeededRandom, causalLength: UInt64 = 1, frontierSequence: UInt64? = nil) throws -> [UInt8] {
        let node = NodeID(uuid(&rng))
        let encoder = try BaselineEncoder(
            header: BaselineHeader(schemaVersion: 1, account: "acct", frontier: Frontier([node: frontierSequence ?? (1 + rng.next() % 50)])))
        var out: [UInt8] = []
        let keys = (0..<(1 + rng.next() % 6)).map { _ in DatabaseValue.text(uuid(&rng)) }.sorted { $0.sortsBefore($1) }
        for key in keys {
            let clock = Clock(HLCTimestamp(rawValue: rng.next() >> 2), node)
            try encoder.append(
                BaselineRow(
                    key: RowKey("Note", key),
                    state: RowState(causalLength: causalLength, columns: ["title": Register(.text("t"), clock), "rank": Register(.integer(2), clock)])))
            out += encoder.takeOutput()
        }
        return out + (try encoder.finish())
    }

    /// Where a baseline's body starts and ends (before the 20-byte trailer).
    static func bodyRange(_ bytes: [UInt8]) -> Range<Int> {
        let headerLength = Int(bytes[10]) | Int(bytes[11]) << 8 | Int(bytes[12]) << 16 | Int(bytes[13]) << 24
        return (14 + headerLength)..<(bytes.count - 20)
    }

    static func inflate(_ compressed: ArraySlice<UInt8>) throws -> [UInt8] {
        let inflater = try Inflater()
        var output: [UInt8] = []
        var input = Array(compressed)[...]
        while true {
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let result = input.withUnsafeBytes { source in chunk.withUnsafeMutableBytes { inflater.inflate(from: source, into: $0) } }
            output += chunk.prefix(result.produced)
            input = input.dropFirst(result.consumed)
            if result.status != .progress { return output }
        }
    }

    /// `bytes`' header, `body` deflated, a trailer of `rows` and the body's length, and the CRC-32: valid framing.
    static func reframed(_ bytes: [UInt8], body: [UInt8], rows: UInt64) throws -> [UInt8] {
        let deflater = try Deflater()
        try deflater.write(body)
        var writer = ByteWriter()
        writer.write(contentsOf: bytes[..<bodyRange(bytes).lowerBound])
        writer.write(contentsOf: try deflater.finish())
        writer.writeLittleEndian(rows)
        writer.writeLittleEndian(UInt64(body.count))
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }

    static func decodeAll(_ bytes: [UInt8]) throws -> [BaselineRow] {
        var handed = false
        let decoder = try BaselineDecoder(source: {
            defer { handed = true }
            return handed ? nil : bytes
        })
        var rows: [BaselineRow] = []
        while let row = try decoder.next() { rows.append(row) }
        return rows
    }

    @Test("baselines: causal lengths and frontier sequences past SQLite's integers are refused")
    func baselineLimits() throws {
        var rng = SeededRandom(seed: 7)
        #expect(try Self.decodeAll(try Self.baseline(&rng)).count >= 1)
        for length in [(1 << 62) + 1, 1 << 63, (1 << 63) + 5, UInt64.max] as [UInt64] {
            #expect(throws: SegmentError.self) { try Self.decodeAll(try Self.baseline(&rng, causalLength: length)) }
        }
        #expect(throws: SegmentError.self) { try Self.decodeAll(try Self.baseline(&rng, frontierSequence: (1 << 63) + 5)) }
    }

    @Test("mutated baselines with valid checksums: refused, or rows within limits; never a crash")
    func fuzzedBaselines() throws {
        var outcomes: [String: Int] = [:]
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let bytes = try Self.baseline(&rng)
            let original = try Self.decodeAll(bytes)
            var body = try Self.inflate(bytes[Self.bodyRange(bytes)])
            var rows = UInt64(original.count)
            switch rng.next() % 4 {
            case 0: rows = rng.next()
            case 1: body += Array(repeating: 0xFF, count: Int(1 + rng.next() % 12))
            default: break
            }
            for _ in 0..<(1 + rng.next() % 4) {
                let position = Int(rng.next() % UInt64(body.count))
                switch rng.next() % 5 {
                case 0: body[position] = UInt8(truncatingIfNeeded: rng.next())
                case 1: body[position] ^= 1 << UInt8(rng.next() % 8)
                case 2: body.insert(contentsOf: Array(repeating: 0xFF, count: Int(1 + rng.next() % 10)), at: position)
                case 3: body.remove(at: position)
                default: body.insert(contentsOf: [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], at: position)
                }
                if body.isEmpty { body = [0] }
            }
            do {
                let decoded = try Self.decodeAll(try Self.reframed(bytes, body: body, rows: rows))
                #expect(decoded.allSatisfy { $0.state.causalLength <= LogChange.maximumCausalLength })
                outcomes["accepted", default: 0] += 1
            } catch let error as SegmentError {
                outcomes[error.code.description, default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == Self.seeds.count, "\(outcomes)")
    }
}
