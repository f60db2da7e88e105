import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit

/// The schema most store tests use: folders holding notes (cascade), notes tagged by labels (nullify),
/// and owners that cannot be deleted while a folder points at them (deny).
enum Fixtures {
    static let schema = Schema(version: 1, entities: [
        Entity("Owner", attributes: [Attribute("name", .text)]),
        Entity(
            "Folder",
            attributes: [Attribute("name", .text, optional: false, default: "", preservedOnDelete: true)],
            relationships: [Relationship("owner", to: "Owner", deleteRule: .deny)]),
        Entity("Label", attributes: [Attribute("name", .text)], uniqueKeys: [["name"]]),
        Entity(
            "Note",
            attributes: [
                Attribute("title", .text, preservedOnDelete: true), Attribute("body", .text),
                Attribute("rank", .integer), Attribute("data", .blob, preservedOnDelete: true),
            ],
            relationships: [
                Relationship("folder", to: "Folder", deleteRule: .cascade),
                Relationship("label", to: "Label", deleteRule: .nullify),
            ]),
    ])

    /// The same schema as JSON, for the command-line tools the cross-process tests start.
    static var schemaJSON: String { schema.json }

    static func id() -> DatabaseValue { .text(UUID().uuidString.lowercased()) }

    static func idText() -> String { UUID().uuidString.lowercased() }

    /// One entity with one text column: for imports where only the number of changes matters.
    static let docSchema = Schema(version: 1, entities: [Entity("Doc", attributes: [Attribute("body", .text)])])

    /// `count` segments from one remote node, each of `transactions` transactions of `changes` inserts
    /// into `Doc` (``docSchema``) with `body`.
    static func docSegments(count: Int, transactions: Int, changes: Int, body: String = "b") -> [SegmentImport] {
        let origin = NodeID(idText())
        var sequence: UInt64 = 0
        return (0..<count).map { _ in
            let batch = (0..<transactions).map { _ in
                sequence += 1
                return LogTransaction(
                    sequence: sequence, timestamp: HLCTimestamp(rawValue: sequence << 20), author: "remote", contextName: nil,
                    changes: (0..<changes).map { _ in
                        LogChange(entity: "Doc", primaryKey: id(), kind: .insert, causalLength: 1, values: ["body": .text(body)])
                    })
            }
            return SegmentImport(header: .covering(batch, from: origin), transactions: batch, checksum: sequence)
        }
    }

    /// A store in `directory` with the fixture schema, plus the schema file the tools need.
    static func store(in directory: TemporaryDirectory, name: String = "store.sqlite") throws -> (Store, schemaFile: String) {
        let schemaFile = try directory.write("schema.json", schemaJSON)
        return (try Store(path: directory.file(name), schema: schema), schemaFile)
    }
}
