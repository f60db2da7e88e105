import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing

/// One real store of the simulation, with the log transactions it has exported so far.
final class SimulatedStore {
    static let schema = Schema(version: 1, entities: [
        Entity("Folder", primaryKey: PrimaryKey("id", .uuidBlob), attributes: [Attribute("name", .text)]),
        Entity("Label", primaryKey: PrimaryKey("id", .uuidBlob), attributes: [Attribute("name", .text)], uniqueKeys: [["name"]]),
        Entity(
            "Note", primaryKey: PrimaryKey("id", .uuidBlob),
            attributes: [Attribute("title", .text), Attribute("rank", .integer, optional: false, default: 0)],
            relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade), Relationship("label", to: "Label", deleteRule: .nullify)]),
    ])

    let store: Store
    var exported: [LogTransaction] = []
    /// How many of each other node's transactions this store has applied.
    var applied: [NodeID: Int] = [:]

    init(directory: TemporaryDirectory, name: String) throws {
        store = try Store(path: directory.file("\(name).sqlite"), schema: Self.schema)
    }

    var id: NodeID { store.node }

    func export() throws {
        _ = try store.exportLocal { exported.append($0) }
    }

    func apply(_ transactions: ArraySlice<LogTransaction>, from origin: NodeID) throws {
        try store.applyRemote(Array(transactions), from: origin) { exported.append($0) }
    }

    func keys(_ entity: String) throws -> [DatabaseValue] {
        try store.read("SELECT id FROM \(entity) ORDER BY id").map { $0[0] }
    }

    /// A few local operations through the public write API, with real SQL and the real triggers.
    func write<R: RandomNumberGenerator>(using rng: inout R) throws {
        let folders = try keys("Folder")
        let labels = try keys("Label")
        let notes = try keys("Note")
        func newKey() -> DatabaseValue { .blob((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        func pick(_ keys: [DatabaseValue]) -> DatabaseValue { keys.randomElement(using: &rng) ?? .null }
        let roll = Int.random(in: 0..<100, using: &rng)
        try store.write(author: "sim") { tx in
            switch roll {
            case 0..<12:
                try tx.execute("INSERT INTO Folder(id, name) VALUES (?, ?)", [newKey(), .text("f\(Int.random(in: 0..<5, using: &rng))")])
            case 12..<22:
                let name = DatabaseValue.text("l\(Int.random(in: 0..<4, using: &rng))")
                if try tx.rows("SELECT 1 FROM Label WHERE name = ?", [name]).isEmpty {
                    try tx.execute("INSERT INTO Label(id, name) VALUES (?, ?)", [newKey(), name])
                }
            case 22..<45:
                try tx.execute(
                    "INSERT INTO Note(id, title, rank, folder, label) VALUES (?, ?, ?, ?, ?)",
                    [newKey(), .text("t\(Int.random(in: 0..<100, using: &rng))"), .integer(Int64.random(in: 0..<9, using: &rng)), pick(folders), pick(labels)])
            case 45..<70:
                guard let note = notes.randomElement(using: &rng) else { return }
                var sets: [(String, DatabaseValue)] = []
                if Bool.random(using: &rng) { sets.append(("title", .text("t\(Int.random(in: 0..<100, using: &rng))"))) }
                if Bool.random(using: &rng) { sets.append(("rank", .integer(Int64.random(in: 0..<9, using: &rng)))) }
                if Int.random(in: 0..<4, using: &rng) == 0 { sets.append(("folder", pick(folders))) }
                if Int.random(in: 0..<4, using: &rng) == 0 { sets.append(("label", pick(labels))) }
                guard !sets.isEmpty else { return }
                try tx.execute(
                    "UPDATE Note SET " + sets.map { "\($0.0) = ?" }.joined(separator: ", ") + " WHERE id = ?", sets.map(\.1) + [note])
            case 70..<85:
                let entity = ["Folder", "Label", "Note", "Note"].randomElement(using: &rng)!
                let candidates = entity == "Folder" ? folders : entity == "Label" ? labels : notes
                guard let key = candidates.randomElement(using: &rng) else { return }
                try tx.execute("DELETE FROM \(entity) WHERE id = ?", [key])
            default:
                // Re-insert a row this store knows as deleted, with the same key.
                let deleted = try tx.rows(
                    "SELECT e.name, r.pk FROM _ls_row r JOIN _ls_entity e ON e.id = r.entity WHERE r.cl % 2 = 0 AND e.name != 'Label' "
                        + "AND r.pk NOT IN (SELECT id FROM Folder UNION ALL SELECT id FROM Note) ORDER BY r.pk")
                guard let row = deleted.randomElement(using: &rng), case .text(let entity) = row[0] else { return }
                if entity == "Folder" {
                    try tx.execute("INSERT INTO Folder(id, name) VALUES (?, 'again')", [row[1]])
                } else {
                    try tx.execute("INSERT INTO Note(id, title, rank, folder) VALUES (?, 'back', 1, ?)", [row[1], pick(folders)])
                }
            }
        }
    }
}

@Suite("Convergence of real stores")
struct StoreConvergenceTests {
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_STORE_SEEDS", default: 12, from: 0x5EED) }

    @Test("stores writing concurrently and exchanging logs in per-node order with re-deliveries converge to the reference")
    func storesConverge() async throws {
        try await onOwnThread { try self.storesConvergeOnOwnThread() }
    }

    func storesConvergeOnOwnThread() throws {
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let directory = try TemporaryDirectory("conv")
            let count = Int.random(in: 3...4, using: &rng)
            let nodes = try (0..<count).map { try SimulatedStore(directory: directory, name: "n\($0)") }

            func deliver(to receiver: SimulatedStore, from origin: SimulatedStore, upTo limit: Int) throws {
                let done = receiver.applied[origin.id] ?? 0
                guard limit > done else { return }
                // Sometimes re-deliver some already applied transactions: merging is idempotent.
                let start = Int.random(in: 0..<4, using: &rng) == 0 ? max(0, done - 2) : done
                try receiver.apply(origin.exported[start..<limit], from: origin.id)
                receiver.applied[origin.id] = limit
            }

            for _ in 0..<Int.random(in: 25...50, using: &rng) {
                let writer = nodes.randomElement(using: &rng)!
                try writer.write(using: &rng)
                if Int.random(in: 0..<3, using: &rng) == 0 {
                    let origin = nodes.randomElement(using: &rng)!
                    try origin.export()
                    let receiver = nodes.randomElement(using: &rng)!
                    if receiver !== origin, !origin.exported.isEmpty {
                        try deliver(to: receiver, from: origin, upTo: Int.random(in: 0...origin.exported.count, using: &rng))
                    }
                }
            }
            for node in nodes { try node.export() }
            for receiver in nodes.shuffled(using: &rng) {
                for origin in nodes.shuffled(using: &rng) where origin !== receiver {
                    try deliver(to: receiver, from: origin, upTo: origin.exported.count)
                }
            }
            // Applying folds local history first: nothing new may have been exported by then.
            for node in nodes {
                try node.export()
                for origin in nodes where origin !== node {
                    #expect((node.applied[origin.id] ?? 0) == origin.exported.count, "seed \(seed): late local history")
                }
            }

            var reference = MergeState()
            for node in nodes {
                for transaction in node.exported { reference.apply(transaction, from: node.id) }
            }
            let expected = reference.project(SimulatedStore.schema)
            for node in nodes {
                let actual = try node.store.syncedTables()
                #expect(actual == expected, "seed \(seed): store \(node.id) differs from the reference\n\(diff(actual, expected))")
            }
        }
    }

    private func diff(_ actual: Projection, _ expected: Projection) -> String {
        var lines: [String] = []
        for (entity, table) in expected.tables {
            let other = actual.tables[entity] ?? [:]
            for (key, row) in table where other[key] != row { lines.append("  \(entity) \(key): store \(String(describing: other[key])) expected \(row)") }
            for (key, row) in other where table[key] == nil { lines.append("  \(entity) \(key): store has \(row), expected none") }
        }
        return lines.prefix(10).joined(separator: "\n")
    }
}
