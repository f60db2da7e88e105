import LogsyncCore
import LogsyncSQLite

/// Hidden unique-key losers, found by the values of their unique keys (`_ls_alias_value`).
///
/// With two or more unique keys, the projection applies them in order (`docs/merge.md`, rule 3): a row
/// that lost on a later key won the earlier ones, so it still beats a newcomer with the same values on an
/// earlier key, though it is not in the table. The incremental projection finds a row's competitors by
/// value among the visible rows (the table's unique indexes) and, here, among the hidden ones. Every
/// candidate of the projection is one or the other: rows that are deleted, or hidden by a cascade, compete
/// for nothing. With one unique key, a hidden loser always has a visible winner with its values, so only
/// entities with two or more keep entries.
enum AliasValues {
    /// Whether `info`'s hidden losers need entries.
    static func isKept(for info: Catalog.EntityInfo) -> Bool { info.entity.uniqueKeys.count > 1 }

    /// The values of one unique key, encoded as row states encode them, or nil when one is NULL (such a key
    /// competes with nothing).
    static func encoded(_ values: [DatabaseValue]) -> [UInt8]? {
        guard !values.contains(where: \.isNull) else { return nil }
        var bytes: [UInt8] = []
        for value in values { RowStateCoding.appendValue(value, to: &bytes) }
        return bytes
    }

    /// Records the unique-key values of `primaryKey`, a hidden loser whose state is `state`.
    static func record(_ primaryKey: DatabaseValue, state: RowState, info: Catalog.EntityInfo, connection: Connection) throws {
        for (index, columns) in info.entity.uniqueKeys.enumerated() {
            guard let values = encoded(columns.map { state.columns[$0]?.value ?? .null }) else { continue }
            try connection.execute(
                "INSERT OR IGNORE INTO _ls_alias_value(entity, key, vals, pk) VALUES (?, ?, ?, ?)",
                [.integer(info.id), .integer(Int64(index)), .blob(values), primaryKey])
        }
    }

    static func forget(_ primaryKey: DatabaseValue, info: Catalog.EntityInfo, connection: Connection) throws {
        try connection.execute("DELETE FROM _ls_alias_value WHERE entity = ? AND pk = ?", [.integer(info.id), primaryKey])
    }

    /// The hidden losers whose unique key number `index` holds `values`.
    static func losers(withKey index: Int, values: [UInt8], info: Catalog.EntityInfo, connection: Connection) throws -> [DatabaseValue] {
        try connection.rows(
            "SELECT pk FROM _ls_alias_value WHERE entity = ? AND key = ? AND vals = ?",
            [.integer(info.id), .integer(Int64(index)), .blob(values)]
        ).map { $0[0] }
    }

    /// Fills `_ls_alias_value` from `_ls_alias` and the row states: for stores written before it existed,
    /// and after a schema change (an entity may have gained a second unique key).
    static func rebuild(connection: Connection, catalog: Catalog) throws {
        try connection.execute("DELETE FROM _ls_alias_value")
        let nodes = try NodeTable(connection: connection)
        for info in catalog.byID.values where isKept(for: info) {
            for row in try connection.rows(
                "SELECT a.pk, r.cl, r.state FROM _ls_alias a JOIN _ls_row r ON r.entity = a.entity AND r.pk = a.pk WHERE a.entity = ?",
                [.integer(info.id)])
            {
                guard case .integer(let length) = row[1], let causalLength = UInt64(exactly: length), case .blob(let bytes) = row[2] else {
                    continue
                }
                let state = try RowStateCoding.decode(bytes, causalLength: causalLength, info: info, nodes: nodes)
                try record(row[0], state: state, info: info, connection: connection)
            }
        }
    }
}
