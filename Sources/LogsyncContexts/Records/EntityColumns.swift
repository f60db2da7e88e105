import Foundation
import LogsyncCore
import LogsyncStore

/// A row of an entity, keyed by column name, primary key included.
typealias Row = [String: DatabaseValue]

/// What the contexts need to know about one entity's columns: their names and declared types, a
/// relationship's type being its destination's key type.
struct EntityColumns: Sendable {
    let name: String
    let keyColumn: String
    let keyType: AttributeType
    /// The primary key first, then attributes and relationships in declaration order.
    let columns: [String]
    private let types: [String: AttributeType]

    init(_ entity: Entity, schema: Schema) throws(ContextError) {
        guard let key = entity.primaryKey else {
            throw ContextError(.unknownEntity, "entity '\(entity.name)' has no primary key, so records cannot map to it", entity: entity.name)
        }
        name = entity.name
        keyColumn = key.name
        keyType = key.type
        columns = [key.name] + Self.appColumns(of: entity)
        var types = [key.name: key.type]
        for attribute in entity.attributes where !attribute.deprecated { types[attribute.name] = attribute.type }
        for relationship in entity.relationships {
            types[relationship.name] = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
        }
        self.types = types
    }

    /// The columns apps see, in declaration order: every attribute but the deprecated ones
    /// (``Attribute/deprecated``), then the relationships.
    static func appColumns(of entity: Entity) -> [String] {
        entity.attributes.filter { !$0.deprecated }.map(\.name) + entity.relationships.map(\.name)
    }

    /// `row` with only the columns apps see: a row read from the store holds deprecated columns too, which
    /// must not count as changes against what a context saw.
    func visible(_ row: Row) -> Row { row.filter { types[$0.key] != nil } }

    func type(of column: String) throws(ContextError) -> AttributeType {
        guard let type = types[column] else {
            throw ContextError(
                .unknownProperty, "'\(column)' is not a column of '\(name)' (columns: \(columns.joined(separator: ", ")))",
                entity: name)
        }
        return type
    }

    /// The row's primary key as an object id, or nil when it is not a UUID.
    func objectID(of row: Row) -> ObjectID? {
        guard let value = row[keyColumn], let id = RowCoder.uuid(from: value) else { return nil }
        return ObjectID(entity: name, id: id)
    }

    func keyValue(_ id: UUID) -> DatabaseValue { RowCoder.keyValue(id, type: keyType) }

    /// `SELECT` of every column, in ``columns`` order.
    var selectAll: String {
        "SELECT " + columns.map(SQLIdentifier.quoted).joined(separator: ", ") + " FROM " + SQLIdentifier.quoted(name)
    }

    func row(_ values: [DatabaseValue]) -> Row {
        Row(uniqueKeysWithValues: zip(columns, values))
    }
}
