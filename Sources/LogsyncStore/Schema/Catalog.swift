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

        /// Each column's bit, for encoding row states without searching `columns`.
        let bits: [String: Int]
        /// Per column in bit order, the value a column without a register shows: the attribute's declared
        /// default, else NULL (relationships have none).
        let defaults: [DatabaseValue]

        /// Columns whose change can alter other rows' projection: references and unique-key columns.
        let structuralColumns: [String]
        /// Some relationship points to this entity, so its rows' existence matters to other rows.
        let isReferenced: Bool

        init(
            id: Int64, entity: Entity, columns: [String], columnTypes: [String: AttributeType], sql: RowSQL,
            isReferenced: Bool
        ) {
            self.id = id
            self.entity = entity
            self.columns = columns
            self.columnTypes = columnTypes
            self.sql = sql
            self.isIsolated = entity.uniqueKeys.isEmpty && entity.relationships.isEmpty
            self.structuralColumns = entity.relationships.map(\.name) + entity.uniqueKeys.flatMap { $0 }
            self.isReferenced = isReferenced
            var bits: [String: Int] = [:]
            for (bit, name) in columns.enumerated() where bits[name] == nil { bits[name] = bit }
            self.bits = bits
            self.defaults = columns.map { name in
                entity.attributes.first { $0.name == name }?.defaultValue.map(DatabaseValue.init) ?? .null
            }
        }

        /// `entity` described as a catalog of it alone would: for migrations that rewrite one entity's row
        /// states in a column layout the registered catalog does not have (``Contraction``, ``TypeChange``).
        /// Relationships take the key type of a destination the catalog does not hold: `uuid`.
        static func alone(_ entity: Entity, id: Int64, columns: [String]) -> EntityInfo {
            Catalog(schema: Schema(version: 1, entities: [entity]), registered: [(id, entity.name, columns)]).byID[id]!
        }

        func columnNames(inMask mask: Int64) -> [String] {
            var names: [String] = []
            for (bit, name) in columns.enumerated() where mask & (1 << Int64(bit)) != 0 {
                names.append(name)
            }
            return names
        }

        var primaryKey: PrimaryKey { entity.primaryKey! }

        /// The change mask of an insert, which sets every column.
        var allColumnsMask: Int64 { columns.isEmpty ? 0 : (Int64(1) << Int64(columns.count)) - 1 }

        /// The change mask of `columns`.
        func mask(of columns: some Sequence<String>) -> Int64 {
            columns.reduce(0) { mask, name in bits[name].map { mask | Int64(1) << Int64($0) } ?? mask }
        }

        func bit(of column: String) -> Int? { bits[column] }

        /// What the row's column at `bit` holds when the row projects from `state` alone (an isolated
        /// entity): its register's value, or the column's default.
        func value(at bit: Int, of state: RowState) -> DatabaseValue {
            state.columns[columns[bit]]?.value ?? defaults[bit]
        }

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
        let referenced = Set(schema.entities.flatMap { $0.relationships.map(\.destination) })
        for row in registered {
            guard let entity = schema.entity(named: row.name) else { continue }
            var types: [String: AttributeType] = [:]
            for attribute in entity.attributes { types[attribute.name] = attribute.type }
            for relationship in entity.relationships {
                types[relationship.name] = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
            }
            let info = EntityInfo(
                id: row.id, entity: entity, columns: row.columns, columnTypes: types, sql: RowSQL(entity: entity, columns: row.columns),
                isReferenced: referenced.contains(row.name))
            byName[row.name] = info
            byID[row.id] = info
        }
        self.byName = byName
        self.byID = byID
    }
}

/// The per-row statements of one entity, with every column in bit order.
struct RowSQL: Sendable {
    /// `SELECT <columns> FROM t WHERE <key> = ?` (or `SELECT 1` for an entity without columns).
    let select: String
    /// `SELECT rowid FROM t WHERE <key> = ?`.
    let rowID: String
    /// `INSERT INTO t(<key>, <columns>) VALUES (?, …)`.
    let insert: String
    private let insertInto: String
    private let insertRow: String

    /// ``insert`` of `rows` rows: `INSERT INTO t(…) VALUES (?, …), (?, …), …`.
    func insert(rows: Int) -> String {
        insertInto + Array(repeating: insertRow, count: rows).joined(separator: ", ")
    }
    private let table: String
    private let key: String

    /// `INSERT INTO t(<names>) VALUES (?, …)`: a row given only some columns (the others take their
    /// defaults). `names` may include the key's.
    func insert(columns names: [String]) -> String {
        "INSERT INTO \(table)(\(names.map(SchemaSQL.quote).joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
    }

    /// `UPDATE t SET <name> = ?, … WHERE <key> = ?` (or `WHERE rowid = ?`): parameters 1… the values in the
    /// order of `names`, then the key (or the rowid).
    func update(columns names: [String], byRowID: Bool = false) -> String {
        "UPDATE \(table) SET " + names.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: ", ")
            + (byRowID ? " WHERE rowid = ?" : " WHERE \(key) = ?")
    }
    /// `DELETE FROM t WHERE <key> = ?`.
    let delete: String
    /// `DELETE FROM t WHERE rowid = ?`.
    let deleteByRowID: String
    /// A row as the merge first finds it (``MergeWriter/findIsolated(_:info:nodes:)``), in one lookup by key:
    /// its rowid and columns in bit order (NULL when the table has no such row), its state in `_ls_live` (id,
    /// cl, state) and its state in `_ls_row` (cl, state), NULL where it has none; parameters (entity, key).
    let found: String
    /// ``deleteHistory`` of the row at a rowid; parameters (entity, rowid).
    let deleteHistoryByRowID: String
    /// The row's state in `_ls_live` (id, cl, state), if it has one there; parameters (entity, key).
    let liveState: String
    /// Deletes the row's state from `_ls_live`, if it has one there; parameters (entity, key).
    let deleteLiveState: String
    /// Replaces the row's state in `_ls_live`, if it has one there; parameters (entity, key, cl, state).
    let updateLiveState: String
    /// The ids of the entity's `_ls_live` states whose row is gone or has another key; parameter (entity).
    let liveOrphans: String
    /// What the delete trigger records, for a delete the merge runs with triggers off: the history row
    /// with the tombstone, read from the row before it goes; parameters (entity, key).
    let deleteHistory: String
    /// The delete trigger's move of the row's live state to `_ls_row`, likewise; parameters (entity, key).
    let moveLiveState: String

    init(entity: Entity, columns: [String]) {
        let table = SchemaSQL.quote(entity.name)
        let key = SchemaSQL.quote(entity.primaryKey?.name ?? "id")
        self.table = table
        self.key = key
        let selected = columns.isEmpty ? "1" : columns.map(SchemaSQL.quote).joined(separator: ", ")
        select = "SELECT \(selected) FROM \(table) WHERE \(key) = ?"
        rowID = "SELECT rowid FROM \(table) WHERE \(key) = ?"
        let all = [key] + columns.map(SchemaSQL.quote)
        insertInto = "INSERT INTO \(table)(\(all.joined(separator: ", "))) VALUES "
        insertRow = "(\(Array(repeating: "?", count: all.count).joined(separator: ", ")))"
        insert = insertInto + insertRow
        delete = "DELETE FROM \(table) WHERE \(key) = ?"
        deleteByRowID = "DELETE FROM \(table) WHERE rowid = ?"
        let columnsOfT = columns.map { "t.\(SchemaSQL.quote($0))" }
        found =
            "SELECT " + (["t.rowid"] + columnsOfT + ["l.id", "l.cl", "l.state", "r.cl", "r.state"]).joined(separator: ", ")
            + " FROM (SELECT ?2 AS k) AS p LEFT JOIN \(table) AS t ON t.\(key) = p.k"
            + " LEFT JOIN _ls_live AS l ON l.id = \(SchemaSQL.liveID(entity: "?1", rowID: "t.rowid")) AND l.pk = t.\(key)"
            + " LEFT JOIN _ls_row AS r ON r.entity = ?1 AND r.pk = p.k"
        let liveID = "(SELECT \(SchemaSQL.liveID(entity: "?1", rowID: "rowid")) FROM \(table) WHERE \(key) = ?2)"
        let live = "id = \(liveID) AND pk = ?2"
        liveState = "SELECT id, cl, state FROM _ls_live WHERE \(live)"
        deleteLiveState = "DELETE FROM _ls_live WHERE \(live)"
        updateLiveState = "UPDATE _ls_live SET cl = ?3, state = ?4 WHERE \(live)"
        let bits = SchemaSQL.liveRowIDBits
        liveOrphans =
            "SELECT l.id FROM _ls_live l WHERE \(SchemaSQL.liveRange(entity: "?1", id: "l.id")) "
            + "AND NOT EXISTS (SELECT 1 FROM \(table) t WHERE t.rowid = l.id & \((1 << bits) - 1) AND t.\(key) = l.pk)"
        let tombstoneOf =
            "INSERT INTO _ls_log(kind, entity, pk, cols, tomb) SELECT 3, ?1, \(key), 0, \(SchemaSQL.tombstone(of: entity, row: table)) "
            + "FROM \(table) WHERE "
        deleteHistory = tombstoneOf + "\(key) = ?2"
        deleteHistoryByRowID = tombstoneOf + "rowid = ?2"
        moveLiveState = SchemaSQL.moveLiveState(entity: "?1", id: liveID, key: "?2")
    }
}
