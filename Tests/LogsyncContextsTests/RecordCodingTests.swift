import Foundation
import LogsyncCore
import LogsyncTestKit
import Testing

@testable import LogsyncContexts

@Suite("record coding")
struct RecordCodingTests {
    /// Stored in an entity whose key is a 16-byte blob named `tagKey`.
    struct Tag: Record, Equatable {
        var id = UUID()
        var label = ""
    }

    enum Priority: String, Codable, Sendable {
        case low, high
    }

    enum Rank: Int, Codable, Sendable {
        case first = 1, second = 2
    }

    /// A property of every supported kind, in an entity whose key is a blob named `sampleID`.
    struct Sample: Record, Equatable {
        var id = UUID()
        var title = "hello"
        var count = 42
        var small: Int8 = -5
        var large: UInt32 = 4_000_000_000
        var ratio = 0.25
        var weight: Float = 1.5
        var whole = 3
        var flag = true
        var created = Date(timeIntervalSince1970: 1_700_000_000.5)
        var token = UUID()
        var data = Data([1, 2, 3])
        var bytes: [UInt8] = [4, 5]
        var subtitle: String? = nil
        var note: String? = "present"
        var priority = Priority.high
        var rank: Rank? = .second
        var folder: Reference<Folder>
        var tag: Reference<Tag>
        var otherFolder: Reference<Folder>? = nil
        var otherTag: Reference<Tag>? = nil
    }

    /// Every optional kind, to check that nil is written as NULL rather than skipped.
    struct Optionals: Record, Equatable {
        static let entityName = "Sample"
        var id = UUID()
        var subtitle: String?
        var count: Int?
        var small: Int8?
        var large: UInt32?
        var huge: Int128?
        var ratio: Double?
        var weight: Float?
        var flag: Bool?
        var created: Date?
        var token: UUID?
        var data: Data?
        var bytes: [UInt8]?
        var priority: Priority?
        var rank: Rank?
        var folder: Reference<Folder>?
        var tag: Reference<Tag>?
    }

    struct Event: Record {
        var id = UUID()
        var when = Date()
        var count = 0
        var ratio = 0.0
        var flag = false
    }

    static let schema = Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .text, optional: false, default: "")]),
        Entity("Tag", primaryKey: PrimaryKey("tagKey", .uuidBlob), attributes: [Attribute("label", .text)]),
        Entity(
            "Sample", primaryKey: PrimaryKey("sampleID", .uuidBlob),
            attributes: [
                Attribute("title", .text), Attribute("subtitle", .text), Attribute("note", .text),
                Attribute("count", .integer), Attribute("small", .integer), Attribute("large", .integer),
                Attribute("huge", .integer),
                Attribute("ratio", .real), Attribute("weight", .real), Attribute("whole", .real),
                Attribute("flag", .bool), Attribute("created", .date), Attribute("token", .uuid),
                Attribute("data", .blob), Attribute("bytes", .blob),
                Attribute("priority", .text), Attribute("rank", .integer),
            ],
            relationships: [
                Relationship("folder", to: "Folder"), Relationship("tag", to: "Tag"),
                Relationship("otherFolder", to: "Folder"), Relationship("otherTag", to: "Tag"),
            ]),
        Entity(
            "Event",
            attributes: [
                Attribute("when", .date), Attribute("count", .integer), Attribute("ratio", .real), Attribute("flag", .bool),
            ]),
        Entity("Keyless", primaryKey: nil),
    ])

    static func blob(_ id: UUID) -> DatabaseValue { .blob(withUnsafeBytes(of: id.uuid) { Array($0) }) }
    static func text(_ id: UUID) -> DatabaseValue { .text(id.uuidString.lowercased()) }

    /// The error `body` throws, or nil if it succeeds.
    func failure<T>(_ body: () throws -> T) -> ContextError? {
        do {
            _ = try body()
            return nil
        } catch {
            #expect(error is ContextError)
            return error as? ContextError
        }
    }

    @Test("every kind of property round-trips, each stored as its column's declared type")
    func roundTrip() throws {
        let folder = Folder(name: "Inbox")
        let tag = Tag(label: "red")
        let sample = Sample(folder: Reference(folder), tag: Reference(tag))
        let coder = try RowCoder(Sample.self, schema: Self.schema)

        let row = try coder.encode(sample)
        #expect(coder.keyColumn == "sampleID")
        #expect(row["id"] == nil)
        #expect(row == [
            "sampleID": Self.blob(sample.id),
            "title": .text("hello"),
            "count": .integer(42),
            "small": .integer(-5),
            "large": .integer(4_000_000_000),
            "ratio": .real(0.25),
            "weight": .real(1.5),
            "whole": .real(3),
            "flag": .integer(1),
            "created": .real(1_700_000_000.5),
            "token": Self.text(sample.token),
            "data": .blob([1, 2, 3]),
            "bytes": .blob([4, 5]),
            "subtitle": .null,
            "note": .text("present"),
            "priority": .text("high"),
            "rank": .integer(2),
            "folder": Self.text(folder.id),
            "tag": Self.blob(tag.id),
            "otherFolder": .null,
            "otherTag": .null,
        ])
        #expect(try coder.decode(Sample.self, from: row) == sample)

        var other = sample
        other.subtitle = "sub"
        other.note = nil
        other.rank = nil
        other.otherFolder = Reference(folder)
        other.otherTag = Reference(tag)
        let otherRow = try coder.encode(other)
        #expect(otherRow["otherFolder"] == Self.text(folder.id))
        #expect(otherRow["otherTag"] == Self.blob(tag.id))
        #expect(try coder.decode(Sample.self, from: otherRow) == other)
    }

    @Test("the id maps to the primary key column, whatever it is named")
    func keyColumn() throws {
        let folder = Folder(name: "Inbox")
        let folders = try RowCoder(Folder.self, schema: Self.schema)
        #expect(try folders.encode(folder) == ["id": Self.text(folder.id), "name": .text("Inbox")])

        let tag = Tag(label: "red")
        let tags = try RowCoder(Tag.self, schema: Self.schema)
        let row = try tags.encode(tag)
        #expect(row == ["tagKey": Self.blob(tag.id), "label": .text("red")])
        #expect(try tags.decode(Tag.self, from: row) == tag)
    }

    @Test("a nil optional is written as NULL, not left out, and reads back as nil")
    func nilOptionals() throws {
        let record = Optionals()
        let coder = try RowCoder(Optionals.self, schema: Self.schema)
        let row = try coder.encode(record)
        let properties = [
            "subtitle", "count", "small", "large", "huge", "ratio", "weight", "flag", "created", "token", "data", "bytes",
            "priority", "rank", "folder", "tag",
        ]
        #expect(Set(row.keys) == Set(properties + ["sampleID"]))
        for property in properties {
            #expect(row[property] == .null, "\(property)")
        }
        #expect(try coder.decode(Optionals.self, from: row) == record)
        // A column absent from the row reads as nil too.
        #expect(try coder.decode(Optionals.self, from: ["sampleID": Self.blob(record.id)]) == record)

        let filled = Optionals(
            subtitle: "sub", count: 1, small: 2, large: 3, huge: 4, ratio: 5, weight: 6, flag: false,
            created: Date(timeIntervalSince1970: 7), token: UUID(), data: Data([8]), bytes: [9], priority: .low,
            rank: .first, folder: Reference(UUID()), tag: Reference(UUID()))
        let filledRow = try coder.encode(filled)
        #expect(filledRow["huge"] == .integer(4))
        #expect(filledRow["flag"] == .integer(0))
        #expect(try coder.decode(Optionals.self, from: filledRow) == filled)
    }

    @Test("keys are lowercase text or 16 bytes, and read back from text in any case or a 16-byte blob")
    func keys() {
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        #expect(RowCoder.keyValue(id, type: .uuid) == .text("e621e1f8-c36c-495a-93fc-0c247a3e6e5f"))
        #expect(RowCoder.keyValue(id, type: .uuidBlob) == Self.blob(id))
        #expect(RowCoder.uuid(from: .text("E621E1F8-C36C-495A-93FC-0C247A3E6E5F")) == id)
        #expect(RowCoder.uuid(from: .text("e621e1f8-c36c-495a-93fc-0c247a3e6e5f")) == id)
        #expect(RowCoder.uuid(from: Self.blob(id)) == id)
        #expect(RowCoder.uuid(from: .blob([1, 2, 3])) == nil)
        #expect(RowCoder.uuid(from: .text("not a uuid")) == nil)
        #expect(RowCoder.uuid(from: .integer(1)) == nil)
    }

    @Test("decoding converts where it is exact: integers to reals, whole reals to integers, dates from integers, keys from blobs")
    func decodeConversions() throws {
        let coder = try RowCoder(Event.self, schema: Self.schema)
        let id = UUID()
        let row: [String: DatabaseValue] = [
            "id": Self.blob(id), "when": .integer(86_400), "count": .real(7), "ratio": .integer(2), "flag": .integer(0),
        ]
        let event = try coder.decode(Event.self, from: row)
        #expect(event.id == id)
        #expect(event.when == Date(timeIntervalSince1970: 86_400))
        #expect(event.count == 7)
        #expect(event.ratio == 2)
        #expect(event.flag == false)

        var inexact = row
        inexact["count"] = .real(7.5)
        let fraction = failure { try coder.decode(Event.self, from: inexact) }
        #expect(fraction?.code == .typeMismatch)
        #expect(fraction?.message == "Event.count (Int) cannot be read from real 7.5 in column count (integer) of entity Event")

        var notABool = row
        notABool["flag"] = .integer(2)
        let two = failure { try coder.decode(Event.self, from: notABool) }
        #expect(two?.message == "Event.flag (Bool) cannot be read from integer 2 in column flag (bool) of entity Event")
    }

    @Test("decoding reads the columns the type asks for and ignores the others")
    func extraColumns() throws {
        let folder = Folder(name: "Inbox")
        let coder = try RowCoder(Folder.self, schema: Self.schema)
        var row = try coder.encode(folder)
        row["color"] = .text("blue")
        row["position"] = .integer(3)
        #expect(try coder.decode(Folder.self, from: row) == folder)
    }

    @Test("a type whose entity the schema does not declare, or whose entity has no key, is refused")
    func unknownEntity() {
        struct Ghost: Record { var id = UUID() }
        struct Keyless: Record { var id = UUID() }

        let ghost = failure { try RowCoder(Ghost.self, schema: Self.schema) }
        #expect(ghost?.code == .unknownEntity)
        #expect(ghost?.entity == "Ghost")
        #expect(ghost?.message == "Ghost is stored in entity Ghost, which the schema does not declare (declared entities: Folder, Tag, Sample, Event, Keyless)")

        let keyless = failure { try RowCoder(Keyless.self, schema: Self.schema) }
        #expect(keyless?.code == .unknownEntity)
        #expect(keyless?.message.contains("Keyless cannot be stored in entity Keyless: it has no uuid or uuidBlob primary key") == true)
    }

    @Test("a property without a column is refused, naming the type, the property and the entity")
    func unknownProperty() throws {
        struct Labelled: Record {
            static let entityName = "Folder"
            var id = UUID()
            var name = ""
            var color = "blue"
        }
        let coder = try RowCoder(Labelled.self, schema: Self.schema)
        let error = failure { try coder.encode(Labelled()) }
        #expect(error?.code == .unknownProperty)
        #expect(error?.entity == "Folder")
        #expect(error?.message == "Labelled.color has no column in entity Folder (its columns: id for id, name)")

        let decodeError = failure { try coder.decode(Labelled.self, from: ["id": Self.text(UUID()), "name": "x"]) }
        #expect(decodeError?.code == .unknownProperty)
    }

    @Test("a value that does not fit its column's declared type is refused on encode")
    func encodeMismatch() throws {
        struct Point: Codable, Sendable { var x = 0, y = 0 }
        struct StringDate: Record {
            static let entityName = "Event"
            var id = UUID()
            var when = "yesterday"
        }
        struct Overflow: Record {
            static let entityName = "Event"
            var id = UUID()
            var count = UInt64.max
        }
        struct Nested: Record {
            static let entityName = "Folder"
            var id = UUID()
            var name = Point()
        }
        struct Listed: Record {
            static let entityName = "Folder"
            var id = UUID()
            var name = ["a", "b"]
        }
        struct WrongKey: Record {
            static let entityName = "Sample"
            var id = UUID()
            var folder = 12
        }

        let stringDate = failure { try RowCoder(StringDate.self, schema: Self.schema).encode(StringDate()) }
        #expect(stringDate?.code == .typeMismatch)
        #expect(stringDate?.entity == "Event")
        #expect(stringDate?.message == "StringDate.when (String) does not fit column when (date) of entity Event")

        let overflow = failure { try RowCoder(Overflow.self, schema: Self.schema).encode(Overflow()) }
        #expect(overflow?.message == "Overflow.count (UInt64) does not fit column count (integer) of entity Event")

        let nested = failure { try RowCoder(Nested.self, schema: Self.schema).encode(Nested()) }
        #expect(nested?.code == .typeMismatch)
        #expect(nested?.message == "Nested.name (Point) does not fit column name (text) of entity Folder")

        let listed = failure { try RowCoder(Listed.self, schema: Self.schema).encode(Listed()) }
        #expect(listed?.message == "Listed.name (Array<String>) does not fit column name (text) of entity Folder")

        let wrongKey = failure { try RowCoder(WrongKey.self, schema: Self.schema).encode(WrongKey()) }
        #expect(wrongKey?.message == "WrongKey.folder (Int) does not fit column folder (uuid key of Folder) of entity Sample")
    }

    @Test("a stored value that cannot be read as the property's type, or a missing one, is refused on decode")
    func decodeMismatch() throws {
        let events = try RowCoder(Event.self, schema: Self.schema)
        let id = UUID()
        let textDate = failure {
            try events.decode(Event.self, from: ["id": Self.text(id), "when": "yesterday", "count": 1, "ratio": 1.0, "flag": 1])
        }
        #expect(textDate?.code == .typeMismatch)
        #expect(textDate?.entity == "Event")
        #expect(textDate?.message == "Event.when (Date) cannot be read from text 'yesterday' in column when (date) of entity Event")

        let folders = try RowCoder(Folder.self, schema: Self.schema)
        for row: [String: DatabaseValue] in [["id": Self.text(id)], ["id": Self.text(id), "name": .null]] {
            let missing = failure { try folders.decode(Folder.self, from: row) }
            #expect(missing?.code == .typeMismatch)
            #expect(missing?.message == "Folder.name is not optional but the row has no value for column name (text) of entity Folder")
        }
        let missingKey = failure { try folders.decode(Folder.self, from: ["name": "Inbox"]) }
        #expect(missingKey?.message == "Folder.id is not optional but the row has no value for column id (uuid primary key) of entity Folder")

        let samples = try RowCoder(Optionals.self, schema: Self.schema)
        let unknownCase = failure {
            try samples.decode(Optionals.self, from: ["sampleID": Self.blob(id), "priority": "urgent"])
        }
        #expect(unknownCase?.code == .typeMismatch)
        #expect(unknownCase?.message == "Optionals.priority (Priority) cannot be read from text 'urgent' in column priority (text) of entity Sample")
        #expect(unknownCase?.cause != nil)

        struct Nested: Record {
            static let entityName = "Folder"
            var id = UUID()
            var name: [String]
        }
        let nested = failure {
            try RowCoder(Nested.self, schema: Self.schema).decode(Nested.self, from: ["id": Self.text(id), "name": "a"])
        }
        #expect(nested?.message == "Nested.name (Array<String>) cannot be read from text 'a' in column name (text) of entity Folder")

        let shortKey = failure { try samples.decode(Optionals.self, from: ["sampleID": .blob([1, 2])]) }
        #expect(shortKey?.message == "Optionals.id (UUID) cannot be read from a 2-byte blob in column sampleID (uuidBlob primary key) of entity Sample")
    }
}

/// Text as another program may store it: with NUL characters, or bytes that are not UTF-8.
@Suite("record text, byte for byte")
struct RecordTextTests {
    @Test("a String with NUL characters saves and reads back whole")
    func nulInStrings() throws {
        let store = try NotesStore()
        let context = store.container.viewContext
        let note = Note(title: "before\u{0}after", body: "\u{0}")
        try context.insert(note)
        try context.save(author: "test")
        let other = try store.another()
        defer { other.close() }
        let fetched = try #require(try other.viewContext.object(Note.self, id: note.id))
        #expect(fetched.title == "before\u{0}after")
        #expect(fetched.body == "\u{0}")
    }

    @Test("text that is not UTF-8 is never repaired into a String: reading it names the column")
    func nonUTF8Text() throws {
        let store = try NotesStore()
        let id = UUID()
        try ForeignConnection(path: store.path).execute(
            "INSERT INTO Note(id, title) VALUES (?, CAST(x'66ff00fe41' AS TEXT))", [.text(id.uuidString.lowercased())])
        let other = try store.another()
        defer { other.close() }
        let error = try #require(throws: ContextError.self) { try other.viewContext.object(Note.self, id: id) }
        #expect(error.code == .typeMismatch, "\(error)")
        #expect(error.message.contains("title") && error.message.contains("not valid UTF-8"), "\(error)")
    }
}
