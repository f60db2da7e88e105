import LogsyncCore

/// What the store knows about each registered entity: its stable numeric id in the history log and the
/// bit of each column in a change's mask. Built from `_ls_entity` once the schema is registered.
struct Catalog: Sendable {
    /// Immutable, and a class so that the many lookups on the merge's hot path share one instance
    /// instead of copying its arrays and strings.
    final class EntityInfo: Sendable {
        let id: Int64
        let entity: Entity
        /// Columns in bit order: bit `i` of a change mask is `columns[i]`. Only ever appended to.
        let columns: [String]
        let columnTypes: [String: AttributeType]
        /// Statements the merge runs for every row, built once.
        let sql: RowSQL

        init(id: Int64, entity: Entity, columns: [String], columnTypes: [String: AttributeType], sql: RowSQL) {
            self.id = id
            self.entity = entity
            self.columns = columns
            self.columnTypes = columnTypes
            self.sql = sql
            self.isIsolated = entity.uniqueKeys.isEmpty && entity.relationships.isEmpty
        }

        func columnNames(inMask mask: Int64) -> [String] {
            var names: [String] = []
            for (bit, name) in columns.enumerated() where mask & (1 << Int64(bit)) != 0 {
                names.append(name)
            }
            return names
        }

        var primaryKey: PrimaryKey { entity.primaryKey! }

        func bit(of column: String) -> Int? { columns.firstIndex(of: column) }

        /// A row of an isolated entity (no unique keys, no references) projects from its own state alone.
        let isIsolated: Bool
    }

    let schema: Schema
    let byName: [String: EntityInfo]
    let byID: [Int64: EntityInfo]

    init(schema: Schema, registered: [(id: Int64, name: String, columns: [String])]) {
        self.schema = schema
        var byName: [String: EntityInfo] = [:]
        var byID: [Int64: EntityInfo] = [:]
        for row in registered {
            guard let entity = schema.entity(named: row.name) else { continue }
            var types: [String: AttributeType] = [:]
            for attribute in entity.attributes { types[attribute.name] = attribute.type }
            for relationship in entity.relationships {
                types[relationship.name] = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
            }
            let info = EntityInfo(id: row.id, entity: entity, columns: row.columns, columnTypes: types, sql: RowSQL(entity: entity, columns: row.columns))
            byName[row.name] = info
            byID[row.id] = info
        }
        self.byName = byName
        self.byID = byID
        referenced = Set(schema.entities.flatMap { $0.relationships.map(\.destination) })
    }

    /// Entities that some relationship points to: their structural changes can affect other rows.
    let referenced: Set<String>
}

/// The per-row statements of one entity, with every column in bit order.
struct RowSQL: Sendable {
    /// `SELECT <columns> FROM t WHERE <key> = ?` (or `SELECT 1` for an entity without columns).
    let select: String
    /// `INSERT INTO t(<key>, <columns>) VALUES (?, …)`.
    let insert: String
    /// `DELETE FROM t WHERE <key> = ?`.
    let delete: String

    init(entity: Entity, columns: [String]) {
        let table = SchemaSQL.quote(entity.name)
        let key = SchemaSQL.quote(entity.primaryKey?.name ?? "id")
        let selected = columns.isEmpty ? "1" : columns.map(SchemaSQL.quote).joined(separator: ", ")
        select = "SELECT \(selected) FROM \(table) WHERE \(key) = ?"
        let all = [key] + columns.map(SchemaSQL.quote)
        insert = "INSERT INTO \(table)(\(all.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: all.count).joined(separator: ", ")))"
        delete = "DELETE FROM \(table) WHERE \(key) = ?"
    }
}
