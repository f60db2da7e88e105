import LogsyncCore
import LogsyncStore

extension Schema {
    /// The schema of the convergence tests, in the merge model and through real stores alike: folders,
    /// labels with a unique name, and notes that are deleted with their folder and lose their label.
    public static let convergence = Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .text)]),
        Entity("Label", attributes: [Attribute("name", .text)], uniqueKeys: [["name"]]),
        Entity(
            "Note", attributes: [Attribute("title", .text), Attribute("rank", .integer, optional: false, default: 0)],
            relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade), Relationship("label", to: "Label", deleteRule: .nullify)]),
    ])
}

extension Store {
    /// The synced tables as a projection, to compare with a reference computed by the merge rules; with
    /// `logNames`, a renamed entity's table and attribute's column under the name the log gives it (its
    /// renamingIdentifier).
    package func syncedTables(logNames: Bool = false) throws -> Projection {
        var tables: [String: [DatabaseValue: [String: DatabaseValue]]] = [:]
        for entity in schema.entities {
            guard let key = entity.primaryKey?.name else { continue }
            let columns = entity.columnNames
            let names = logNames ? entity.attributes.map(\.logName) + entity.relationships.map(\.name) : columns
            var table: [DatabaseValue: [String: DatabaseValue]] = [:]
            let selected = ([key] + columns).joined(separator: ", ")
            for row in try read("SELECT \(selected) FROM \(entity.name)") {
                table[row[0]] = Dictionary(uniqueKeysWithValues: zip(names, row.dropFirst()))
            }
            tables[logNames ? entity.logName : entity.name] = table
        }
        return Projection(tables: tables)
    }
}
