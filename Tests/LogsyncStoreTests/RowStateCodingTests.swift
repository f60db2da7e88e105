import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// The byte form of row states (`RowStateCoding.swift`): every state reads back as it was written, the
/// states of store format 4 still read, and a row written once costs one clock.
@Suite("Row state encoding")
struct RowStateCodingTests {
    static let schema = Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .text), Attribute("body", .text), Attribute("rank", .integer), Attribute("score", .real)])
    ])

    /// A store's `Note` entity and a node table that knows `nodes`.
    static func setUp(_ directory: TemporaryDirectory, nodes: [NodeID]) throws -> (Catalog.EntityInfo, NodeTable) {
        let path = directory.file("s.sqlite")
        let store = try Store(path: path, schema: schema)
        let info = try #require(store.catalog.byName["Note"])
        let connection = try Connection(path: path)
        var table = try NodeTable(connection: connection)
        for node in nodes { _ = try table.index(of: node, connection: connection) }
        return (info, table)
    }

    /// A store with one node: its directory (kept while the test runs), the node, `Note` and the node table.
    static func setUpOneNode() throws -> (TemporaryDirectory, NodeID, Catalog.EntityInfo, NodeTable) {
        let directory = try TemporaryDirectory("rowstate")
        let node = NodeID(UUID().uuidString.lowercased())
        let (info, table) = try setUp(directory, nodes: [node])
        return (directory, node, info, table)
    }

    static func roundTrip(_ state: RowState, info: Catalog.EntityInfo, nodes: NodeTable) throws -> (RowState, [UInt8]) {
        var bytes: [UInt8] = []
        try RowStateCoding.encode(state, info: info, into: &bytes) { node in try #require(nodes.knownIndex(of: node)) }
        return (try RowStateCoding.decode(bytes, causalLength: state.causalLength, info: info, nodes: nodes), bytes)
    }

    @Test("random states read back exactly: any columns, one clock or several, deleted or not, every kind of value")
    func randomStatesRoundTrip() throws {
        let directory = try TemporaryDirectory("rowstate")
        let nodes = (0..<3).map { _ in NodeID(UUID().uuidString.lowercased()) }
        let (info, table) = try Self.setUp(directory, nodes: nodes)
        var flagsSeen: Set<UInt8> = []
        for seed in propertySeeds("LOGSYNC_ROWSTATE_SEEDS", default: 2_000, from: 1) {
            var random = SeededRandom(seed: seed)
            func clock() -> Clock {
                Clock(HLCTimestamp(rawValue: UInt64.random(in: 1...4, using: &random) << 20), nodes.randomElement(using: &random)!)
            }
            func value() -> DatabaseValue {
                switch Int.random(in: 0..<6, using: &random) {
                case 0: return .null
                case 1: return .integer(Int64.random(in: .min ... .max, using: &random))
                case 2: return .real(Double.random(in: -1e9...1e9, using: &random))
                case 3: return .text(String(repeating: "é", count: Int.random(in: 0...200, using: &random)))
                case 4: return .nonUTF8Text([0xff, 0xfe, UInt8.random(in: 0...255, using: &random)])
                default: return .blob((0..<Int.random(in: 0...20, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                }
            }
            let shared = clock()
            let oneClock = Bool.random(using: &random)
            var columns: [String: Register] = [:]
            for name in info.columns where Int.random(in: 0..<4, using: &random) > 0 {
                columns[name] = Register(value(), oneClock ? shared : clock())
            }
            let causalLength = UInt64.random(in: 0...5, using: &random)
            let state = RowState(causalLength: causalLength, columns: columns, deletedAt: Bool.random(using: &random) ? clock() : nil)
            let (decoded, bytes) = try Self.roundTrip(state, info: info, nodes: table)
            #expect(decoded == state, "seed \(seed): \(bytes)")
            flagsSeen.insert(bytes[0])
        }
        // Every combination of the three flags was written (so each decoding branch ran).
        #expect(flagsSeen == Set(0...7))
    }

    @Test("a row written once stores its clock once and no column bits: 31 bytes fewer for four columns")
    func oneClockIsStoredOnce() throws {
        let (directory, node, info, table) = try Self.setUpOneNode()
        defer { withExtendedLifetime(directory) {} }
        let clock = Clock(HLCTimestamp(rawValue: 7 << 20), node)
        let values: [String: DatabaseValue] = ["title": .text("t"), "body": .text("b"), "rank": .integer(1), "score": .real(0.5)]
        let written = RowState(causalLength: 1, columns: values.mapValues { Register($0, clock) })
        let (decoded, bytes) = try Self.roundTrip(written, info: info, nodes: table)
        #expect(decoded == written)
        #expect(bytes[0] == RowStateCoding.Flags.sharedClock | RowStateCoding.Flags.everyColumn)
        // flags, count, clock (8 + 1), then the values: two texts of 3 bytes, an integer and a real of 9.
        #expect(bytes.count == 1 + 1 + 9 + 3 + 3 + 9 + 9)

        // One column written later: a clock per register again, bits left out while every column has one.
        var updated = written
        updated.columns["rank"] = Register(.integer(2), Clock(HLCTimestamp(rawValue: 8 << 20), node))
        let (decodedUpdate, updateBytes) = try Self.roundTrip(updated, info: info, nodes: table)
        #expect(decodedUpdate == updated)
        #expect(updateBytes[0] == RowStateCoding.Flags.everyColumn)
        #expect(updateBytes.count == bytes.count + 3 * 9)
    }

    @Test("states as store format 4 wrote them (a delete flag, then a bit and a clock per register) read the same")
    func formatFourStatesRead() throws {
        let (directory, node, info, table) = try Self.setUpOneNode()
        defer { withExtendedLifetime(directory) {} }
        let index = try #require(table.knownIndex(of: node))
        // Deleted at 9, then two registers: body (bit 1) = "x" at 5, score (bit 3) = 2.0 at 6.
        var bytes: [UInt8] = [1]
        RowStateCoding.appendFixed(9 << 20, to: &bytes)
        RowStateCoding.appendVarint(UInt64(index), to: &bytes)
        bytes.append(2)
        for (bit, timestamp, value) in [(1, UInt64(5), DatabaseValue.text("x")), (3, 6, .real(2.0))] {
            RowStateCoding.appendVarint(UInt64(bit), to: &bytes)
            RowStateCoding.appendFixed(timestamp << 20, to: &bytes)
            RowStateCoding.appendVarint(UInt64(index), to: &bytes)
            RowStateCoding.appendValue(value, to: &bytes)
        }
        let decoded = try RowStateCoding.decode(bytes, causalLength: 3, info: info, nodes: table)
        #expect(
            decoded
                == RowState(
                    causalLength: 3,
                    columns: [
                        "body": Register(.text("x"), Clock(HLCTimestamp(rawValue: 5 << 20), node)),
                        "score": Register(.real(2.0), Clock(HLCTimestamp(rawValue: 6 << 20), node)),
                    ],
                    deletedAt: Clock(HLCTimestamp(rawValue: 9 << 20), node)))
    }

    @Test("registers only for columns this store does not know: no shared clock is stored, and no node is looked up for one")
    func unknownColumnsStoreNoClock() throws {
        let (directory, node, info, table) = try Self.setUpOneNode()
        defer { withExtendedLifetime(directory) {} }
        let clock = Clock(HLCTimestamp(rawValue: 7 << 20), node)
        let deleted = Clock(HLCTimestamp(rawValue: 9 << 20), node)
        for deletedAt in [nil, deleted] {
            let state = RowState(causalLength: 3, columns: ["renamed elsewhere": Register(.text("x"), clock)], deletedAt: deletedAt)
            var bytes: [UInt8] = []
            var lookups = 0
            let known = table
            try RowStateCoding.encode(state, info: info, into: &bytes) { node in
                lookups += 1
                return try #require(known.knownIndex(of: node))
            }
            #expect(bytes[0] == (deletedAt == nil ? 0 : RowStateCoding.Flags.deleted))
            #expect(lookups == (deletedAt == nil ? 0 : 1), "only the delete's clock names a node")
            #expect(try RowStateCoding.decode(bytes, causalLength: 3, info: info, nodes: table) == RowState(causalLength: 3, deletedAt: deletedAt))
        }
        #expect(try Self.roundTrip(RowState(causalLength: 1), info: info, nodes: table) == (RowState(causalLength: 1), [0, 0]))
    }

    @Test("a damaged register count is refused, however large")
    func hugeCountIsRefused() throws {
        let (directory, node, info, table) = try Self.setUpOneNode()
        defer { withExtendedLifetime(directory) {} }
        let index = try #require(table.knownIndex(of: node))
        var bytes: [UInt8] = [RowStateCoding.Flags.sharedClock | RowStateCoding.Flags.everyColumn]
        RowStateCoding.appendVarint(UInt64.max >> 1, to: &bytes)
        RowStateCoding.appendFixed(7 << 20, to: &bytes)
        RowStateCoding.appendVarint(UInt64(index), to: &bytes)
        for _ in 0..<(info.columns.count + 1) { RowStateCoding.appendValue(.integer(1), to: &bytes) }
        #expect(throws: StoreError.self) { try RowStateCoding.decode(bytes, causalLength: 1, info: info, nodes: table) }
    }

    @Test("a state with flags this build does not know, or cut short, is reported as damaged")
    func damagedStatesAreRefused() throws {
        let (directory, node, info, table) = try Self.setUpOneNode()
        defer { withExtendedLifetime(directory) {} }
        let clock = Clock(HLCTimestamp(rawValue: 7 << 20), node)
        let (_, bytes) = try Self.roundTrip(
            RowState(causalLength: 1, columns: ["title": Register(.text("t"), clock), "body": Register(.text("b"), clock)]), info: info, nodes: table)
        for damaged in [[0x08] + bytes.dropFirst(), Array(bytes.dropLast()), Array(bytes.prefix(5))] {
            #expect(throws: StoreError.self) { try RowStateCoding.decode(damaged, causalLength: 1, info: info, nodes: table) }
        }
    }
}
