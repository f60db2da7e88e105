import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import Testing

/// A differential test of SQL written by programs that are not logsync: a seeded generator of statements
/// against the synced schema (every conflict clause, upserts, REPLACE, multi-row and subquery forms,
/// deletes with and without WHERE, rowids, transactions and savepoints, values with NULs, text that is
/// not UTF-8 and edge numbers) runs through plain SQLite connections with random `recursive_triggers` and
/// `foreign_keys`, on random nodes (a quarter of them through logsync's own connection instead), synced in
/// random order. Every node must end with the same tables,
/// byte for byte; when only one node wrote, with exactly the tables that node's writer left.
@Suite("Foreign SQL: differential property test")
struct ForeignSQLPropertyTests {
    /// Seeds run in CI; `LOGSYNC_FOREIGN_SQL_SEEDS=N` runs N seeds for long runs (`docs/history.md`).
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_FOREIGN_SQL_SEEDS", default: 40, from: 0xF0_5E_ED) }

    /// Unique keys, a cascade, a nullify, a deny, typed columns, and an entity nothing depends on.
    static let schema = Schema(version: 1, entities: [
        Entity("Owner", attributes: [Attribute("name", .text)]),
        Entity(
            "Folder", attributes: [Attribute("name", .text, preservedOnDelete: true)],
            relationships: [Relationship("owner", to: "Owner", deleteRule: .deny)]),
        Entity("Label", attributes: [Attribute("name", .text), Attribute("tone", .integer)], uniqueKeys: [["name"], ["tone"]]),
        Entity(
            "Note",
            attributes: [
                Attribute("title", .text, preservedOnDelete: true), Attribute("rank", .integer, optional: false, default: 0),
                Attribute("score", .real), Attribute("data", .blob),
            ],
            relationships: [
                Relationship("folder", to: "Folder", deleteRule: .cascade), Relationship("label", to: "Label", deleteRule: .nullify),
            ]),
        Entity("Memo", attributes: [Attribute("body", .text)]),
    ])

    @Test("any foreign SQL on any nodes, synced in any order: every node ends with the same tables, and the single writer's own")
    func foreignSQLConverges() async throws {
        try await onOwnThread { try self.foreignSQLConvergesOnOwnThread() }
    }

    func foreignSQLConvergesOnOwnThread() throws {
        var statements = 0
        var replaced = 0
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let cluster = try SyncCluster("fsql", schema: Self.schema)
            let count = Int.random(in: 2...3, using: &rng)
            let stores = try (0..<count).map { try cluster.store("n\($0)") }
            let foreign = try stores.map { store in
                let connection = try ForeignConnection(path: store.path)
                try connection.script("PRAGMA recursive_triggers = \(Bool.random(using: &rng) ? "ON" : "OFF")")
                try connection.script("PRAGMA foreign_keys = \(Bool.random(using: &rng) ? "ON" : "OFF")")
                return connection
            }
            // A third of the seeds have one writer and no sync until the end: then every node must hold
            // exactly what that writer left in its own tables.
            let singleWriter = Int.random(in: 0..<3, using: &rng) == 0
            var generator = ForeignSQLGenerator(rng: rng)
            for _ in 0..<Int.random(in: 20...60, using: &generator.rng) {
                let node = singleWriter ? 0 : Int.random(in: 0..<count, using: &generator.rng)
                if Int.random(in: 0..<4, using: &generator.rng) == 0 {
                    // The same SQL through logsync's own connection (recursive triggers on, displacement
                    // triggers compiled away): one statement, its own write transaction.
                    generator.trace.append("node \(node), through logsync:")
                    statements += try generator.run(on: stores[node], reading: foreign[node])
                } else {
                    generator.trace.append("node \(node):")
                    statements += try generator.run(on: foreign[node])
                }
                if !singleWriter, Int.random(in: 0..<4, using: &generator.rng) == 0 {
                    let syncing = Int.random(in: 0..<count, using: &generator.rng)
                    generator.trace.append("sync node \(syncing)")
                    _ = try cluster.engine(stores[syncing]).sync()
                }
            }
            let written = try ForeignSQLGenerator.exactTables(of: foreign[0], schema: Self.schema)
            // Until nothing moves: each node syncs, in an order of the seed's choosing.
            for _ in 0..<(count + 2) {
                for index in (0..<count).shuffled(using: &generator.rng) { _ = try cluster.engine(stores[index]).sync() }
            }
            let tables = try foreign.map { try ForeignSQLGenerator.exactTables(of: $0, schema: Self.schema) }
            let trace = generator.trace.joined(separator: "\n")
            for (index, table) in tables.enumerated() {
                #expect(table == tables[0], "seed \(seed): node \(index) differs from node 0; statements:\n\(trace)")
                #expect(try stores[index].sync.quarantined().isEmpty, "seed \(seed)")
            }
            if singleWriter {
                #expect(tables[0] == written, "seed \(seed): the nodes differ from what the only writer left in its tables; statements:\n\(trace)")
            }
            replaced += try stores.map { try $0.read("SELECT count(*) FROM _ls_log WHERE kind = 3").first?.first }
                .compactMap { if case .integer(let n)? = $0 { Int(n) } else { nil } }.reduce(0, +)
        }
        print("foreign SQL property: \(Self.seeds.count) seeds, \(statements) statements, \(replaced) deletes recorded")
        #expect(statements > Self.seeds.count * 20, "the generator ran statements")
    }
}

/// Random statements against ``ForeignSQLPropertyTests/schema``, with keys drawn from a small shared pool
/// so that nodes and statements collide on keys, names and rowids.
struct ForeignSQLGenerator {
    var rng: SeededRandom
    let ids: [String: [DatabaseValue]]
    /// What ran, and whether it failed: printed with a failing seed.
    var trace: [String] = []

    init(rng: SeededRandom) {
        var rng = rng
        var pools: [String: [DatabaseValue]] = [:]
        for entity in ["Owner", "Folder", "Label", "Note", "Memo"] {
            pools[entity] = (0..<6).map { _ in .text(Self.uuid(&rng)) }
        }
        self.rng = rng
        ids = pools
    }

    /// A lowercase UUID from the seeded generator, so that a seed always orders keys the same way (the
    /// merge picks unique-key survivors by key).
    static func uuid(_ rng: inout SeededRandom) -> String {
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                               bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        return uuid.uuidString.lowercased()
    }

    static let conflictClauses = ["", " OR REPLACE", " OR IGNORE", " OR ABORT", " OR FAIL", " OR ROLLBACK"]

    static let texts: [DatabaseValue] = [
        .text(""), .text("x"), .text("é ñ \u{0} after"), .text("\u{0}"), .nonUTF8Text([0x66, 0xFF, 0x00, 0xFE, 0x41]),
        .nonUTF8Text([0xC3]), .text("🚀👩‍👩‍👧"), .text(String(repeating: "long ", count: 60)), .text("12"), .null,
    ]
    static let numbers: [DatabaseValue] = [
        .integer(0), .integer(1), .integer(-1), .integer(.max), .integer(.min), .integer(42), .real(1e308), .real(.leastNonzeroMagnitude),
        .real(-0.0), .real(.infinity), .real(-.infinity), .real(0.5), .real(3.0), .text("7"), .text("abc"), .null,
    ]
    static let blobs: [DatabaseValue] = [.blob([]), .blob([0]), .blob([0xFF, 0x00, 0x7F]), .text("blob as text"), .integer(9), .null]
    static let names: [DatabaseValue] = [.text("a"), .text("b"), .text("c"), .text("a\u{0}x"), .nonUTF8Text([0xFE])]

    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &rng)] }

    /// A key of `entity`: mostly from the shared pool, sometimes fresh.
    mutating func key(_ entity: String) -> DatabaseValue {
        Int.random(in: 0..<5, using: &rng) == 0 ? .text(Self.uuid(&rng)) : pick(ids[entity]!)
    }

    /// A reference to a row of `entity` that exists on this node, to a key no node has seen, or NULL. (A
    /// reference to a row this node knows was deleted reads NULL on every node by the merge's rule 4 —
    /// `docs/merge.md` — so the writer's own table would not be the synced state.)
    mutating func reference(_ entity: String, on connection: ForeignConnection) throws -> DatabaseValue {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: return .null
        case 1: return .text(Self.uuid(&rng))
        default:
            let existing = try connection.execute("SELECT id FROM \(entity)").map { $0[0] }
            return existing.isEmpty ? .null : pick(existing)
        }
    }

    mutating func noteValues(_ connection: ForeignConnection) throws -> [DatabaseValue] {
        [key("Note"), pick(Self.texts), pick(Self.numbers), pick(Self.numbers), pick(Self.blobs),
         try reference("Folder", on: connection), try reference("Label", on: connection)]
    }

    /// One statement with its arguments.
    mutating func statement(connection: ForeignConnection) throws -> (String, [DatabaseValue]) {
        let clause = pick(Self.conflictClauses)
        switch Int.random(in: 0..<20, using: &rng) {
        case 0: return ("INSERT\(clause) INTO Label(id, name, tone) VALUES (?, ?, ?)", [key("Label"), pick(Self.names), pick(Self.numbers)])
        case 1: return ("REPLACE INTO Label(id, name, tone) VALUES (?, ?, ?)", [key("Label"), pick(Self.names), pick([.integer(1), .integer(2), .null])])
        case 2:
            let target = pick(["ON CONFLICT(name) DO UPDATE SET tone = excluded.tone", "ON CONFLICT(id) DO UPDATE SET name = excluded.name",
                               "ON CONFLICT DO NOTHING", "ON CONFLICT(tone) DO UPDATE SET name = 'upserted'"])
            return ("INSERT INTO Label(id, name, tone) VALUES (?, ?, ?) \(target)", [key("Label"), pick(Self.names), pick([.integer(1), .integer(2), .null])])
        case 3: return ("UPDATE\(clause) Label SET name = ? WHERE id = ?", [pick(Self.names), key("Label")])
        case 4: return ("UPDATE\(clause) Label SET tone = ? WHERE name = ?", [pick([.integer(1), .integer(2), .null]), pick(Self.names)])
        case 5: return ("INSERT\(clause) INTO Folder(id, name, owner) VALUES (?, ?, ?)", [key("Folder"), pick(Self.texts), try reference("Owner", on: connection)])
        case 6: return ("INSERT\(clause) INTO Owner(id, name) VALUES (?, ?)", [key("Owner"), pick(Self.texts)])
        case 7, 8:
            let rows = Int.random(in: 1...3, using: &rng)
            let values = Array(repeating: "(?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
            return ("INSERT\(clause) INTO Note(id, title, rank, score, data, folder, label) VALUES \(values)", try (0..<rows).flatMap { _ in try noteValues(connection) })
        case 9: return ("UPDATE\(clause) Note SET title = ?, rank = ? WHERE id = ?", [pick(Self.texts), pick(Self.numbers), key("Note")])
        case 10: return ("UPDATE\(clause) Note SET score = ?, data = ? WHERE rank > ?", [pick(Self.numbers), pick(Self.blobs), pick(Self.numbers)])
        case 11: return ("UPDATE Note SET label = (SELECT id FROM Label ORDER BY name, id LIMIT 1) WHERE folder = ?", [try reference("Folder", on: connection)])
        case 12: return ("INSERT\(clause) INTO Label(id, name, tone) SELECT ?, name, tone FROM Label ORDER BY id LIMIT 1", [key("Label")])
        case 13: return ("DELETE FROM \(pick(["Folder", "Owner", "Label", "Note", "Memo"])) WHERE id = ?", [key(pick(["Folder", "Owner", "Label", "Note", "Memo"]))])
        case 14: return ("DELETE FROM Note WHERE rank < ?", [pick(Self.numbers)])
        case 15: return ("DELETE FROM \(pick(["Label", "Memo", "Folder"]))", [])
        case 16: return ("INSERT\(clause) INTO Memo(id, body) VALUES (?, ?)", [key("Memo"), pick(Self.texts)])
        case 17:
            // Take another row's rowid.
            let table = pick(["Label", "Memo", "Note"])
            let rowids = try connection.execute("SELECT rowid FROM \(table)").map { $0[0] }
            let rowid = rowids.isEmpty ? DatabaseValue.integer(1) : pick(rowids)
            switch table {
            case "Label": return ("INSERT\(clause) INTO Label(rowid, id, name) VALUES (?, ?, ?)", [rowid, key("Label"), pick(Self.names)])
            case "Memo": return ("UPDATE\(clause) Memo SET rowid = ? WHERE id = ?", [rowid, key("Memo")])
            default: return ("INSERT\(clause) INTO Note(rowid, id, title) VALUES (?, ?, ?)", [rowid, key("Note"), pick(Self.texts)])
            }
        case 18: return ("INSERT\(clause) INTO Memo(id, body) SELECT id, title FROM Note ORDER BY id LIMIT 2", [])
        default: return ("UPDATE\(clause) Folder SET name = ? WHERE id = ?", [pick(Self.texts), key("Folder")])
        }
    }

    /// Runs one statement, or a transaction or savepoint of a few; failures (constraints, deny, ROLLBACK)
    /// are what a program would see, and are ignored. Returns how many statements ran.
    mutating func run(on connection: ForeignConnection) throws -> Int {
        func attempt(_ statement: (String, [DatabaseValue])) {
            var line = "  \(statement.0) \(statement.1.map(\.description).joined(separator: ", "))"
            do {
                try connection.execute(statement.0, statement.1)
            } catch {
                line += "  -- \(error)"
            }
            trace.append(line)
        }
        switch Int.random(in: 0..<6, using: &rng) {
        case 0:
            let count = Int.random(in: 2...4, using: &rng)
            try connection.script("BEGIN")
            trace.append("  BEGIN")
            for _ in 0..<count { attempt(try statement(connection: connection)) }
            let end = Bool.random(using: &rng) ? "COMMIT" : "ROLLBACK"
            if connection.isInTransaction { try? connection.script(end) }
            if connection.isInTransaction { try connection.script("ROLLBACK") }
            trace.append("  \(end)")
            return count
        case 1:
            try connection.script("SAVEPOINT s")
            trace.append("  SAVEPOINT s")
            attempt(try statement(connection: connection))
            if Bool.random(using: &rng), connection.isInTransaction {
                try? connection.script("ROLLBACK TO s")
                trace.append("  ROLLBACK TO s")
            }
            attempt(try statement(connection: connection))
            if connection.isInTransaction { try? connection.script("RELEASE s") }
            trace.append("  RELEASE s")
            if connection.isInTransaction { try connection.script("ROLLBACK") }
            return 2
        default:
            attempt(try statement(connection: connection))
            return 1
        }
    }

    /// Runs one statement in a write transaction of `store`'s own; a failure rolls it back, as the app would
    /// see. `reading` is a connection to the same file, for the generator's lookups.
    mutating func run(on store: Store, reading connection: ForeignConnection) throws -> Int {
        let (sql, arguments) = try statement(connection: connection)
        var line = "  \(sql) \(arguments.map(\.description).joined(separator: ", "))"
        do {
            try store.write(author: "property") { try $0.execute(sql, arguments) }
        } catch {
            line += "  -- \(error)"
        }
        trace.append(line)
        return 1
    }

    /// Every synced table with each value's storage class and bytes, ordered by key.
    static func exactTables(of connection: ForeignConnection, schema: Schema) throws -> [[DatabaseValue]] {
        var rows: [[DatabaseValue]] = []
        for entity in schema.entities {
            let columns = ["id"] + entity.columnNames
            let selected = columns.map { "typeof(\"\($0)\"), hex(\"\($0)\")" }.joined(separator: ", ")
            rows += try connection.execute("SELECT '\(entity.name)', \(selected) FROM \"\(entity.name)\" ORDER BY hex(id)")
        }
        return rows
    }
}
