import Foundation
import LogsyncCore
import LogsyncSeal

// The decoders of everything a carrier hands a node, behind one libFuzzer entry point. The first byte of
// an input chooses the decoder (its value modulo the number of modes); the rest is that mode's input, laid
// out as each mode says. Every decoder must only throw on any input: an error is an answer, and the
// harness returns 0. A trap (an index out of range, an overflow, a failed precondition) is what libFuzzer
// reports as a crash, and so is a round trip that fails on authentic objects (mode sealRoundTrip), which
// the harness checks with fatalError. scripts/decoder-fuzz.sh runs it; docs/security.md, "Fuzzing the
// decoders".

@_cdecl("LLVMFuzzerTestOneInput")
public func logsyncFuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    // A run held to one mode refuses (-1: not kept in the corpus) what a mutation of the first byte moved
    // to another, so that a reproducer replays in the same mode without the variable.
    if let pinned = Harness.pinnedMode, input.first.map({ $0 % UInt8(Mode.allCases.count) }) != pinned.rawValue { return -1 }
    _ = Harness.run(input)
    return 0
}

enum Mode: UInt8, CaseIterable, CustomStringConvertible {
    /// A plain segment as a carrier hands it over, decoded transaction by transaction.
    case segment
    /// `flags u8 | fieldsLength u16 | header fields | [bodyLength u32 when flags & 4] | body`: a segment
    /// framed by the harness with right CRCs, so that the bytes reach the header's fields and the body's
    /// records. The version is `flags & 3`; the body is stored in a zlib stream, or with `flags & 4` is
    /// the compressed stream itself.
    case segmentFramed
    /// `pieces | bytes`: a plain baseline read through BaselineDecoder from chunks of the sizes `pieces`
    /// says, every row decoded (verify), and checked without decoding (checkBytes).
    case baseline
    /// `flags u8 | rows u16 | fieldsLength u16 | header fields | [bodyLength u32 when flags & 4] | body`:
    /// a baseline framed with right CRCs; version 1 (2 with `flags & 1`); chunks of 1, 7, 4,096 bytes or
    /// whole by `flags >> 3 & 3`.
    case baselineFramed
    /// A progress record.
    case progressRecord
    /// `version u16 | body`: a progress record framed with the right length and CRC.
    case progressRecordFramed
    /// A sealed object's readable header (decode), and its structure (checkWhole).
    case sealedHeader
    /// A sealed segment opened with the fixed keyring; what opens is decoded as a plain segment.
    case sealedSegment
    /// A sealed progress record opened with the fixed keyring, then decoded.
    case sealedProgressRecord
    /// `pieces | bytes`: a sealed baseline fed to a BaselineOpener in pieces, finished, and what it
    /// hands out decoded as a baseline.
    case sealedBaseline
    /// `which u8 | pieces | { position u16, value u8 } …`: a valid sealed segment, progress record or
    /// baseline (`which % 3`) made at start-up, changed at each position (xor with the value; a value of
    /// 0 cuts the object there; a position past the end appends the value), then opened as in the modes
    /// above.
    case sealedMutated
    /// `which u8 | pieces | content`: the content sealed as a segment, a progress record or a baseline
    /// (cut in chunks as `pieces` says) with the fixed keyring, opened again (which must succeed and give
    /// the content back, else the harness traps), then decoded as that plain object: every path after
    /// authentication, on authentic objects.
    case sealRoundTrip
    /// A progress slot's device appendix: the slot split, its card and roster decoded and the roster's
    /// grants opened with the fixed signing key; the decoders also on the whole input.
    case deviceSlot
    /// `{ position u16, value u8 } …`: a valid slot (record, card, a roster of three members over two
    /// epochs) made at start-up, changed as in sealedMutated, then decoded as in deviceSlot.
    case deviceSlotMutated

    var description: String {
        switch self {
        case .segment: return "segment"
        case .segmentFramed: return "segment-framed"
        case .baseline: return "baseline"
        case .baselineFramed: return "baseline-framed"
        case .progressRecord: return "progress-record"
        case .progressRecordFramed: return "progress-record-framed"
        case .sealedHeader: return "sealed-header"
        case .sealedSegment: return "sealed-segment"
        case .sealedProgressRecord: return "sealed-progress-record"
        case .sealedBaseline: return "sealed-baseline"
        case .sealedMutated: return "sealed-mutated"
        case .sealRoundTrip: return "seal-round-trip"
        case .deviceSlot: return "device-slot"
        case .deviceSlotMutated: return "device-slot-mutated"
        }
    }
}

/// What one input came to, for the replay's one line per file.
enum Outcome {
    case accepted(String)
    case refused(any Error)
    case empty
}

/// The fuzzer's bytes, read front to back; reads past the end give zeros (every input is a valid one).
struct InputReader {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }
    mutating func u32() -> UInt32 { UInt32(u16()) | UInt32(u16()) << 16 }

    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    mutating func rest() -> [UInt8] { take(remaining) }

    /// `n u8 | size u8 …`: `n % 4 + 1` piece sizes, each `1 + size²` bytes (1 to 65,026).
    mutating func pieceSizes() -> [Int] {
        let count = Int(byte() % 4) + 1
        return (0..<count).map { _ in
            let size = Int(byte())
            return 1 + size * size
        }
    }
}

enum Harness {
    /// LOGSYNC_FUZZ_MODE (a mode's name, as Mode.description spells it): the one mode a run fuzzes.
    static let pinnedMode: Mode? = {
        guard let value = getenv("LOGSYNC_FUZZ_MODE").map({ String(cString: $0) }), !value.isEmpty else { return nil }
        guard let mode = Mode.allCases.first(where: { $0.description == value }) else {
            fatalError("logsync-fuzz: LOGSYNC_FUZZ_MODE=\(value) is none of \(Mode.allCases.map(\.description).joined(separator: ", "))")
        }
        return mode
    }()

    static func run(_ input: [UInt8]) -> (mode: Mode?, outcome: Outcome) {
        guard let first = input.first else { return (nil, .empty) }
        let mode = Mode(rawValue: first % UInt8(Mode.allCases.count))!
        var reader = InputReader(input)
        _ = reader.byte()
        do {
            return (mode, .accepted(try run(mode, &reader)))
        } catch {
            return (mode, .refused(error))
        }
    }

    private static func run(_ mode: Mode, _ reader: inout InputReader) throws -> String {
        switch mode {
        case .segment:
            let bytes = reader.rest()
            _ = try? SegmentDecoder.readHeader(bytes, limits: Fixtures.limits)
            return try decodeSegment(bytes)
        case .segmentFramed:
            let flags = reader.byte()
            let fields = reader.take(Int(reader.u16()))
            let (body, length) = bodyAndLength(flags: flags, &reader)
            return try decodeSegment(framedSegment(version: UInt16(flags & 3), fields: fields, compressedBody: body, uncompressedLength: length))
        case .baseline:
            let sizes = reader.pieceSizes()
            return try decodeBaseline(reader.rest(), sizes: sizes)
        case .baselineFramed:
            let flags = reader.byte()
            let rows = UInt64(reader.u16())
            let fields = reader.take(Int(reader.u16()))
            let (body, length) = bodyAndLength(flags: flags, &reader)
            let bytes = framedBaseline(version: flags & 1 == 0 ? 1 : 2, fields: fields, compressedBody: body, rows: rows, uncompressedLength: length)
            return try decodeBaseline(bytes, sizes: [[1, 7, 4_096, bytes.count][Int(flags >> 3 & 3)]])
        case .progressRecord:
            return try decodeProgressRecord(reader.rest())
        case .progressRecordFramed:
            let version = reader.u16()
            return try decodeProgressRecord(framedProgressRecord(version: version, body: reader.rest()))
        case .sealedHeader:
            let bytes = reader.rest()
            let (header, end) = try SealedHeader.decode(bytes)
            _ = try SealedHeader.checkWhole(bytes, maximumBytes: Fixtures.maximumSealedBytes)
            return "a sealed \(header.kind) header of \(end) bytes"
        case .sealedSegment:
            return try openSegment(reader.rest())
        case .sealedProgressRecord:
            return try openProgressRecord(reader.rest())
        case .sealedBaseline:
            let sizes = reader.pieceSizes()
            return try openBaseline(reader.rest(), sizes: sizes)
        case .sealedMutated:
            let which = reader.byte() % 3
            let sizes = reader.pieceSizes()
            let bytes = mutated([Fixtures.sealedSegment, Fixtures.sealedProgressRecord, Fixtures.sealedBaseline][Int(which)], &reader)
            switch which {
            case 0: return try openSegment(bytes)
            case 1: return try openProgressRecord(bytes)
            default: return try openBaseline(bytes, sizes: sizes)
            }
        case .sealRoundTrip:
            let which = reader.byte() % 3
            let sizes = reader.pieceSizes()
            return try roundTrip(which, reader.rest(), sizes: sizes)
        case .deviceSlot:
            return try DeviceSlotDecoding.decode(reader.rest(), opening: Fixtures.keyring.signingKey)
        case .deviceSlotMutated:
            return try DeviceSlotDecoding.decode(mutated(Fixtures.deviceSlot, &reader), opening: Fixtures.keyring.signingKey)
        }
    }

    /// `bytes` changed by the `{ position u16, value u8 }` triples left in `reader`: xor with the value, a
    /// value of 0 cuts there, a position past the end appends.
    private static func mutated(_ bytes: [UInt8], _ reader: inout InputReader) -> [UInt8] {
        var bytes = bytes
        while reader.remaining >= 3 {
            let position = Int(reader.u16()) % (bytes.count + 1)
            let value = reader.byte()
            if value == 0 {
                bytes.removeSubrange(position...)
            } else if position == bytes.count {
                bytes.append(value)
            } else {
                bytes[position] ^= value
            }
        }
        return bytes
    }

    /// The body as given, or stored in a zlib stream, and the length the trailer states.
    private static func bodyAndLength(flags: UInt8, _ reader: inout InputReader) -> ([UInt8], UInt64) {
        if flags & 4 != 0 {
            let length = UInt64(reader.u32())
            return (reader.rest(), length)
        }
        let body = reader.rest()
        return (storedZlibStream(body), UInt64(body.count))
    }

    // MARK: The decoders

    static func decodeSegment(_ bytes: [UInt8]) throws(SegmentError) -> String {
        var decoder = try SegmentDecoder(bytes: bytes, limits: Fixtures.limits)
        var count = 0
        while try decoder.next() != nil { count += 1 }
        return "a segment of \(count) transactions"
    }

    static func decodeBaseline(_ bytes: [UInt8], sizes: [Int]) throws -> String {
        // Checked without decoding first, as a loader does; then every row, whatever checkBytes said.
        let checked = Result { try BaselineDecoder.checkBytes(limits: Fixtures.limits, source: chunks(of: bytes, sizes: sizes)) }
        let (_, rows) = try BaselineDecoder.verify(limits: Fixtures.limits, source: chunks(of: bytes, sizes: sizes))
        _ = try checked.get()
        return "a baseline of \(rows) rows"
    }

    static func decodeProgressRecord(_ bytes: [UInt8]) throws(SegmentError) -> String {
        let record = try ProgressRecord(decoding: bytes)
        return "a progress record naming \(record.applied.sequences.count) nodes"
    }

    static func openSegment(_ bytes: [UInt8]) throws -> String {
        let opened = try Sealer.open(bytes, kind: .segment, keyring: Fixtures.keyring, maximumBytes: Fixtures.maximumSealedBytes)
        return "sealed: " + (try decodeSegment(opened.content))
    }

    static func openProgressRecord(_ bytes: [UInt8]) throws -> String {
        let opened = try Sealer.open(bytes, kind: .progressRecord, keyring: Fixtures.keyring, maximumBytes: Fixtures.maximumSealedBytes)
        return "sealed: " + (try decodeProgressRecord(opened.content))
    }

    /// Fed in pieces as a carrier hands them over; what authenticates is decoded only after finish().
    static func openBaseline(_ bytes: [UInt8], sizes: [Int]) throws -> String {
        let plain = try openBaselinePlain(bytes, sizes: sizes)
        return "sealed: " + (try decodeBaseline(plain, sizes: sizes.reversed()))
    }

    static func openBaselinePlain(_ bytes: [UInt8], sizes: [Int]) throws(SealError) -> [UInt8] {
        var opener = BaselineOpener(
            node: Fixtures.node, transactionCount: Fixtures.baselineTransactionCount, frontierDigest: Fixtures.baselineFrontierDigest,
            keyring: Fixtures.keyring)
        var plain: [UInt8] = []
        for piece in split(bytes, sizes: sizes) { plain += try opener.feed(piece) }
        try opener.finish()
        return plain
    }

    /// Seals `content`, opens it again (which must give it back), and decodes it.
    static func roundTrip(_ which: UInt8, _ content: [UInt8], sizes: [Int]) throws -> String {
        switch which {
        case 0, 1:
            let kind: SealedHeader.Kind = which == 0 ? .segment : .progressRecord
            let sealed = Fixtures.seal(kind, first: 1, last: 1, content)
            let opened: Sealer.Sealed
            do {
                opened = try Sealer.open(sealed, kind: kind, keyring: Fixtures.keyring, maximumBytes: sealed.count)
            } catch {
                fatalError("logsync-fuzz: an authentic sealed \(kind) of \(content.count) content bytes does not open: \(error)")
            }
            guard opened.content == content else { fatalError("logsync-fuzz: a sealed \(kind) opens to other content") }
            return "round trip: " + (try which == 0 ? decodeSegment(content) : decodeProgressRecord(content))
        default:
            let sealed = Fixtures.sealBaseline(content, chunkSizes: sizes)
            let plain: [UInt8]
            do {
                plain = try openBaselinePlain(sealed, sizes: sizes.reversed())
            } catch {
                fatalError("logsync-fuzz: an authentic sealed baseline of \(content.count) content bytes does not open: \(error)")
            }
            guard plain == content else { fatalError("logsync-fuzz: a sealed baseline opens to other content") }
            return "round trip: " + (try decodeBaseline(content, sizes: sizes))
        }
    }

    /// A chunk source over `bytes` in pieces of the sizes given (cycled).
    static func chunks(of bytes: [UInt8], sizes: [Int]) -> () throws -> [UInt8]? {
        var pieces = split(bytes, sizes: sizes)[...]
        return { pieces.popFirst() }
    }
}
