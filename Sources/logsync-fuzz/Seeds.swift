import Foundation
import LogsyncCore

/// The seed corpus: one valid input per mode (a few modes get a second), made from the fixtures, so that
/// libFuzzer starts from objects every decoder accepts and mutates inward from there.
enum Seeds {
    static func all() -> [(name: String, bytes: [UInt8])] {
        func input(_ mode: Mode, _ bytes: [UInt8]) -> [UInt8] { [mode.rawValue] + bytes }
        /// `n u8 | size u8 …` (see InputReader.pieceSizes): pieces of 1 + size² bytes.
        let pieces: [UInt8] = [2, 3, 1, 6]

        let segment = Fixtures.plainSegment
        let segmentV1 = Fixtures.segment(nonUTF8: false)
        let baseline = Fixtures.plainBaseline
        let record = Fixtures.progressRecord

        return [
            ("segment-v2", input(.segment, segment)),
            ("segment-v1", input(.segment, segmentV1)),
            ("segment-framed-stored", input(.segmentFramed, framedSegmentInput(segment, stored: true))),
            ("segment-framed-deflated", input(.segmentFramed, framedSegmentInput(segmentV1, stored: false))),
            ("baseline", input(.baseline, pieces + baseline)),
            ("baseline-whole", input(.baseline, [0, 255] + baseline)),
            ("baseline-framed-stored", input(.baselineFramed, framedBaselineInput(baseline, stored: true))),
            ("baseline-framed-deflated", input(.baselineFramed, framedBaselineInput(baseline, stored: false))),
            ("progress-record", input(.progressRecord, record)),
            ("progress-record-framed", input(.progressRecordFramed, Array(record[8..<10]) + Array(record[14..<record.count - 4]))),
            ("sealed-header", input(.sealedHeader, Fixtures.sealedSegment)),
            ("sealed-segment", input(.sealedSegment, Fixtures.sealedSegment)),
            ("sealed-progress-record", input(.sealedProgressRecord, Fixtures.sealedProgressRecord)),
            ("sealed-baseline", input(.sealedBaseline, pieces + Fixtures.sealedBaseline)),
            // No changes: each opens; the fuzzer adds the (position, value) triples.
            ("sealed-mutated-segment", input(.sealedMutated, [0] + pieces)),
            ("sealed-mutated-progress-record", input(.sealedMutated, [1] + pieces)),
            ("sealed-mutated-baseline", input(.sealedMutated, [2] + pieces)),
            ("seal-round-trip-segment", input(.sealRoundTrip, [0] + pieces + segment)),
            ("seal-round-trip-progress-record", input(.sealRoundTrip, [1] + pieces + record)),
            ("seal-round-trip-baseline", input(.sealRoundTrip, [2] + pieces + baseline)),
            ("device-slot", input(.deviceSlot, Fixtures.deviceSlot)),
            ("device-slot-mutated", input(.deviceSlotMutated, [])),
        ]
    }

    /// The segment mode's layout for `segment`: its header fields, and its body inflated and stored
    /// (or its compressed body as it is, with the length).
    static func framedSegmentInput(_ segment: [UInt8], stored: Bool) -> [UInt8] {
        let version = readLittleEndian(UInt16.self, segment, at: 8)
        let headerEnd = 12 + Int(readLittleEndian(UInt16.self, segment, at: 10))
        let fields = Array(segment[12..<headerEnd - 4])
        let length = readLittleEndian(UInt64.self, segment, at: segment.count - 12)
        let compressed = Array(segment[headerEnd..<segment.count - 12])
        var out: [UInt8] = [UInt8(version & 3) | (stored ? 0 : 4)]
        out.appendLittleEndian(UInt16(fields.count))
        out += fields
        return out + body(of: segment, from: headerEnd, compressed: compressed, length: length, stored: stored)
    }

    /// A framed mode's body part: the body inflated (the harness stores it again), or the compressed body
    /// as it is after its uncompressed length.
    private static func body(of object: [UInt8], from headerEnd: Int, compressed: [UInt8], length: UInt64, stored: Bool) -> [UInt8] {
        if stored { return ZlibProbe.inflatedPrefix(object, from: headerEnd, limit: Int(length)) ?? [] }
        var out: [UInt8] = []
        out.appendLittleEndian(UInt32(length))
        return out + compressed
    }

    /// The framed baseline mode's layout for `baseline`, read in chunks of 7 bytes.
    static func framedBaselineInput(_ baseline: [UInt8], stored: Bool) -> [UInt8] {
        let headerEnd = 14 + Int(readLittleEndian(UInt32.self, baseline, at: 10))
        let fields = Array(baseline[14..<headerEnd - 4])
        let rows = readLittleEndian(UInt64.self, baseline, at: baseline.count - 20)
        let length = readLittleEndian(UInt64.self, baseline, at: baseline.count - 12)
        let compressed = Array(baseline[headerEnd..<baseline.count - 20])
        var out: [UInt8] = [(stored ? 0 : 4) | 1 << 3]
        out.appendLittleEndian(UInt16(rows))
        out.appendLittleEndian(UInt16(fields.count))
        out += fields
        return out + body(of: baseline, from: headerEnd, compressed: compressed, length: length, stored: stored)
    }

    /// Writes every seed into a folder of its mode's name (LOGSYNC_FUZZ_MODE's value) in `folder`, made
    /// if missing; returns the paths written, relative to `folder`.
    static func write(into folder: String) throws -> [String] {
        var names: [String] = []
        for seed in all() {
            let mode = Mode(rawValue: seed.bytes[0])!
            let directory = URL(fileURLWithPath: folder).appendingPathComponent(mode.description)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data(seed.bytes).write(to: directory.appendingPathComponent(seed.name))
            names.append("\(mode)/\(seed.name)")
        }
        return names
    }

    static func read(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }
}
