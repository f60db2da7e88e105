import Foundation
import LogsyncCore
import Testing
import LogsyncControl

@Suite("Schema validation")
struct SchemaValidationTests {
    private func error(_ schema: Schema) -> SchemaError? {
        do {
            try schema.validate()
            return nil
        } catch {
            return error
        }
    }

    @Test("integer and missing primary keys are refused with the entity named")
    func primaryKeys() {
        let integer = error(Schema(version: 1, entities: [Entity("A", primaryKey: PrimaryKey("id", .integer))]))
        #expect(integer?.code == .unusablePrimaryKey)
        #expect(integer?.location == "A.id")
        #expect(error(Schema(version: 1, entities: [Entity("A", primaryKey: nil)]))?.code == .missingPrimaryKey)
        #expect(error(Schema(version: 1, entities: [Entity("A", primaryKey: PrimaryKey("id", .uuidBlob))])) == nil)
    }

    @Test("hostile or reserved names are refused")
    func names() {
        for bad in ["", "1abc", "a b", "x\"; DROP TABLE y; --", "_ls_log", "sqlite_master", "café"] {
            #expect(error(Schema(version: 1, entities: [Entity(bad)]))?.code == .invalidName, "\(bad)")
        }
        #expect(error(Schema(version: 1, entities: [Entity("A", attributes: [Attribute("id", .text)])]))?.code == .duplicateName)
        #expect(error(Schema(version: 1, entities: [Entity("A"), Entity("a")]))?.code == .duplicateName)
    }

    @Test("relationships must point at declared entities; unique keys at declared columns")
    func references() {
        let dangling = Schema(version: 1, entities: [Entity("A", relationships: [Relationship("b", to: "B")])])
        #expect(error(dangling)?.code == .unknownDestination)
        let badKey = Schema(version: 1, entities: [Entity("A", attributes: [Attribute("x", .text)], uniqueKeys: [["y"]])])
        #expect(error(badKey)?.code == .unknownColumn)
    }

    @Test("too many columns for the change mask, a bad default and a zero version are refused")
    func limits() {
        let wide = Entity("A", attributes: (0..<64).map { Attribute("c\($0)", .integer) })
        #expect(error(Schema(version: 1, entities: [wide]))?.code == .tooManyColumns)
        #expect(error(Schema(version: 1, entities: [Entity("A", attributes: [Attribute("x", .integer, default: "text")])]))?.code == .invalidDefault)
        #expect(error(Schema(version: 0, entities: []))?.code == .invalidVersion)
    }

    @Test("JSON schemas load, round-trip, and report unknown types and delete rules with their location")
    func json() throws {
        let text = """
            {"version": 2, "entities": [
              {"name": "Folder", "primaryKey": {"name": "id", "type": "uuid"}, "attributes": [{"name": "name", "type": "text", "default": "x"}]},
              {"name": "Note", "primaryKey": {"name": "id", "type": "uuidBlob"},
               "attributes": [{"name": "n", "type": "integer", "optional": false, "default": 3}, {"name": "r", "type": "real", "default": 1.5}],
               "relationships": [{"name": "folder", "destination": "Folder", "deleteRule": "cascade"}], "uniqueKeys": [["n"]]}
            ]}
            """
        let schema = try Schema(json: Data(text.utf8))
        #expect(schema.version == 2)
        #expect(schema.entity(named: "Note")?.attributes[0] == Attribute("n", .integer, optional: false, default: 3))
        #expect(schema.entity(named: "Note")?.attributes[1].defaultValue == .real(1.5))
        #expect(schema.entity(named: "Note")?.relationships == [Relationship("folder", to: "Folder", deleteRule: .cascade)])
        let encoded = try JSONEncoder().encode(schema)
        #expect(try JSONDecoder().decode(Schema.self, from: encoded) == schema)

        let badRule = #"{"version": 1, "entities": [{"name": "A", "primaryKey": {"name": "id", "type": "uuid"}, "relationships": [{"name": "b", "destination": "A", "deleteRule": "explode"}]}]}"#
        #expect(throws: SchemaError.self) { try Schema(json: Data(badRule.utf8)) }
        #expect(throws: SchemaError.self) { try Schema(json: Data("not json".utf8)) }
    }
}

@Suite("Schema as JSON")
struct SchemaJSONTests {
    @Test("a deprecated attribute must be optional or have a default and be in no unique key; a contracted name is never declared again")
    func deprecationRules() throws {
        func failure(_ schema: Schema) -> SchemaError? {
            do {
                try schema.validate()
                return nil
            } catch {
                return error
            }
        }
        let required = Entity("A", attributes: [Attribute("x", .integer, optional: false, deprecated: true)])
        #expect(failure(Schema(version: 2, entities: [required]))?.code == .invalidDeprecation)
        let keyed = Entity("A", attributes: [Attribute("x", .integer, deprecated: true)], uniqueKeys: [["x"]])
        #expect(failure(Schema(version: 2, entities: [keyed]))?.code == .invalidDeprecation)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [Attribute("x", .integer, optional: false, default: 0, deprecated: true)])])) == nil)
        for again in [Attribute("x", .text), Attribute("y", .text, renamingIdentifier: "x")] {
            #expect(failure(Schema(version: 3, entities: [Entity("A", attributes: [again], contracted: ["x"])]))?.code == .duplicateName, "\(again)")
        }
        // Conversions: between types that convert, from a column the schema no longer declares.
        let converting = Attribute("score", .real, convertedFrom: Conversion(from: "rank", .integer))
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [converting])])) == nil)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [Attribute("n", .integer, convertedFrom: Conversion(from: "t", .text))])]))?.code == .invalidConversion)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [converting, Attribute("rank", .integer)])]))?.code == .duplicateName)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [Attribute("s", .real, optional: false, convertedFrom: Conversion(from: "rank", .integer))])]))?.code == .invalidConversion)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [converting], contracted: ["rank"])]))?.code == .invalidConversion)
        #expect(failure(Schema(version: 2, entities: [Entity("A", attributes: [converting], uniqueKeys: [["score"]])]))?.code == .invalidConversion)
        // A renamed entity's identifier names no other entity in the log.
        #expect(failure(Schema(version: 2, entities: [Entity("A"), Entity("B", renamingIdentifier: "A")]))?.code == .duplicateName)
        #expect(failure(Schema(version: 2, entities: [Entity("B", renamingIdentifier: "A")])) == nil)
        // A schema stored before these fields existed decodes with none deprecated or contracted.
        let stored = #"{"entities":[{"attributes":[{"name":"x","optional":true,"preservedOnDelete":false,"type":"text"}],"name":"A","primaryKey":{"name":"id","type":"uuid"},"relationships":[],"uniqueKeys":[]}],"version":1}"#
        let decoded = try JSONDecoder().decode(Schema.self, from: Data(stored.utf8))
        #expect(decoded.entities[0].contracted.isEmpty && !decoded.entities[0].attributes[0].deprecated)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(String(decoding: try encoder.encode(decoded), as: UTF8.self) == stored, "encoded as before")
    }

    @Test("a schema written as JSON reads back equal: every type, defaults of each kind, rules, unique keys, preserved attributes")
    func roundTrip() throws {
        let everything = Schema(version: 7, entities: [
            Entity(
                "Kinds", primaryKey: PrimaryKey("key", .uuidBlob),
                attributes: AttributeType.allCases.map { Attribute("a_\($0.rawValue)", $0) } + [
                    Attribute("count", .integer, optional: false, default: -9_223_372_036_854_775_807),
                    Attribute("ratio", .real, optional: false, default: 1.0),
                    Attribute("tiny", .real, default: 5e-324),
                    Attribute("label", .text, optional: false, default: "quote \" back\\slash é \u{1F680}", preservedOnDelete: true),
                ],
                uniqueKeys: [["label"], ["a_integer", "a_text"]]),
            Entity(
                "Ref", attributes: [
                    Attribute("name", .text), Attribute("old", .text, deprecated: true), Attribute("title", .text, renamingIdentifier: "heading"),
                    Attribute("score", .real, convertedFrom: Conversion(from: "rank", .integer)),
                ],
                relationships: [
                    Relationship("kinds", to: "Kinds", deleteRule: .deny), Relationship("other", to: "Ref", deleteRule: .nullify),
                ], contracted: ["gone", "removed"], renamingIdentifier: "Reference"),
        ])
        for schema in [everything, .notes, .convergence] {
            let read = try Schema(json: Data(schema.json.utf8))
            #expect(read == schema, "\(schema.json)")
        }
    }

    @Test("a converted attribute: changes and baseline registers of the source become the new attribute's, converted, at their clock; the later register wins")
    func conversionsOnTheWayIn() {
        let schema = Schema(version: 2, entities: [
            Entity("Note", attributes: [Attribute("score", .real, convertedFrom: Conversion(from: "rank", .integer))]),
        ])
        let names = LogNames(schema)
        let change = LogChange(entity: "Note", primaryKey: .text("k"), kind: .update, causalLength: 1, values: ["rank": .integer(3)])
        let converted = names.current(LogTransaction(sequence: 1, timestamp: HLCTimestamp(rawValue: 1), author: nil, contextName: nil, changes: [change]))
        #expect(converted.changes[0].values == ["score": .real(3)])
        var both = change
        both.values["score"] = .real(9)
        let own = names.current(LogTransaction(sequence: 2, timestamp: HLCTimestamp(rawValue: 2), author: nil, contextName: nil, changes: [both]))
        #expect(own.changes[0].values == ["score": .real(9)], "a change that sets the new attribute keeps its value")
        let node = NodeID("n")
        func clock(_ time: UInt64) -> Clock { Clock(HLCTimestamp(rawValue: time), node) }
        let older = BaselineRow(key: RowKey("Note", .text("k")), state: RowState(causalLength: 1, columns: [
            "rank": Register(.integer(4), clock(5)), "score": Register(.real(1), clock(3)),
        ]))
        #expect(names.current(older).state.columns == ["score": Register(.real(4), clock(5))])
        var newer = older
        newer.state.columns["score"] = Register(.real(1), clock(7))
        #expect(names.current(newer).state.columns == ["score": Register(.real(1), clock(7))])
        #expect(TypeConversion.convert(.text("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"), from: .uuid, to: .uuidBlob) != .null)
        #expect(TypeConversion.convert(.integer(7), from: .integer, to: .bool) == .integer(1))
        #expect(TypeConversion.convert(.real(0.5), from: .real, to: .text) == .text("0.5"))
    }
}
