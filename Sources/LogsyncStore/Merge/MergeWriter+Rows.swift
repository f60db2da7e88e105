import LogsyncCore

extension MergeWriter {
    // MARK: - Writing rows

    /// `INSERT` of a row with every column, in bit order; `value` gives each column's value. Returns the
    /// row's rowid.
    func insertRow(
        _ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue, value: (_ bit: Int, _ column: String) -> DatabaseValue
    ) throws -> Int64 {
        let statement = try statements.rows(of: info).insert
        try statement.bind(primaryKey, at: 1)
        for (bit, column) in info.columns.enumerated() {
            try statement.bind(value(bit, column), at: Int32(bit + 2))
        }
        try statement.run()
        // Read before the history row is appended, which has a rowid of its own.
        let rowID = connection.lastInsertedRowID
        if capturesHistory { try recordInsert(of: primaryKey, info: info) }
        return rowID
    }

    func deleteRow(_ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue) throws {
        if capturesHistory { try recordDelete(of: primaryKey, info: info) }
        let statement = try statements.rows(of: info).delete
        try statement.bind(primaryKey, at: 1)
        try statement.run()
    }

    /// ``deleteRow(_:_:)`` of a row the merge found (``FoundRow``): by its rowid and its live state's id.
    func deleteRow(_ info: Catalog.EntityInfo, rowID: Int64, liveID: Int64?) throws {
        if capturesHistory { try recordDelete(rowID: rowID, liveID: liveID, info: info) }
        let statement = try statements.rows(of: info).deleteByRowID
        try statement.bind(rowID, at: 1)
        try statement.run()
    }

    /// `UPDATE` of some columns (at least one) of one row, by name.
    func updateRow(
        _ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue, _ changes: [(column: String, value: DatabaseValue)]
    ) throws {
        let bits = changes.compactMap { change in info.bit(of: change.column).map { (bit: $0, value: change.value) } }
        try updateRow(info, primaryKey, bits: bits.sorted { $0.bit < $1.bit })
    }

    /// `UPDATE` of some columns (at least one) of one row, by bit, in increasing order. Its statement is
    /// prepared once per entity and column set (``MergeStatements/update(of:mask:byRowID:)``). `rowID`: the
    /// row's, when the merge found it (``FoundRow``), so that it is not looked up by key again.
    func updateRow(
        _ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue, bits changes: [(bit: Int, value: DatabaseValue)], rowID: Int64? = nil
    ) throws {
        let mask = changes.reduce(Int64(0)) { $0 | Int64(1) << Int64($1.bit) }
        let statement = try statements.update(of: info, mask: mask, byRowID: rowID != nil)
        for (index, change) in changes.enumerated() { try statement.bind(change.value, at: Int32(index) + 1) }
        if let rowID { try statement.bind(rowID, at: Int32(changes.count) + 1) } else { try statement.bind(primaryKey, at: Int32(changes.count) + 1) }
        try statement.run()
        if capturesHistory, connection.changes > 0 {
            try recordUpdate(of: primaryKey, info: info, mask: mask)
        }
    }

    func children(of key: RowKey, info: Catalog.EntityInfo) throws -> [RowKey] {
        try connection.rows("SELECT entity, pk FROM _ls_ref WHERE target_entity = ? AND target = ?", [.integer(info.id), key.primaryKey]).compactMap { row in
            guard case .integer(let entityID) = row[0], let child = catalog.byID[entityID] else { return nil }
            return RowKey(child.entity.name, row[1])
        }
    }

    /// The changed rows plus, for structural changes, every row whose projection can depend on them:
    /// rows referring to them (transitively), their unique-key losers and survivors, and rows sharing
    /// their unique-key values.
    func dependents(of changed: [RowKey: Bool], known: [RowKey: RowState], nodes: NodeTable) throws -> Set<RowKey> {
        var result = Set(changed.keys)
        var frontier = changed.filter(\.value).map(\.key)
        while let key = frontier.popLast() {
            guard let info = catalog.byName[key.entity] else { continue }
            var found = info.isReferenced ? try children(of: key, info: info) : []
            if !info.entity.uniqueKeys.isEmpty {
                found += try aliasPeers(of: key, info: info, state: try known[key] ?? loadState(key, nodes: nodes))
            }
            for peer in found where result.insert(peer).inserted {
                frontier.append(peer)
            }
        }
        return result
    }

    /// Rows that compete with `key` on a unique key: its survivor if it lost, its losers if it won, and the
    /// rows holding its unique values, both as the table shows them and as its state says: visible ones,
    /// and hidden ones that lost on a later key (``AliasValues``).
    func aliasPeers(of key: RowKey, info: Catalog.EntityInfo, state: RowState?) throws -> [RowKey] {
        guard !info.entity.uniqueKeys.isEmpty else { return [] }
        var peers: [RowKey] = []
        for row in try connection.rows(
            "SELECT pk FROM _ls_alias WHERE entity = ? AND survivor = ? UNION SELECT survivor FROM _ls_alias WHERE entity = ? AND pk = ?",
            [.integer(info.id), key.primaryKey, .integer(info.id), key.primaryKey])
        {
            peers.append(RowKey(key.entity, row[0]))
        }
        let visible = try baseRow(info, key.primaryKey)
        let keepsValues = AliasValues.isKept(for: info)
        for (index, uniqueKey) in info.entity.uniqueKeys.enumerated() {
            var candidates: [[DatabaseValue]] = []
            if let visible { candidates.append(uniqueKey.map { visible[$0] ?? .null }) }
            if let state { candidates.append(uniqueKey.map { state.columns[$0]?.value ?? .null }) }
            for values in Set(candidates) {
                peers += try visibleRows(info, matching: uniqueKey, values: values).map { RowKey(key.entity, $0) }
                guard keepsValues, let encoded = AliasValues.encoded(values) else { continue }
                peers += try AliasValues.losers(withKey: index, values: encoded, info: info, connection: connection).map { RowKey(key.entity, $0) }
            }
        }
        return peers
    }

    /// Loads the states needed to project `keys`: the rows themselves, every row they refer to (for
    /// visibility and inherited deletes, transitively), and unique-key competitors.
    func neighbourhood(of keys: Set<RowKey>, known: [RowKey: RowState], nodes: NodeTable) throws -> [RowKey: RowState] {
        var states: [RowKey: RowState] = [:]
        var queue = Array(keys)
        var seen = keys
        func enqueue(_ key: RowKey) {
            if seen.insert(key).inserted { queue.append(key) }
        }
        while let key = queue.popLast() {
            guard let info = catalog.byName[key.entity], let state = try known[key] ?? loadState(key, nodes: nodes) else { continue }
            states[key] = state
            for relationship in info.entity.relationships {
                if let target = state.columns[relationship.name]?.value, !target.isNull {
                    enqueue(RowKey(relationship.destination, target))
                }
            }
            for peer in try aliasPeers(of: key, info: info, state: state) { enqueue(peer) }
        }
        return states
    }

    func visibleRows(_ info: Catalog.EntityInfo, matching columns: [String], values: [DatabaseValue]) throws -> [DatabaseValue] {
        guard !values.contains(.null) else { return [] }
        let sql =
            "SELECT \(SchemaSQL.quote(info.primaryKey.name)) FROM \(SchemaSQL.quote(info.entity.name)) WHERE "
            + columns.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: " AND ")
        return try connection.rows(sql, values).map { $0[0] }
    }

    /// The visible row's non-key columns, or nil when it is not in the table.
    func baseRow(_ info: Catalog.EntityInfo, _ key: DatabaseValue) throws -> [String: DatabaseValue]? {
        guard let values = try baseValues(info, key) else { return nil }
        return Dictionary(uniqueKeysWithValues: zip(info.columns, values))
    }

    /// The row's column values in bit order, or nil when the table has no such row.
    func baseValues(_ info: Catalog.EntityInfo, _ key: DatabaseValue) throws -> [DatabaseValue]? {
        let statement = try statements.rows(of: info).select
        try statement.bind(key, at: 1)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        return (0..<info.columns.count).map { statement.value(at: $0) }
    }
}

/// The rows one remote transaction merged, in the order it first changed them, with their new states.
struct MergedRows {
    struct Row {
        let key: RowKey
        let info: Catalog.EntityInfo
        var state: RowState
        /// No state existed before this transaction: the row has never been in the table.
        var isNew: Bool
        /// Its state is not stored yet: the projection stores it with the row's insert, in `_ls_live`.
        /// Only for a row first merged by the fast path of a new row; any later change stores it.
        var savesWithRow: Bool
        /// Some change to it can alter other rows' projection.
        var structural: Bool
        /// The row's first insert as prepared (``FreshRow``), while ``state`` is still the state it holds.
        var fresh: FreshRow?
        /// Where the row and its live state were found, if the merge looked them up (``FoundRow``).
        var found: FoundRow?
    }

    private(set) var rows: [Row] = []
    var positions: [RowKey: Int] = [:]
    /// Every key is recorded once (a baseline's rows, whose keys strictly increase): no key is looked up,
    /// so none is indexed.
    let keysAreDistinct: Bool

    init(capacity: Int, keysAreDistinct: Bool = false) {
        self.keysAreDistinct = keysAreDistinct
        rows.reserveCapacity(capacity)
        if !keysAreDistinct { positions.reserveCapacity(capacity) }
    }

    /// Where `key` is in ``rows``, if this transaction has changed it.
    func position(of key: RowKey) -> Int? {
        precondition(!keysAreDistinct, "keys of distinct rows are not indexed")
        return positions[key]
    }

    /// Forgets the rows recorded so far (they were projected), keeping the storage for the next ones.
    mutating func removeAll() {
        rows.removeAll(keepingCapacity: true)
        positions.removeAll(keepingCapacity: true)
    }

    /// Records a change of `key`'s state (at `position`, if it had changed before).
    /// `savesWithRow`: the state was not stored (see ``Row/savesWithRow``); otherwise it was.
    mutating func record(
        _ key: RowKey, info: Catalog.EntityInfo, state: RowState, at position: Int?, isNew: Bool, structural: Bool,
        savesWithRow: Bool = false, fresh: FreshRow? = nil, found: FoundRow? = nil
    ) {
        if let position {
            rows[position].state = state
            rows[position].structural = rows[position].structural || structural
            rows[position].savesWithRow = rows[position].savesWithRow && savesWithRow
            rows[position].fresh = nil
        } else {
            if !keysAreDistinct { positions[key] = rows.count }
            rows.append(
                Row(key: key, info: info, state: state, isNew: isNew, savesWithRow: savesWithRow, structural: structural, fresh: fresh, found: found))
        }
    }

    /// The row at `position`, first merged as new, had a state in `_ls_live` after all: it is in the table.
    mutating func foundLiveState(at position: Int) {
        rows[position].isNew = false
        rows[position].fresh = nil
    }

    /// Every merged state, by key.
    func states() -> [RowKey: RowState] {
        var states: [RowKey: RowState] = Dictionary(minimumCapacity: rows.count)
        for row in rows { states[row.key] = row.state }
        return states
    }
}
