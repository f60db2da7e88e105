import Foundation
import LogsyncCore
import LogsyncTestKit
import Testing

/// A node of the simulation: it writes against what it can see (its own projection), as an app would,
/// including the local consequences its store's delete-rule triggers would add.
struct SimulatedNode {
    static let schema = Schema.convergence

    let id: NodeID
    var state = MergeState()
    var clock = HybridLogicalClock()
    var physical: UInt64
    var sequence: UInt64 = 0
    var log: [LogTransaction] = []

    init(id: NodeID, physical: UInt64) {
        self.id = id
        self.physical = physical
    }

    mutating func receive(_ transaction: LogTransaction, from node: NodeID) {
        clock.observe(transaction.timestamp, physicalMilliseconds: physical)
        state.apply(transaction, from: node)
    }

    /// One local transaction of 1–3 operations; returns nil when nothing applicable was generated.
    mutating func write<R: RandomNumberGenerator>(using rng: inout R) -> LogTransaction? {
        physical += UInt64.random(in: 0...3, using: &rng)
        var changes: [LogChange] = []
        var scratch = state
        let stamp = clock.tick(physicalMilliseconds: physical)
        let clockValue = Clock(stamp, id)
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let view = scratch.project(Self.schema)
            let generated = operation(view: view, state: scratch, using: &rng)
            for change in generated { scratch.rows_merge(change, at: clockValue) }
            changes += generated
        }
        guard !changes.isEmpty else { return nil }
        sequence += 1
        let transaction = LogTransaction(sequence: sequence, timestamp: stamp, author: "n", contextName: nil, changes: changes)
        state.apply(transaction, from: id)
        log.append(transaction)
        return transaction
    }

    private func newKey<R: RandomNumberGenerator>(using rng: inout R) -> DatabaseValue {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
        return .blob(bytes)
    }

    private func operation<R: RandomNumberGenerator>(view: Projection, state: MergeState, using rng: inout R) -> [LogChange] {
        let folders = Array((view.tables["Folder"] ?? [:]).keys)
        let labels = Array((view.tables["Label"] ?? [:]).keys)
        let notes = Array((view.tables["Note"] ?? [:]).keys)
        let labelNames = Set((view.tables["Label"] ?? [:]).values.compactMap { $0["name"] })
        func pick(_ keys: [DatabaseValue]) -> DatabaseValue { keys.isEmpty ? .null : keys.randomElement(using: &rng)! }
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<12:
            return [LogChange(entity: "Folder", primaryKey: newKey(using: &rng), kind: .insert, causalLength: 1,
                              values: ["name": .text("f\(Int.random(in: 0..<5, using: &rng))")])]
        case 12..<22:
            // Names from a small pool: nodes create the same label concurrently (unique-key collisions).
            let name = DatabaseValue.text("l\(Int.random(in: 0..<4, using: &rng))")
            guard !labelNames.contains(name) else { return [] }
            return [LogChange(entity: "Label", primaryKey: newKey(using: &rng), kind: .insert, causalLength: 1, values: ["name": name])]
        case 22..<45:
            return [LogChange(entity: "Note", primaryKey: newKey(using: &rng), kind: .insert, causalLength: 1,
                              values: ["title": .text("t\(Int.random(in: 0..<100, using: &rng))"), "rank": .integer(Int64.random(in: 0..<9, using: &rng)),
                                       "folder": pick(folders), "label": pick(labels)])]
        case 45..<70:
            guard let note = notes.randomElement(using: &rng), let row = state[RowKey("Note", note)] else { return [] }
            var values: [String: DatabaseValue] = [:]
            if Bool.random(using: &rng) { values["title"] = .text("t\(Int.random(in: 0..<100, using: &rng))") }
            if Bool.random(using: &rng) { values["rank"] = .integer(Int64.random(in: 0..<9, using: &rng)) }
            if Int.random(in: 0..<4, using: &rng) == 0 { values["folder"] = pick(folders) }
            if Int.random(in: 0..<4, using: &rng) == 0 { values["label"] = pick(labels) }
            guard !values.isEmpty else { return [] }
            return [LogChange(entity: "Note", primaryKey: note, kind: .update, causalLength: row.causalLength, values: values)]
        case 70..<85:
            // Delete a visible row, with what the store's triggers add: cascade to notes of a folder,
            // nullify notes' label.
            let entity = ["Folder", "Label", "Note", "Note"].randomElement(using: &rng)!
            guard let key = (view.tables[entity] ?? [:]).keys.randomElement(using: &rng), let row = state[RowKey(entity, key)] else { return [] }
            var changes = [LogChange(entity: entity, primaryKey: key, kind: .delete, causalLength: row.causalLength + 1)]
            for (note, values) in view.tables["Note"] ?? [:] {
                guard let noteRow = state[RowKey("Note", note)] else { continue }
                if entity == "Folder", values["folder"] == key {
                    changes.append(LogChange(entity: "Note", primaryKey: note, kind: .delete, causalLength: noteRow.causalLength + 1))
                } else if entity == "Label", values["label"] == key {
                    changes.append(LogChange(entity: "Note", primaryKey: note, kind: .update, causalLength: noteRow.causalLength, values: ["label": .null]))
                }
            }
            return changes
        default:
            // Re-insert a row this node knows as deleted.
            let deleted = state.rows.filter { !$0.value.exists && $0.key.entity != "Label" }.map(\.key).sorted()
            guard let key = deleted.randomElement(using: &rng), let row = state[key] else { return [] }
            let values: [String: DatabaseValue] =
                key.entity == "Folder"
                ? ["name": .text("again")]
                : ["title": .text("back"), "rank": .integer(1), "folder": pick(folders), "label": .null]
            return [LogChange(entity: key.entity, primaryKey: key.primaryKey, kind: .insert, causalLength: row.causalLength + 1, values: values)]
        }
    }
}

extension MergeState {
    /// Applies a single change, for building a transaction step by step.
    mutating func rows_merge(_ change: LogChange, at clock: Clock) {
        apply(LogTransaction(sequence: 0, timestamp: clock.timestamp, author: nil, contextName: nil, changes: [change]), from: clock.node)
    }
}

@Suite("Merge rules: order-independent convergence")
struct MergePropertyTests {
    /// Seeds run in CI; `LOGSYNC_PROPERTY_SEEDS=N` runs N seeds for long runs.
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_PROPERTY_SEEDS", default: 150, from: 0xC0FFEE) }

    @Test("random multi-node histories delivered in random order with duplicates converge to the reference")
    func convergence() async throws {
        try await onOwnThread { try self.convergenceOnOwnThread() }
    }

    func convergenceOnOwnThread() throws {
        var collisions = 0
        var cascades = 0
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let nodeCount = Int.random(in: 3...5, using: &rng)
            var nodes = (0..<nodeCount).map { SimulatedNode(id: NodeID("node-\($0)"), physical: 1_000 + UInt64.random(in: 0...50, using: &rng)) }
            var everything: [(NodeID, LogTransaction)] = []
            // Interleave local writes with partial, shuffled, duplicated delivery.
            for _ in 0..<Int.random(in: 20...60, using: &rng) {
                let writer = Int.random(in: 0..<nodeCount, using: &rng)
                if let transaction = nodes[writer].write(using: &rng) { everything.append((nodes[writer].id, transaction)) }
                if Int.random(in: 0..<3, using: &rng) == 0, !everything.isEmpty {
                    let receiver = Int.random(in: 0..<nodeCount, using: &rng)
                    for _ in 0..<Int.random(in: 1...6, using: &rng) {
                        let (origin, transaction) = everything.randomElement(using: &rng)!
                        nodes[receiver].receive(transaction, from: origin)
                    }
                }
            }
            // Full sync: everyone receives everything, in its own shuffled order, some twice.
            for index in nodes.indices {
                var delivery = everything + everything.filter { _ in Int.random(in: 0..<4, using: &rng) == 0 }
                delivery.shuffle(using: &rng)
                for (origin, transaction) in delivery { nodes[index].receive(transaction, from: origin) }
            }
            var reference = MergeState()
            for (origin, transaction) in everything.sorted(by: { ($0.0, $0.1.sequence) < ($1.0, $1.1.sequence) }) {
                reference.apply(transaction, from: origin)
            }
            let expected = reference.project(SimulatedNode.schema)
            for node in nodes {
                #expect(node.state == reference, "seed \(seed): \(node.id) state differs")
                #expect(node.state.project(SimulatedNode.schema) == expected, "seed \(seed): \(node.id) projection differs")
            }
            try checkInvariants(expected, state: reference, seed: seed)
            collisions += reference.rows.filter { $0.key.entity == "Label" && $0.value.exists }.count - (expected.tables["Label"]?.count ?? 0)
            cascades += reference.rows.filter { $0.key.entity == "Note" && $0.value.exists }.count - (expected.tables["Note"]?.count ?? 0)
        }
        print("merge property: \(Self.seeds.count) seeds, \(collisions) unique-key losers, \(cascades) notes hidden by cascade")
        #expect(collisions > 0, "the generator must produce unique-key collisions")
        #expect(cascades > 0, "the generator must produce cascades across nodes")
    }

    /// What must hold in any projection: unique keys unique, no reference to a known invisible row.
    private func checkInvariants(_ projection: Projection, state: MergeState, seed: UInt64) throws {
        let names = (projection.tables["Label"] ?? [:]).values.compactMap { $0["name"] }.filter { !$0.isNull }
        #expect(Set(names).count == names.count, "seed \(seed): duplicate label names")
        for (_, note) in projection.tables["Note"] ?? [:] {
            for (column, entity) in [("folder", "Folder"), ("label", "Label")] {
                guard let target = note[column], !target.isNull else { continue }
                let known = state[RowKey(entity, target)] != nil
                #expect(!known || projection.row(entity, target) != nil, "seed \(seed): dangling \(column)")
            }
        }
    }

    @Test("delete and re-insert converge by causal length; concurrent column writes by clock")
    func causalLengthAndLastWriterWins() {
        let a = NodeID("a"), b = NodeID("b")
        let key = DatabaseValue.text("k")
        let insert = LogTransaction(sequence: 1, timestamp: HLCTimestamp(rawValue: 10), author: nil, contextName: nil,
                                    changes: [LogChange(entity: "Folder", primaryKey: key, kind: .insert, causalLength: 1, values: ["name": "x"])])
        let delete = LogTransaction(sequence: 2, timestamp: HLCTimestamp(rawValue: 20), author: nil, contextName: nil,
                                    changes: [LogChange(entity: "Folder", primaryKey: key, kind: .delete, causalLength: 2)])
        let staleUpdate = LogTransaction(sequence: 1, timestamp: HLCTimestamp(rawValue: 30), author: nil, contextName: nil,
                                         changes: [LogChange(entity: "Folder", primaryKey: key, kind: .update, causalLength: 1, values: ["name": "late"])])
        let reinsert = LogTransaction(sequence: 3, timestamp: HLCTimestamp(rawValue: 25), author: nil, contextName: nil,
                                      changes: [LogChange(entity: "Folder", primaryKey: key, kind: .insert, causalLength: 3, values: ["name": "back"])])
        var forward = MergeState()
        for (node, tx) in [(a, insert), (a, delete), (b, staleUpdate), (a, reinsert)] { forward.apply(tx, from: node) }
        var backward = MergeState()
        for (node, tx) in [(a, reinsert), (b, staleUpdate), (a, delete), (a, insert)] { backward.apply(tx, from: node) }
        #expect(forward == backward)
        // The update raced the delete at causal length 1 and lost, although its clock is later.
        #expect(forward.project(SimulatedNode.schema).row("Folder", key) == ["name": "back"])

        var tie = MergeState()
        let sameTime = HLCTimestamp(rawValue: 40)
        for node in [b, a] {
            tie.apply(LogTransaction(sequence: 4, timestamp: sameTime, author: nil, contextName: nil,
                                     changes: [LogChange(entity: "Folder", primaryKey: key, kind: .update, causalLength: 3, values: ["name": .text(node.rawValue)])]), from: node)
        }
        #expect(tie.project(SimulatedNode.schema).row("Folder", key) == ["name": "b"], "equal clocks: the higher node id wins")
    }
}
