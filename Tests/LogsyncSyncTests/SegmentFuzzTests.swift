import Foundation
@testable import LogsyncCore
import LogsyncStore
@testable import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Hostile segments, well framed (valid CRCs, a body that inflates to the stated length) but with
/// any content: huge varints, causal lengths past SQLite's integers, unknown entities and columns, keys
/// of the wrong shape, values of the wrong type, NULLs where a value is required, duplicate rows, counts
/// larger than the body, random byte damage. Imported next to a good node's segments, each must be
/// refused with a reason (or, when a mutation happens to make a valid segment, applied with the declared
/// types intact), nothing may crash or hang, and the good node's segments must be applied every round.
@Suite("Hostile segments: fuzzed imports")
struct SegmentFuzzTests {
    /// Seeds run in CI; `LOGSYNC_SEGMENT_FUZZ_SEEDS=N` (or `N@FIRST`) for long runs (`docs/architecture.md`).
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_SEGMENT_FUZZ_SEEDS", default: 60, from: 0x5E6_F022) }

    /// A seeded hostile segment and what must become of it.
    struct Forgery {
        var bytes: [UInt8]
        var first: UInt64
        var last: UInt64
        /// False: it must be refused; true: the mutation may have made a valid segment.
        var mayPass: Bool
        var label: String
    }

    @Test("hostile segments next to good ones: no crash, each refused with a reason, the good node's segments applied", .timeLimit(.minutes(20)))
    func hostileImports() throws {
        var outcomes: [String: Int] = [:]
        // A fresh folder every 100 seeds: every refused node is read again each round, and a long run
        // would otherwise spend its time re-reading thousands of them.
        for chunk in stride(from: 0, to: Self.seeds.count, by: 100) {
            try Self.run(Array(Self.seeds[chunk..<min(chunk + 100, Self.seeds.count)]), outcomes: &outcomes)
        }
        if Self.seeds.count >= 20 {
            #expect(outcomes.keys.contains { $0.hasPrefix("refused: causal length") })
            #expect(outcomes.keys.contains { $0.hasPrefix("refused: unknown entity") })
        }
        print("segment fuzz: \(Self.seeds.count) seeds: \(outcomes.sorted { $0.key < $1.key })")
    }

    static func run(_ seeds: [UInt64], outcomes: inout [String: Int]) throws {
        let cluster = try SyncCluster("fuzz")
        let good = try cluster.store("good")
        let receiver = try cluster.store("receiver")
        let goodEngine = try cluster.engine(good)
        let engine = try cluster.engine(receiver)
        for seed in seeds {
            var rng = SeededRandom(seed: seed)
            try SyncCluster.randomWrite(good, using: &rng)
            _ = try goodEngine.sync()
            // Every seed's forgery comes from a node of its own: each is that node's first segment.
            let node = NodeID(Self.uuid(&rng))
            let forgery = try Self.forge(node: node, using: &rng)
            let folder = cluster.shared + "/default/" + node.rawValue
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let name = SegmentName(node: node, firstSequence: forgery.first, lastSequence: forgery.last)
            try Data(forgery.bytes).write(to: URL(fileURLWithPath: folder + "/" + name.fileName))

            let report: SyncReport
            do {
                report = try engine.sync()
            } catch {
                Issue.record("seed \(seed) (\(forgery.label)): the round failed: \(error)")
                continue
            }
            let applied = try receiver.sync.appliedSequence(from: node)
            let rejection = report.rejected.first { $0.name == name }
            if let rejection {
                #expect(!rejection.reason.isEmpty)
                #expect(applied == 0, "seed \(seed): a refused segment applied nothing")
                #expect(try receiver.sync.refusals().contains { $0.node == node && $0.reason == rejection.reason }, "seed \(seed): the refusal is recorded")
                outcomes["refused: " + forgery.label, default: 0] += 1
            } else if forgery.first != 1 {
                #expect(report.waiting[node] == 1, "seed \(seed): a segment after a gap waits")
                outcomes["waits: " + forgery.label, default: 0] += 1
            } else {
                #expect(forgery.mayPass, "seed \(seed) (\(forgery.label)) was accepted: \(report)")
                #expect(applied == forgery.last, "seed \(seed): an accepted segment is applied whole")
                outcomes["applied: " + forgery.label, default: 0] += 1
            }
            // The good node's history arrives every round, whatever else is in the folder.
            #expect(try receiver.sync.appliedSequence(from: NodeID(good.nodeID)) == (try good.sync.exportedSequence()), "seed \(seed): the good node is applied")
        }
        // The good node's rows all arrived, as it has them (the receiver may hold more: valid forgeries).
        #expect(try receiver.syncedTables() == (try good.syncedTables()).merging(with: try receiver.syncedTables()))
        // Whatever went through has the declared types.
        #expect(try receiver.read("SELECT count(*) FROM Note WHERE typeof(title) NOT IN ('text', 'null') OR typeof(rank) <> 'integer'") == [[.integer(0)]])
    }

    // MARK: - Forgeries

    static func uuid(_ rng: inout SeededRandom) -> String {
        let hex = Array("0123456789abcdef")
        return String((0..<36).map { [8, 13, 18, 23].contains($0) ? "-" : hex[Int(rng.next() % 16)] })
    }

    /// A good insert of the convergence schema's Note.
    static func goodChange(_ rng: inout SeededRandom) -> LogChange {
        LogChange(
            entity: "Note", primaryKey: .text(uuid(&rng)), kind: .insert, causalLength: 1,
            values: ["title": .text("t"), "rank": .integer(Int64(rng.next() % 5))])
    }

    static func forge(node: NodeID, using rng: inout SeededRandom) throws -> Forgery {
        var change = goodChange(&rng)
        let label: String
        switch rng.next() % 12 {
        case 0:
            let lengths: [UInt64] = [(1 << 62) + 1, 1 << 63, (1 << 63) + 5, .max]
            change.causalLength = lengths[Int(rng.next() % 4)]
            label = "causal length"
        case 1:
            change.entity = ["Secret", "note", "", "Note\u{0}", String(repeating: "E", count: 300)][Int(rng.next() % 5)]
            label = "unknown entity"
        case 2:
            change.values[["secret", "id", "Title", "rowid"][Int(rng.next() % 4)]] = .integer(1)
            label = "unknown column"
        case 3:
            let keys: [DatabaseValue] = [
                .null, .integer(7), .real(1.5), .blob([1, 2, 3]), .blob(Array(repeating: 0, count: 16)), .text("not-a-uuid"),
                .text(String(repeating: "z", count: 36)), .text("{" + uuid(&rng) + "}"), .nonUTF8Text([0xFF, 0xFE]),
                .text(String(uuid(&rng).dropLast()) + "\u{0}"),
            ]
            change.primaryKey = keys[Int(rng.next() % UInt64(keys.count))]
            label = "bad key"
        case 4:
            let wrong: [(String, DatabaseValue)] = [
                ("title", .blob([1, 2])), ("title", .integer(3)), ("title", .real(2.5)), ("rank", .text("yes")), ("rank", .real(1.5)),
                ("rank", .null), ("rank", .blob([])), ("folder", .integer(7)), ("folder", .text("x")), ("label", .blob(Array(repeating: 1, count: 16))),
                ("rank", .real(.nan)),
            ]
            let (column, value) = wrong[Int(rng.next() % UInt64(wrong.count))]
            change.values[column] = value
            label = "wrong type"
        case 5:
            // The same row twice in one transaction, and an update of a row never inserted: valid.
            let twice = LogTransaction(
                sequence: 1, timestamp: timestamp(), author: nil, contextName: nil,
                changes: [change, change, LogChange(entity: "Note", primaryKey: .text(uuid(&rng)), kind: .update, causalLength: 1, values: ["rank": 3])])
            return Forgery(bytes: try encode([twice], node: node), first: 1, last: 1, mayPass: true, label: "duplicate rows")
        case 6:
            // Sequences at the edge of what a store records: a gap, never a trap.
            let first = LogTransaction.maximumSequence - rng.next() % 3
            let transaction = LogTransaction(sequence: first, timestamp: timestamp(), author: nil, contextName: nil, changes: [change])
            return Forgery(bytes: try encode([transaction], node: node), first: first, last: first, mayPass: true, label: "huge sequence")
        case 7, 8:
            return try rawForgery(node: node, change: change, using: &rng)
        default:
            // Random damage to a good body, framed again.
            return try damagedForgery(node: node, using: &rng)
        }
        let transaction = LogTransaction(sequence: 1, timestamp: timestamp(), author: "forger", contextName: nil, changes: [goodChange(&rng), change])
        return Forgery(bytes: try encode([transaction], node: node), first: 1, last: 1, mayPass: false, label: label)
    }

    static func timestamp() -> HLCTimestamp {
        HLCTimestamp(physicalMilliseconds: UInt64(Date().timeIntervalSince1970 * 1000) - 5_000, logical: 0)
    }

    static func encode(_ transactions: [LogTransaction], node: NodeID) throws -> [UInt8] {
        try SegmentEncoder.encode(schemaVersion: 1, account: "default", node: node, transactions: transactions)
    }

    /// Bodies written byte by byte: counts larger than what follows, huge varints and lengths.
    static func rawForgery(node: NodeID, change: LogChange, using rng: inout SeededRandom) throws -> Forgery {
        var writer = ByteWriter()
        var encoder = BodyEncoder(limits: .default)
        let transaction = LogTransaction(sequence: 1, timestamp: timestamp(), author: nil, contextName: nil, changes: [change])
        try encoder.encode(transaction, into: &writer)
        var body = writer.bytes
        let label: String
        var transactionCount = 1
        switch rng.next() % 6 {
        case 0:
            // A change count far beyond the body.
            body = [0] + varint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue))) + [0] + varint(900_000) + body.suffix(from: body.count / 2)
            label = "count beyond the body"
        case 1:
            // The header promises more transactions than the body holds.
            transactionCount = 2 + Int(rng.next() % 1_000)
            label = "transaction count beyond the body"
        case 2:
            // A ten-byte varint where the change count goes.
            body = [0] + varint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue))) + [0] + Array(repeating: 0xFF, count: 9) + [0x01]
            label = "huge varint"
        case 3:
            // A text length of 2^62.
            body = [0] + varint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue))) + [0, 1, 0] + varint(1 << 62)
            label = "huge length"
        case 4:
            // The same column twice in one change.
            body = [0] + varint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue))) + [0, 1, 0, 4] + Array("Note".utf8)
                + [1, 1, 5] + Array(repeating: 0xAB, count: 16) + [2, 0, 4] + Array("rank".utf8) + [1, 2, 1, 2]
            label = "duplicate column"
        default:
            // A name reference past the table.
            body = [0] + varint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue))) + [0, 1] + varint(1 + rng.next() % 1_000_000)
            label = "name reference past the table"
        }
        return Forgery(bytes: try frame(body, node: node, transactionCount: transactionCount, timestamp: transaction.timestamp), first: 1,
                       last: UInt64(transactionCount), mayPass: false, label: label)
    }

    /// A good two-transaction body with a few bytes changed, inserted or removed, framed with valid checksums.
    static func damagedForgery(node: NodeID, using rng: inout SeededRandom) throws -> Forgery {
        var writer = ByteWriter()
        var encoder = BodyEncoder(limits: .default)
        var body: [UInt8] = []
        let stamp = timestamp()
        for sequence in 1...2 {
            let transaction = LogTransaction(
                sequence: UInt64(sequence), timestamp: stamp, author: "a", contextName: nil, changes: [goodChange(&rng), goodChange(&rng)])
            writer.removeAll()
            try encoder.encode(transaction, into: &writer)
            encoder.commit(transaction)
            body += writer.bytes
        }
        for _ in 0..<(1 + rng.next() % 4) {
            let position = Int(rng.next() % UInt64(body.count))
            switch rng.next() % 4 {
            case 0: body[position] = UInt8(truncatingIfNeeded: rng.next())
            case 1: body[position] ^= 1 << UInt8(rng.next() % 8)
            case 2: body.insert(UInt8(truncatingIfNeeded: rng.next()), at: position)
            default: body.remove(at: position)
            }
            if body.isEmpty { body = [0] }
        }
        return Forgery(bytes: try frame(body, node: node, transactionCount: 2, timestamp: stamp), first: 1, last: 2, mayPass: true, label: "damaged body")
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.writeVarint(value)
        return writer.bytes
    }

    /// A header, the body deflated, and a trailer: every checksum valid.
    static func frame(_ body: [UInt8], node: NodeID, transactionCount: Int, timestamp: HLCTimestamp) throws -> [UInt8] {
        let deflater = try Deflater()
        try deflater.write(body)
        let header = SegmentHeader(
            formatVersion: 1, schemaVersion: 1, account: "default", node: node, firstSequence: 1, lastSequence: UInt64(transactionCount),
            minTimestamp: timestamp, maxTimestamp: timestamp, transactionCount: transactionCount)
        return SegmentFormat.assemble(header: header, compressedBody: try deflater.finish(), uncompressedByteCount: body.count)
    }
}

extension Projection {
    /// These tables with `other`'s rows added where these have none: the good node's rows must all be in
    /// the receiver's, which may hold more (forgeries that happened to be valid).
    func merging(with other: Projection) -> Projection {
        var tables = self.tables
        for (entity, rows) in other.tables {
            tables[entity, default: [:]].merge(rows) { mine, _ in mine }
        }
        return Projection(tables: tables)
    }
}
