import LogsyncCore
import LogsyncSQLite

/// Converts attributes in place (``Attribute/convertedFrom``) for one entity, inside the registration's
/// transaction, after the new columns were added and before the sources are contracted
/// (`docs/schema-evolution.md`, "Changing a type"):
///
/// - each row state's register of the source gets a converted register of the new attribute at the same
///   clock, as every node derives from the same changes (``LogNames``);
/// - the table's new column gets the converted value of the old one in every row that has a register of
///   it, or history not yet exported that writes it (packed inserts included; the table holds that latest
///   value, which the fold sends later); other rows keep the new column's default, as a node that never
///   saw a value of the source would;
/// - history's masks gain the new column's bit wherever the source's is set, so that this node's last
///   writes to the source, not yet exported, go out as writes to the new attribute.
struct TypeChange {
    let connection: Connection
    let entityID: Int64
    /// The entity with both the new attributes and their sources, and its columns in bit order.
    let info: Catalog.EntityInfo
    let conversions: [(source: Attribute, target: Attribute)]

    func run() throws {
        let exported = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_token'") ?? 0
        for (source, target) in conversions {
            guard let sourceBit = info.bit(of: source.name), let targetBit = info.bit(of: target.name) else { continue }
            // Rows this node wrote the source in, not yet exported: the table holds the value the fold will send.
            var unexported = Set<DatabaseValue>()
            for row in try connection.rows(
                "SELECT kind, pk FROM _ls_log WHERE entity = ? AND kind IN (1, 2, 3, ?) AND seq > ? AND (cols & (1 << ?)) != 0",
                [.integer(entityID), .integer(SchemaSQL.packedInsertsKind), .integer(exported), .integer(Int64(sourceBit))])
            {
                if case .integer(SchemaSQL.packedInsertsKind) = row[0], case .blob(let keys) = row[1] {
                    for key in try Store.packedKeys(keys) { unexported.insert(key) }
                } else {
                    unexported.insert(row[1])
                }
            }
            var withSource = Set<DatabaseValue>()
            try StateRewrite(connection: connection, entityID: entityID).run(from: info, to: info) { state, key in
                guard let register = state.columns[source.name] else { return false }
                state.columns[target.name] = Register(converted(register.value, source, target), register.clock)
                withSource.insert(key)
                return true
            }
            try convertValues(source: source, target: target, rows: withSource.union(unexported))
            try connection.execute(
                "UPDATE _ls_log SET cols = cols | (1 << ?1) WHERE entity = ?3 AND cols IS NOT NULL AND (cols & (1 << ?2)) != 0",
                [.integer(Int64(targetBit)), .integer(Int64(sourceBit)), .integer(entityID)])
        }
    }

    private func converted(_ value: DatabaseValue, _ source: Attribute, _ target: Attribute) -> DatabaseValue {
        TypeConversion.convert(value, from: source.type, to: target.type)
    }

    /// Sets the new column from the old one, converted, in the rows whose keys are `rows`.
    private func convertValues(source: Attribute, target: Attribute, rows: Set<DatabaseValue>) throws {
        guard !rows.isEmpty else { return }
        let table = SchemaSQL.quote(info.entity.name), key = SchemaSQL.quote(info.primaryKey.name)
        let update = try connection.prepare("UPDATE \(table) SET \(SchemaSQL.quote(target.name)) = ? WHERE \(key) = ?")
        var last: DatabaseValue?
        while true {
            let page = try connection.rows(
                "SELECT \(key), \(SchemaSQL.quote(source.name)) FROM \(table)\(last == nil ? "" : " WHERE \(key) > ?") ORDER BY \(key) LIMIT 4096",
                last.map { [$0] } ?? [])
            guard let final = page.last else { return }
            for row in page where rows.contains(row[0]) {
                try update.run([converted(row[1], source, target), row[0]])
            }
            last = final[0]
        }
    }
}
