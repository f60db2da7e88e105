import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// `SchemaCheck` (`logsync schema check`) against what a store does: every change in the table is refused
/// by the check with its reason and by a real store's migration, and every safe one migrates.
@Suite("Schema check before release")
struct SchemaCheckTests {
    static let base = Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .text), Attribute("rank", .integer, optional: false, default: 0)]),
        Entity(
            "Note", attributes: [Attribute("title", .text), Attribute("body", .text)],
            relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade)]),
    ])

    /// A change to the base schema, made under version 2.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        /// Where the check reports it, and words its reason holds.
        let location: String
        let says: String
        let change: @Sendable (inout Schema) -> Void

        var testDescription: String { name }

        func schema() -> Schema {
            var schema = SchemaCheckTests.base
            schema.version = 2
            change(&schema)
            return schema
        }
    }

    static let unsafe: [Case] = [
        Case(name: "an entity dropped", location: "Note", says: "was removed") { $0.entities.remove(at: 1) },
        Case(name: "an attribute dropped", location: "Note.body", says: "was removed") { $0.entities[1].attributes.remove(at: 1) },
        Case(name: "an attribute retyped", location: "Note.body", says: "type of 'body' changed from text to blob") {
            $0.entities[1].attributes[1] = Attribute("body", .blob)
        },
        Case(name: "an attribute renamed without an identifier", location: "Note.body", says: "a rename") {
            $0.entities[1].attributes[1] = Attribute("text", .text)
        },
        Case(name: "an entity renamed", location: "Note", says: "a rename") { $0.entities[1].name = "Memo" },
        Case(name: "a new required attribute without a default", location: "Note.pinned", says: "required and has no default") {
            $0.entities[1].attributes.append(Attribute("pinned", .bool, optional: false))
        },
        Case(name: "an optional attribute made required", location: "Note.title", says: "became required") {
            $0.entities[1].attributes[0] = Attribute("title", .text, optional: false, default: "")
        },
        Case(name: "a default changed", location: "Folder.rank", says: "default of 'rank' changed") {
            $0.entities[0].attributes[1] = Attribute("rank", .integer, optional: false, default: 1)
        },
        Case(name: "a key retyped", location: "Folder", says: "primary key") { $0.entities[0].primaryKey = PrimaryKey("id", .uuidBlob) },
        Case(name: "a relationship dropped", location: "Note.folder", says: "was removed") { $0.entities[1].relationships = [] },
        Case(name: "a relationship retargeted", location: "Note.folder", says: "now points to 'Note'") {
            $0.entities[1].relationships[0] = Relationship("folder", to: "Note", deleteRule: .cascade)
        },
    ]

    @Test("every unsafe change is refused by the check with its reason, and by a store migrating to it", arguments: unsafe)
    func unsafeChange(_ change: Case) throws {
        let new = change.schema()
        let check = SchemaCheck(from: Self.base, to: new)
        #expect(!check.isSafe)
        let finding = check.findings.first { $0.severity == .unsafe && $0.location == change.location }
        #expect(finding?.reason.contains(change.says) == true, "\(check.report)")
        #expect(finding?.advice.isEmpty == false)

        let directory = try TemporaryDirectory("check")
        let path = directory.file("store.sqlite")
        try Store(path: path, schema: Self.base).write { try $0.insert("Folder", ["id": .text(UUID().uuidString.lowercased()), "name": "a"]) }
        #expect(throws: StoreError.self, "a store migrates what the check refuses: \(change.name)") { try Store(path: path, schema: new) }
    }

    @Test("a rename with its identifier is safe, and the store keeps the column's values under the new name")
    func renameWithIdentifier() throws {
        var new = Self.base
        new.version = 2
        new.entities[1].attributes[1] = Attribute("text", .text, renamingIdentifier: "body")
        let check = SchemaCheck(from: Self.base, to: new)
        #expect(check.isSafe && check.added.isEmpty, "\(check.report)")
        #expect(check.findings.contains { $0.location == "Note.body" && $0.reason.contains("renamed 'text'") }, "\(check.report)")
        let directory = try TemporaryDirectory("check-rename")
        let path = directory.file("store.sqlite")
        let id = DatabaseValue.text(UUID().uuidString.lowercased())
        try Store(path: path, schema: Self.base).write { try $0.insert("Note", ["id": id, "body": "kept"]) }
        let renamed = try Store(path: path, schema: new)
        #expect(try renamed.read("SELECT text FROM Note") == [[.text("kept")]])
        try renamed.write { try $0.update("Note", key: id, ["text": "edited"]) }
        let last = try #require(try renamed.history(after: HistoryToken(0), limit: 10).last)
        #expect(last.changes.first?.changedColumns == ["text"], "history speaks the store's names: \(last)")
    }

    @Test("an entity renamed with its identifier is safe: the store renames the table in place, rows, history and references kept")
    func entityRenameWithIdentifier() throws {
        var new = Self.base
        new.version = 2
        new.entities[0].name = "Collection"
        new.entities[0].renamingIdentifier = "Folder"
        new.entities[1].relationships[0].destination = "Collection"
        let check = SchemaCheck(from: Self.base, to: new)
        #expect(check.isSafe && check.added.isEmpty, "\(check.report)")
        #expect(check.findings.contains { $0.location == "Folder" && $0.reason.contains("renamed 'Collection'") }, "\(check.report)")
        let directory = try TemporaryDirectory("check-entity-rename")
        let path = directory.file("store.sqlite")
        let folder = DatabaseValue.text(UUID().uuidString.lowercased()), note = DatabaseValue.text(UUID().uuidString.lowercased())
        try Store(path: path, schema: Self.base).write { tx in
            try tx.insert("Folder", ["id": folder, "name": "kept"])
            try tx.insert("Note", ["id": note, "title": "t", "folder": folder])
        }
        try ForeignConnection(path: path).execute("CREATE VIEW app_folders AS SELECT name FROM Folder")
        let renamed = try Store(path: path, schema: new)
        #expect(try renamed.read("SELECT name FROM Collection") == [[.text("kept")]])
        #expect(try renamed.read("SELECT name FROM app_folders") == [[.text("kept")]], "the app's view follows the table")
        #expect(try renamed.read("SELECT 1 FROM sqlite_master WHERE name = 'Folder'").isEmpty)
        // The cascade still holds under the new name, and history names the entity as it is called now.
        try renamed.write { try $0.delete("Collection", key: folder) }
        #expect(try renamed.read("SELECT count(*) FROM Note") == [[.integer(0)]])
        let history = try renamed.history(after: HistoryToken(0), limit: 10)
        #expect(Set(history.flatMap { $0.changes.map(\.entity) }) == ["Collection", "Note"], "\(history)")
        // Without the identifier it is a removal and an addition, which the check names.
        var unnamed = new
        unnamed.entities[0].renamingIdentifier = nil
        let refused = SchemaCheck(from: Self.base, to: unnamed)
        #expect(refused.findings.first?.advice.contains("renamingIdentifier 'Folder'") == true, "\(refused.report)")
    }

    @Test("renames that take each other's names (a to b and b to c; a swap) migrate with every value in its column")
    func chainedAndSwappedRenames() throws {
        let base = Schema(version: 1, entities: [Entity("Item", attributes: [Attribute("a", .text), Attribute("b", .text), Attribute("x", .text), Attribute("y", .text)])])
        var next = base
        next.version = 2
        next.entities[0].attributes = [
            Attribute("b", .text, renamingIdentifier: "a"), Attribute("c", .text, renamingIdentifier: "b"),
            Attribute("y", .text, renamingIdentifier: "x"), Attribute("x", .text, renamingIdentifier: "y"),
        ]
        #expect(SchemaCheck(from: base, to: next).isSafe, "\(SchemaCheck(from: base, to: next).report)")
        let directory = try TemporaryDirectory("renames")
        let path = directory.file("store.sqlite")
        try Store(path: path, schema: base).write { try $0.insert("Item", ["id": .text(UUID().uuidString.lowercased()), "a": "1", "b": "2", "x": "3", "y": "4"]) }
        let renamed = try Store(path: path, schema: next)
        #expect(try renamed.read("SELECT b, c, y, x FROM Item") == [[.text("1"), .text("2"), .text("3"), .text("4")]])
    }

    @Test("removing an attribute in two releases: deprecated is safe and stays synced, contracted after it is safe and drops the column")
    func deprecateThenContract() throws {
        var deprecating = Self.base
        deprecating.version = 2
        deprecating.entities[1].attributes[1].deprecated = true
        var contracting = deprecating
        contracting.version = 3
        contracting.entities[1].attributes.remove(at: 1)
        contracting.entities[1].contracted = ["body"]
        let first = SchemaCheck(from: Self.base, to: deprecating), second = SchemaCheck(from: deprecating, to: contracting)
        #expect(first.isSafe && first.findings.contains { $0.location == "Note.body" && $0.reason.contains("deprecated") }, "\(first.report)")
        #expect(second.isSafe && second.findings.contains { $0.location == "Note.body" && $0.reason.contains("contracted") }, "\(second.report)")
        // A removal says how to do it in two releases.
        var dropped = Self.base
        dropped.version = 2
        dropped.entities[1].attributes.remove(at: 1)
        #expect(SchemaCheck(from: Self.base, to: dropped).findings.first?.advice.contains("deprecated: true") == true)

        let directory = try TemporaryDirectory("check-contract")
        let path = directory.file("store.sqlite")
        let id = DatabaseValue.text(UUID().uuidString.lowercased())
        try Store(path: path, schema: Self.base).write { try $0.insert("Note", ["id": id, "title": "t", "body": "b"]) }
        #expect(try Store(path: path, schema: deprecating).read("SELECT title, body FROM Note") == [[.text("t"), .text("b")]])
        let store = try Store(path: path, schema: contracting)
        #expect(try store.read("SELECT * FROM Note") == [[id, .text("t"), .null]], "id, title, folder")
        try store.write { try $0.update("Note", key: id, ["title": "edited"]) }
        #expect(try store.read("SELECT title FROM Note") == [[.text("edited")]])
    }

    @Test("contracting what the old release still uses is unsafe for a fleet, but a store that skips the deprecating release migrates")
    func contractWithoutDeprecation() throws {
        var contracting = Self.base
        contracting.version = 3
        contracting.entities[1].attributes.remove(at: 1)
        contracting.entities[1].contracted = ["body"]
        let check = SchemaCheck(from: Self.base, to: contracting)
        let finding = try #require(check.findings.first { $0.severity == .unsafe })
        #expect(!check.isSafe && finding.location == "Note.body" && finding.onlyForFleets && finding.advice.contains("Deprecate it first"), "\(check.report)")
        let directory = try TemporaryDirectory("check-skip")
        let path = directory.file("store.sqlite")
        try Store(path: path, schema: Self.base).write { try $0.insert("Note", ["id": .text(UUID().uuidString.lowercased()), "title": "t", "body": "b"]) }
        #expect(try Store(path: path, schema: contracting).read("SELECT title FROM Note") == [[.text("t")]])

        // A name once contracted stays listed.
        var forgotten = contracting
        forgotten.version = 4
        forgotten.entities[1].contracted = []
        let again = SchemaCheck(from: contracting, to: forgotten)
        #expect(!again.isSafe && again.findings.first?.location == "Note.contracted", "\(again.report)")
        #expect(throws: StoreError.self) { try Store(path: path, schema: forgotten) }
    }

    @Test("a conversion is declared where it replaces its source, and kept as it is; what would lose its changes is refused")
    func conversionRules() throws {
        var converting = Self.base
        converting.version = 2
        converting.entities[0].attributes[1] = Attribute("score", .real, convertedFrom: Conversion(from: "rank", .integer))
        #expect(SchemaCheck(from: Self.base, to: converting).isSafe, "\(SchemaCheck(from: Self.base, to: converting).report)")
        func refused(_ from: Schema, _ to: Schema, at location: String, saying words: String) {
            let check = SchemaCheck(from: from, to: to)
            let finding = check.findings.first { $0.severity == .unsafe }
            #expect(finding?.location == location && finding?.reason.contains(words) == true, "\(check.report)")
        }
        var dropped = converting
        dropped.version = 3
        dropped.entities[0].attributes[1].convertedFrom = nil
        refused(converting, dropped, at: "Folder.score", saying: "changed or was dropped")
        var retyped = converting
        retyped.version = 3
        retyped.entities[0].attributes[1].convertedFrom = Conversion(from: "rank", .bool)
        refused(converting, retyped, at: "Folder.score", saying: "changed or was dropped")
        var late = Self.base
        late.version = 2
        late.entities[0].attributes[1] = Attribute("rank", .integer, optional: false, default: 0, convertedFrom: Conversion(from: "level", .bool))
        refused(Self.base, late, at: "Folder.rank", saying: "already exists")
        var unknown = Self.base
        unknown.version = 2
        unknown.entities[1].attributes.append(Attribute("size", .real, convertedFrom: Conversion(from: "length", .integer)))
        refused(Self.base, unknown, at: "Note.size", saying: "does not declare")
        var reused = converting
        reused.entities[0].attributes.append(Attribute("rank", .text))
        #expect(throws: SchemaError.self, "a converted name is never declared again") { try reused.validate() }
        var chained = converting
        chained.version = 3
        chained.entities[0].attributes[1] = Attribute("label", .text, convertedFrom: Conversion(from: "score", .real))
        refused(converting, chained, at: "Folder.label", saying: "itself converts from")
        var deprecated = converting
        deprecated.version = 3
        deprecated.entities[0].attributes[1].deprecated = true
        var contracted = deprecated
        contracted.version = 4
        contracted.entities[0].attributes.remove(at: 1)
        contracted.entities[0].contracted = ["score"]
        refused(deprecated, contracted, at: "Folder.score", saying: "which it converts from, is not")
        contracted.entities[0].contracted = ["score", "rank"]
        #expect(SchemaCheck(from: deprecated, to: contracted).isSafe, "\(SchemaCheck(from: deprecated, to: contracted).report)")
    }

    @Test("a version that did not go up, with a changed definition, is refused")
    func versionMustGrow() {
        var same = Self.base
        same.entities[0].attributes.append(Attribute("color", .text))
        let check = SchemaCheck(from: Self.base, to: same)
        #expect(!check.isSafe && check.findings.first?.location == "version", "\(check.report)")
    }

    @Test("additions are safe, listed, and migrate; a changed delete rule and a new unique key are notes")
    func additionsAreSafe() throws {
        var new = Self.base
        new.version = 2
        new.entities[0].attributes.append(Attribute("color", .text))
        new.entities[0].uniqueKeys = [["name"]]
        new.entities[1].attributes.append(Attribute("pinned", .bool, optional: false, default: .integer(0)))
        new.entities[1].relationships[0] = Relationship("folder", to: "Folder", deleteRule: .nullify)
        new.entities.append(Entity("Tag", attributes: [Attribute("name", .text)]))
        let check = SchemaCheck(from: Self.base, to: new)
        #expect(check.isSafe, "\(check.report)")
        #expect(check.added == ["Folder.color", "Note.pinned", "Tag"])
        #expect(check.findings.contains { $0.location == "Note.folder" && $0.reason.contains("delete rule") })
        #expect(check.findings.contains { $0.location == "Folder" && $0.reason.contains("unique key") })
        #expect(check.report.hasPrefix("safe: version 1 to 2"))

        let directory = try TemporaryDirectory("check-safe")
        let path = directory.file("store.sqlite")
        _ = try Store(path: path, schema: Self.base)
        _ = try Store(path: path, schema: new)
    }
}
