import Foundation
import LogsyncCore
import LogsyncStore

/// A seeded mixed-version fleet (`docs/schema-evolution.md`): three releases of the convergence schema,
/// nodes upgraded one at a time in random order while all of them write, checked against a reference merge
/// of every segment. The transport is the caller's: the shared folder's tests and the relay's run the same
/// fleet.
///
/// - Release 2 adds a column to Folder and to Note, an entity (Tag) and a relationship to it, renames
///   Note's `title` to `subject` through its identifier, and deprecates Note's `rank`.
/// - Release 3 contracts `rank`, adds a column to Tag, renames the entity Folder `Collection` through its
///   identifier, and converts Note's `pinned` (bool) in place into `priority` (integer).
package enum SchemaFleet {
    package static let version1 = Schema.convergence

    package static let version2: Schema = {
        var schema = version1
        schema.version = 2
        schema.entities[2].attributes[0] = Attribute("subject", .text, renamingIdentifier: "title")
        schema.entities[2].attributes[1].deprecated = true
        schema.entities[0].attributes.append(Attribute("color", .text))
        schema.entities[2].attributes.append(Attribute("pinned", .bool))
        schema.entities[2].relationships.append(Relationship("tag", to: "Tag", deleteRule: .nullify))
        schema.entities.append(Entity("Tag", attributes: [Attribute("name", .text)]))
        return schema
    }()

    package static let version3: Schema = {
        var schema = version2
        schema.version = 3
        schema.entities[2].attributes.remove(at: 1)
        schema.entities[2].contracted = ["rank"]
        schema.entities[3].attributes.append(Attribute("weight", .integer))
        schema.entities[0].name = "Collection"
        schema.entities[0].renamingIdentifier = "Folder"
        schema.entities[2].relationships[0].destination = "Collection"
        let pinned = schema.entities[2].attributes.firstIndex { $0.name == "pinned" }!
        schema.entities[2].attributes[pinned] = Attribute("priority", .integer, convertedFrom: Conversion(from: "pinned", .bool))
        return schema
    }()

    /// How the reference merge reads the log for `schema`: release 3 as ``asReleaseThreeReads(_:)``, the
    /// others as it is.
    package static func reading(for schema: Schema) -> (LogTransaction) -> LogTransaction {
        if schema.version >= 3 { return asReleaseThreeReads }
        return { $0 }
    }

    /// A transaction from the log as release 3 reads it, for the reference merge: what release 2 wrote to
    /// `pinned` is `priority` (bool to integer keeps the value), at the same clock, unless the change sets
    /// `priority` itself. Written apart from `LogNames`, which it checks.
    package static func asReleaseThreeReads(_ transaction: LogTransaction) -> LogTransaction {
        var converted = transaction
        for index in converted.changes.indices where converted.changes[index].entity == "Note" {
            guard let value = converted.changes[index].values.removeValue(forKey: "pinned") else { continue }
            if converted.changes[index].values["priority"] == nil { converted.changes[index].values["priority"] = value }
        }
        return converted
    }

    /// The table of folders under `release`.
    static func folders(_ release: Int) -> String { release == 3 ? "Collection" : "Folder" }

    package static let versions = [version1, version2, version3]

    /// `schema` with each renamed attribute under its name in the log: what a reference merge of the
    /// segments projects.
    package static func inLogNames(_ schema: Schema) -> Schema {
        var renamed = schema
        for entity in renamed.entities.indices {
            for relationship in renamed.entities[entity].relationships.indices {
                let destination = renamed.entities[entity].relationships[relationship].destination
                renamed.entities[entity].relationships[relationship].destination = schema.entity(named: destination)?.logName ?? destination
            }
            renamed.entities[entity].name = renamed.entities[entity].logName
            renamed.entities[entity].renamingIdentifier = nil
            for attribute in renamed.entities[entity].attributes.indices {
                renamed.entities[entity].attributes[attribute].name = renamed.entities[entity].attributes[attribute].logName
                renamed.entities[entity].attributes[attribute].renamingIdentifier = nil
            }
        }
        return renamed
    }

    /// What a run saw, and what it found wrong.
    package struct Outcome: Sendable {
        package var failures: [String] = []
        /// Segments applied in part, their rest kept.
        package var keptSegments = 0
        /// Kept transactions merged after an upgrade.
        package var mergedAfterUpgrade = 0
        /// The releases a node was checked on while another ran a newer one: it held all it can represent.
        package var checkedReleases: Set<Int> = []
        package var writes = 0

        package init() {}

        /// Adds another seed's run.
        package mutating func add(_ other: Outcome) {
            failures += other.failures
            keptSegments += other.keptSegments
            mergedAfterUpgrade += other.mergedAfterUpgrade
            checkedReleases.formUnion(other.checkedReleases)
            writes += other.writes
        }
    }

    /// What the fleet needs from its caller: the transport lives there.
    package struct Driver {
        /// Opens (or reopens) node `name`'s store with `schema`, with its sync engine. The fleet has dropped
        /// its own reference to the previous store first.
        package var open: (_ name: String, _ schema: Schema) throws -> Store
        /// One sync round of node `name`: segments applied in part, and kept transactions merged.
        package var sync: (_ name: String) throws -> (keptSegments: Int, mergedKept: Int)
        /// A reference merge of every segment published so far, projected for `schema`.
        package var reference: (_ schema: Schema) throws -> Projection

        package init(
            open: @escaping (String, Schema) throws -> Store, sync: @escaping (String) throws -> (keptSegments: Int, mergedKept: Int),
            reference: @escaping (Schema) throws -> Projection
        ) {
            self.open = open
            self.sync = sync
            self.reference = reference
        }
    }

    /// Runs one seed: node `a` starts on release 2, the others on 1; every node takes release 2 at a random
    /// step of the first half (in random order) and release 3 at one of the second, while a random node
    /// writes at every step and a random node syncs at every other. Twice, while some node still runs an
    /// older release than another, everyone syncs and that node must hold exactly what the reference
    /// projects for its release; at the end, on release 3 everywhere, every node must hold the reference's
    /// tables and keep nothing.
    package static func run(seed: UInt64, steps: ClosedRange<Int> = 40...70, _ driver: Driver) throws -> Outcome {
        var rng = SeededRandom(seed: seed)
        var outcome = Outcome()
        let names = ["a", "b", "c", "d"]
        var release = ["a": 2, "b": 1, "c": 1, "d": 1]
        var stores: [String: Store] = [:]
        func open(_ name: String) throws {
            stores[name] = nil
            stores[name] = try driver.open(name, versions[release[name]! - 1])
        }
        func sync(_ name: String) throws {
            let report = try driver.sync(name)
            outcome.keptSegments += report.keptSegments
            outcome.mergedAfterUpgrade += report.mergedKept
        }
        for name in names { try open(name) }
        let count = Int.random(in: steps, using: &rng)
        var upgrades: [Int: (name: String, release: Int)] = [:]
        for (index, name) in ["b", "c", "d"].shuffled(using: &rng).enumerated() {
            upgrades[Int.random(in: (index * count / 6)...((index + 1) * count / 6 - 1), using: &rng)] = (name, 2)
        }
        for (index, name) in names.shuffled(using: &rng).enumerated() {
            upgrades[count / 2 + Int.random(in: (index * count / 8)...((index + 1) * count / 8 - 1), using: &rng)] = (name, 3)
        }
        var checked: Set<Int> = []
        for step in 0..<count {
            if let upgrade = upgrades[step] {
                release[upgrade.name] = upgrade.release
                try open(upgrade.name)
            }
            let writer = names.randomElement(using: &rng)!
            try randomWrite(stores[writer]!, release: release[writer]!, using: &rng)
            outcome.writes += 1
            if Bool.random(using: &rng) { try sync(names.randomElement(using: &rng)!) }
            // Once per older release still running beside a newer one: after everyone has synced, a node on
            // it holds everything it can represent of what every node wrote.
            let oldest = release.values.min()!, newest = release.values.max()!
            if oldest < newest, !checked.contains(oldest), step >= count / 4, let old = names.first(where: { release[$0] == oldest }) {
                checked.insert(oldest)
                for _ in 0..<2 { for name in names { try sync(name) } }
                let expected = try driver.reference(inLogNames(versions[oldest - 1]))
                outcome.checkedReleases.insert(oldest)
                if try stores[old]!.syncedTables(logNames: true) != expected {
                    outcome.failures.append("seed \(seed): node \(old) on release \(oldest) at step \(step) does not hold what it can represent")
                }
            }
        }
        for name in names where release[name] != 3 {
            release[name] = 3
            try open(name)
        }
        for _ in 0..<2 { for name in names.shuffled(using: &rng) { try sync(name) } }
        let expected = try driver.reference(inLogNames(version3))
        let first = try stores["a"]!.syncedTables()
        for name in names {
            let store = stores[name]!
            if try store.sync.keptTransactionCount() != 0 { outcome.failures.append("seed \(seed): \(name) still keeps parts") }
            if try store.syncedTables(logNames: true) != expected { outcome.failures.append("seed \(seed): \(name) differs from the reference") }
            if try store.syncedTables() != first { outcome.failures.append("seed \(seed): \(name) differs from a") }
            if try !store.read("SELECT 1 FROM pragma_table_info('Note') WHERE name IN ('rank', 'pinned')").isEmpty {
                outcome.failures.append("seed \(seed): \(name) still has a contracted or converted column")
            }
            if try !store.read("SELECT 1 FROM sqlite_master WHERE name = 'Folder'").isEmpty {
                outcome.failures.append("seed \(seed): \(name) still has the renamed table under its old name")
            }
        }
        return outcome
    }

    /// One random write of an app on `release`: apps on 2 and 3 never write the deprecated `rank`.
    package static func randomWrite(_ store: Store, release: Int, using rng: inout SeededRandom) throws {
        let folderTable = folders(release)
        if release == 1 || Bool.random(using: &rng) {
            return try baseWrite(store, title: release == 1 ? "title" : "subject", rank: release == 1, folders: folderTable, using: &rng)
        }
        let folders = try store.read("SELECT id FROM \(folderTable)").map { $0[0] }
        let notes = try store.read("SELECT id FROM Note").map { $0[0] }
        let tags = try store.read("SELECT id FROM Tag").map { $0[0] }
        let pin = release == 3 ? "priority" : "pinned"
        try store.write(author: "release \(release)") { tx in
            switch Int.random(in: 0..<8, using: &rng) {
            case 0:
                var row: [String: DatabaseValue] = ["id": id(), "name": .text("g\(Int.random(in: 0..<3, using: &rng))")]
                if release == 3 { row["weight"] = .integer(Int64.random(in: 0..<3, using: &rng)) }
                try tx.insert("Tag", row)
            case 1: if let tag = tags.randomElement(using: &rng) { try tx.delete("Tag", key: tag) }
            case 2:
                if let folder = folders.randomElement(using: &rng) {
                    try tx.update(folderTable, key: folder, ["color": .text("c\(Int.random(in: 0..<3, using: &rng))")])
                }
            case 3:
                if let note = notes.randomElement(using: &rng) {
                    try tx.update(
                        "Note", key: note,
                        [pin: .integer(Int64.random(in: 0...(release == 3 ? 3 : 1), using: &rng)), "tag": tags.randomElement(using: &rng) ?? .null,
                         "subject": .text("s\(Int.random(in: 0..<3, using: &rng))")])
                }
            case 4:
                try tx.insert(
                    "Note",
                    ["id": id(), "subject": .text("r\(release)"), pin: 1, "folder": folders.randomElement(using: &rng) ?? .null,
                     "tag": tags.randomElement(using: &rng) ?? .null])
            case 5:
                try tx.insert(folderTable, ["id": id(), "name": .text("r\(release)"), "color": "red"])
            case 6:
                if release == 3, let tag = tags.randomElement(using: &rng) {
                    try tx.update("Tag", key: tag, ["weight": .integer(Int64.random(in: 0..<5, using: &rng))])
                }
            default:
                if let note = notes.randomElement(using: &rng) { try tx.update("Note", key: note, [pin: 0]) }
            }
        }
    }

    /// A write of what release 1 declares: folders, labels (unique names), notes; updates and deletes.
    static func baseWrite(_ store: Store, title: String, rank: Bool, folders folderTable: String, using rng: inout SeededRandom) throws {
        let folders = try store.read("SELECT id FROM \(folderTable)").map { $0[0] }
        let labels = try store.read("SELECT id FROM Label").map { $0[0] }
        let notes = try store.read("SELECT id FROM Note").map { $0[0] }
        try store.write(author: "base") { tx in
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: try tx.insert(folderTable, ["id": id(), "name": .text("f\(Int.random(in: 0..<3, using: &rng))")])
            case 1:
                let name = DatabaseValue.text("l\(Int.random(in: 0..<3, using: &rng))")
                if try tx.rows("SELECT 1 FROM Label WHERE name = ?", [name]).isEmpty { try tx.insert("Label", ["id": id(), "name": name]) }
            case 2, 3, 4:
                var row: [String: DatabaseValue] = [
                    "id": id(), title: "t", "folder": folders.randomElement(using: &rng) ?? .null, "label": labels.randomElement(using: &rng) ?? .null,
                ]
                if rank { row["rank"] = .integer(Int64.random(in: 0..<5, using: &rng)) }
                try tx.insert("Note", row)
            case 5, 6, 7:
                if let note = notes.randomElement(using: &rng) {
                    let value = Int64.random(in: 0..<5, using: &rng)
                    try tx.update("Note", key: note, rank ? ["rank": .integer(value)] : [title: .text("t\(value)")])
                }
            case 8:
                if let folder = folders.randomElement(using: &rng) { try tx.delete(folderTable, key: folder) }
            default:
                if let label = labels.randomElement(using: &rng) { try tx.delete("Label", key: label) }
            }
        }
    }

    static func id() -> DatabaseValue { .text(UUID().uuidString.lowercased()) }
}
