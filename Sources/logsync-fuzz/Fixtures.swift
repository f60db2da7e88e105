import LogsyncCore
import LogsyncSeal

/// What every run shares, made once: the fixed keyring (so that the fuzzer gets past a sealed header's
/// key id and opens what the fixtures seal), small limits, and one valid object of each kind.
enum Fixtures {
    static let account = "fuzz"
    static let node = NodeID("0f0f0f0f-fuzz-4000-8000-000000000001")
    static let otherNode = NodeID("0f0f0f0f-fuzz-4000-8000-000000000002")
    /// What the sealed baseline's name says (a BaselineOpener checks its header against them).
    static let baselineTransactionCount: UInt64 = 3
    static let baselineFrontierDigest: UInt64 = 0xF0F0_1234_5678_9ABC

    /// Small, so that whatever an input claims, allocations stay bounded (the inputs are at most 64 KiB).
    static let limits = SegmentLimits(
        maxSegmentBytes: 1 << 18, maxUncompressedBodyBytes: 1 << 20, maxTransactions: 1_000, maxChangesPerTransaction: 1_000,
        maxValuesPerChange: 64, maxStringBytes: 1 << 16, maxNames: 1_024)
    /// The most a sealed segment or progress record may be: the limit a carrier reads with, plus room.
    static let maximumSealedBytes = 1 << 18

    static let keyring: SealKeyring = {
        do {
            let accountKey = try AccountKey(bytes: (0..<32).map { UInt8($0) &* 7 &+ 1 })
            let signingKey = try NodeSigningKey(rawRepresentation: (0..<32).map { UInt8($0) &* 13 &+ 5 })
            return SealKeyring(account: account, accountKey: accountKey, signingKey: signingKey)
        } catch {
            fatalError("logsync-fuzz: the fixed keyring: \(error)")
        }
    }()

    static func transactions(nonUTF8: Bool) -> [LogTransaction] {
        let base = HLCTimestamp(physicalMilliseconds: 1_760_000_000_000, logical: 0).rawValue
        var values: [String: DatabaseValue] = [
            "title": .text("a note"), "rank": .integer(-42), "score": .real(2.5), "body": .blob([0, 1, 2, 255]),
            "ref": .text("6f1c2a34-5b6d-4e7f-8a9b-0c1d2e3f4a5b"), "gone": .null,
        ]
        if nonUTF8 { values["raw"] = DatabaseValue(textBytes: [0xC3, 0x28]) }
        return [
            LogTransaction(
                sequence: 1, timestamp: HLCTimestamp(rawValue: base + 1), author: "fuzzer", contextName: "app",
                changes: [LogChange(entity: "Note", primaryKey: .text("n1"), kind: .insert, causalLength: 1, values: values)]),
            LogTransaction(
                sequence: 2, timestamp: HLCTimestamp(rawValue: base + 2), author: nil, contextName: nil,
                changes: [
                    LogChange(entity: "Note", primaryKey: .text("n1"), kind: .update, causalLength: 1, values: ["rank": .integer(7)]),
                    LogChange(entity: "Tag", primaryKey: .integer(9), kind: .insert, causalLength: 1, values: ["name": .text("x")]),
                ]),
            LogTransaction(
                sequence: 3, timestamp: HLCTimestamp(rawValue: base + 3), author: "fuzzer", contextName: nil,
                changes: [LogChange(entity: "Tag", primaryKey: .integer(9), kind: .delete, causalLength: 2)]),
        ]
    }

    static func segment(nonUTF8: Bool) -> [UInt8] {
        do {
            return try SegmentEncoder.encode(
                schemaVersion: 1, account: account, node: node, transactions: transactions(nonUTF8: nonUTF8), limits: limits)
        } catch {
            fatalError("logsync-fuzz: the fixture segment: \(error)")
        }
    }

    /// A segment of format 2 (it holds a non-UTF-8 text value).
    static let plainSegment = segment(nonUTF8: true)

    static let plainBaseline: [UInt8] = {
        let clock = Clock(HLCTimestamp(rawValue: 1 << 40), node)
        let rows = [
            BaselineRow(
                key: RowKey("Note", .text("n1")),
                state: RowState(
                    causalLength: 1,
                    columns: [
                        "title": Register(.text("a note"), clock), "rank": Register(.integer(7), clock), "score": Register(.real(2.5), clock),
                        "body": Register(.blob([9, 8]), clock), "raw": Register(DatabaseValue(textBytes: [0xFF]), clock),
                        "gone": Register(.null, Clock(HLCTimestamp(rawValue: 1 << 41), otherNode)),
                    ])),
            BaselineRow(key: RowKey("Tag", .integer(9)), state: RowState(causalLength: 2, deletedAt: clock)),
            BaselineRow(key: RowKey("Tag", .integer(10)), state: RowState(causalLength: 1, columns: ["name": Register(.text("y"), clock)])),
        ]
        do {
            let encoder = try BaselineEncoder(
                header: BaselineHeader(schemaVersion: 1, account: account, frontier: Frontier([node: 3, otherNode: 1])))
            var bytes: [UInt8] = []
            for row in rows {
                try encoder.append(row)
                bytes += encoder.takeOutput()
            }
            return bytes + (try encoder.finish())
        } catch {
            fatalError("logsync-fuzz: the fixture baseline: \(error)")
        }
    }()

    static let progressRecord = ProgressRecord(
        account: account, node: node, applied: Frontier([node: 3, otherNode: 5]), prunedThrough: 1, activeAtMilliseconds: 1_760_000_000_000,
        schemaVersion: 1
    ).encoded()

    static let sealedSegment: [UInt8] = seal(.segment, first: 1, last: 3, plainSegment)
    static let sealedProgressRecord: [UInt8] = seal(.progressRecord, first: 0, last: 0, progressRecord)
    /// A progress slot: the sealed record, the fixed signer's card and a roster of three members.
    static let deviceSlot: [UInt8] = {
        do {
            return try DeviceSlotDecoding.sample(content: progressRecord, node: node, keyring: keyring)
        } catch {
            fatalError("logsync-fuzz: the device slot: \(error)")
        }
    }()
    /// The plain baseline sealed in three chunks.
    static let sealedBaseline: [UInt8] = sealBaseline(plainBaseline, chunkSizes: [40, 17])

    static func seal(_ kind: SealedHeader.Kind, first: UInt64, last: UInt64, _ content: [UInt8]) -> [UInt8] {
        do {
            return try Sealer.seal(kind, first: first, last: last, node: node, content: content, keyring: keyring).bytes
        } catch {
            fatalError("logsync-fuzz: sealing failed: \(error)")
        }
    }

    /// `content` sealed as the fixed baseline name's, in chunks of the sizes given (cycled), the last
    /// chunk marked last.
    static func sealBaseline(_ content: [UInt8], chunkSizes: [Int]) -> [UInt8] {
        do {
            var sealer = try BaselineSealer(
                transactionCount: baselineTransactionCount, frontierDigest: baselineFrontierDigest, node: node, keyring: keyring)
            let chunks = split(content, sizes: chunkSizes)
            var out: [UInt8] = []
            for (index, chunk) in chunks.enumerated() { out += try sealer.seal(chunk, last: index == chunks.count - 1) }
            return out
        } catch {
            fatalError("logsync-fuzz: sealing a baseline failed: \(error)")
        }
    }

    /// Makes every fixture now (libFuzzer's first inputs then measure the decoders, not the set-up).
    static func prepare() {
        _ = (keyring, plainSegment, plainBaseline, progressRecord, sealedSegment, sealedProgressRecord, sealedBaseline)
    }
}

/// `bytes` cut in pieces of the sizes given, cycled (each at least 1); one empty piece for no bytes.
func split(_ bytes: [UInt8], sizes: [Int]) -> [[UInt8]] {
    guard !bytes.isEmpty else { return [[]] }
    var pieces: [[UInt8]] = []
    var start = 0
    var index = 0
    while start < bytes.count {
        let size = max(1, sizes.isEmpty ? bytes.count : sizes[index % sizes.count])
        let end = min(bytes.count, start + size)
        pieces.append(Array(bytes[start..<end]))
        start = end
        index += 1
    }
    return pieces
}
