import LogsyncCore
import LogsyncSQLite

/// The handle a ``Store/write(author:context:_:)`` body writes through. Valid only inside that body.
///
/// Everything written to synced tables, through these helpers or raw SQL, is captured in history.
public final class WriteTransaction {
    let connection: Connection
    let catalog: Catalog
    let path: String
    private let statements: GeneratedStatements

    init(connection: Connection, catalog: Catalog, path: String, statements: GeneratedStatements) {
        self.connection = connection
        self.catalog = catalog
        self.path = path
        self.statements = statements
    }

    /// Runs one SQL statement with arguments.
    public func execute(_ sql: String, _ arguments: [DatabaseValue] = []) throws {
        try connection.execute(sql, arguments)
    }

    /// Rows of a query, seeing this transaction's own uncommitted writes.
    public func rows(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        try connection.rows(sql, arguments)
    }

    /// Inserts a row. `values` must include the primary key; omitted columns take their defaults.
    public func insert(_ entity: String, _ values: [String: DatabaseValue]) throws {
        let info = try entityInfo(entity)
        let names = values.keys.sorted()
        let sql = try statements.sql(for: .insert, entity: entity, columns: names) {
            for name in names where name != info.primaryKey.name && info.columnTypes[name] == nil {
                throw unknownColumn(name, in: entity)
            }
            return "INSERT INTO \(SchemaSQL.quote(entity))(\(names.map(SchemaSQL.quote).joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
        }
        try connection.execute(sql, names.map { values[$0]! })
    }

    /// Sets columns of the row with `key`. Returns false when no such row exists.
    @discardableResult
    public func update(_ entity: String, key: DatabaseValue, _ values: [String: DatabaseValue]) throws -> Bool {
        let info = try entityInfo(entity)
        let names = values.keys.sorted()
        guard !names.isEmpty else { return try row(entity, key: key) != nil }
        let sql = try statements.sql(for: .update, entity: entity, columns: names) {
            for name in names where info.columnTypes[name] == nil {
                throw unknownColumn(name, in: entity)
            }
            return "UPDATE \(SchemaSQL.quote(entity)) SET " + names.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: ", ")
                + " WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?"
        }
        try connection.execute(sql, names.map { values[$0]! } + [key])
        return connection.changes > 0
    }

    /// Deletes the row with `key`, applying the delete rules of relationships that point to it.
    /// Returns false when no such row exists.
    @discardableResult
    public func delete(_ entity: String, key: DatabaseValue) throws -> Bool {
        let info = try entityInfo(entity)
        try connection.execute(
            "DELETE FROM \(SchemaSQL.quote(entity)) WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?", [key])
        return connection.changes > 0
    }

    /// The row with `key` as a dictionary of column values, or nil.
    public func row(_ entity: String, key: DatabaseValue) throws -> [String: DatabaseValue]? {
        let info = try entityInfo(entity)
        let columns = [info.primaryKey.name] + info.columns
        let sql =
            "SELECT \(columns.map(SchemaSQL.quote).joined(separator: ", ")) FROM \(SchemaSQL.quote(entity)) "
            + "WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?"
        guard let values = try connection.rows(sql, [key]).first else { return nil }
        return Dictionary(uniqueKeysWithValues: zip(columns, values))
    }

    private func entityInfo(_ name: String) throws -> Catalog.EntityInfo {
        guard let info = catalog.byName[name] else {
            throw StoreError(.unknownEntity, "'\(name)' is not an entity of the store's schema", path: path)
        }
        return info
    }

    private func unknownColumn(_ name: String, in entity: String) -> StoreError {
        StoreError(.unknownColumn, "'\(name)' is not a column of '\(entity)'", path: path)
    }
}

/// The SQL that ``WriteTransaction`` generates, built once per entity and column set and reused by every
/// later write: building and quoting it per row would cost more than the insert itself.
final class GeneratedStatements {
    enum Kind: Hashable { case insert, update }

    private struct Key: Hashable {
        let kind: Kind
        let entity: String
        let columns: [String]
    }

    private var cache: [Key: String] = [:]

    func sql(for kind: Kind, entity: String, columns: [String], build: () throws -> String) throws -> String {
        let key = Key(kind: kind, entity: entity, columns: columns)
        if let sql = cache[key] { return sql }
        let sql = try build()
        cache[key] = sql
        return sql
    }
}
