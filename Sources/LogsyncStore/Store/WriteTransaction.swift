import LogsyncCore
import LogsyncSQLite

/// The handle a ``Store/write(author:context:_:)`` body writes through. Valid only inside that body.
///
/// Everything written to synced tables, through these helpers or raw SQL, is captured in history. The
/// helpers record their history themselves, which costs less than the capture triggers that record raw
/// SQL (`LocalCapture.swift`); what history holds is the same either way.
public final class WriteTransaction {
    let connection: Connection
    let catalog: Catalog
    let path: String
    private let capture: LocalCapture

    init(connection: Connection, catalog: Catalog, path: String, capture: LocalCapture) {
        self.connection = connection
        self.catalog = catalog
        self.path = path
        self.capture = capture
    }

    /// Runs one SQL statement with arguments.
    public func execute(_ sql: String, _ arguments: [DatabaseValue] = []) throws {
        let statement = try connection.cached(sql)
        try capture.beforeRawSQL(statement, catalog: catalog)
        try statement.run(arguments)
    }

    /// Rows of a query, seeing this transaction's own uncommitted writes.
    public func rows(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        let statement = try connection.cached(sql)
        try capture.beforeRawSQL(statement, catalog: catalog)
        return try statement.rows(arguments)
    }

    /// Inserts a row. `values` must include the primary key; omitted columns take their defaults.
    public func insert(_ entity: String, _ values: [String: DatabaseValue]) throws {
        try capture.insert(try entityInfo(entity), values, catalog: catalog, path: path)
    }

    /// Sets columns of the row with `key`. Returns false when no such row exists.
    @discardableResult
    public func update(_ entity: String, key: DatabaseValue, _ values: [String: DatabaseValue]) throws -> Bool {
        let info = try entityInfo(entity)
        guard !values.isEmpty else { return try row(entity, key: key) != nil }
        return try capture.update(info, key: key, values, catalog: catalog, path: path)
    }

    /// Deletes the row with `key`, applying the delete rules of relationships that point to it.
    /// Returns false when no such row exists.
    @discardableResult
    public func delete(_ entity: String, key: DatabaseValue) throws -> Bool {
        try capture.delete(try entityInfo(entity), key: key, catalog: catalog)
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
}
