import LogsyncCore

/// Keeps a store's synced tables equal to the projection of its merged row states (`docs/merge.md`),
/// incrementally: runs inside a write transaction, on the writer connection.
///
/// Every row's ``RowState`` lives in `_ls_row` or, while its row is as an import inserted it, in
/// `_ls_live` (``SchemaSQL/rowStates``, `LiveStates.swift`). `_ls_ref` indexes raw references (including those of
/// hidden rows) so the rows that depend on a changed row can be found; `_ls_alias` records unique-key
/// losers and their survivors.
struct MergeWriter {
    let connection: Connection
    let catalog: Catalog
    let statements: MergeStatements
    /// Triggers are off: each write to a synced table records its history itself (`MergeCapture.swift`).
    let capturesHistory: Bool

    init(state: Store.WriterState, catalog: Catalog) {
        self.connection = state.connection
        self.catalog = catalog
        self.statements = state.mergeStatements
        self.capturesHistory = state.mergeCapturesHistory
    }

    // MARK: - Row states

    func loadState(_ key: RowKey, nodes: NodeTable) throws -> RowState? {
        guard let info = catalog.byName[key.entity] else { return nil }
        return try loadState(key.primaryKey, info: info, nodes: nodes)
    }

    /// The row's state, from `_ls_row` or else from `_ls_live`.
    func loadState(_ primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: NodeTable) throws -> RowState? {
        if let state = try readState(try statements.loadState(), primaryKey, info: info, nodes: nodes, at: 0) {
            return state
        }
        return try loadLiveState(primaryKey, info: info, nodes: nodes)
    }

    /// The row's state in `_ls_live`, if it has one there.
    func loadLiveState(_ primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: NodeTable) throws -> RowState? {
        try readState(try statements.rows(of: info).liveState, primaryKey, info: info, nodes: nodes, at: 1)
    }

    /// Binds a row's entity id and key to parameters 1 and 2, as every per-row state and history statement
    /// takes them.
    func bindRow(_ statement: Statement, _ primaryKey: DatabaseValue, info: Catalog.EntityInfo) throws(SQLiteError) {
        try statement.bind(info.id, at: 1)
        try statement.bind(primaryKey, at: 2)
    }

    /// Runs `statement` with parameters (entity, pk) and decodes the state in its columns `at` (cl) and
    /// `at + 1` (state).
    private func readState(
        _ statement: Statement, _ primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: NodeTable, at column: Int
    ) throws -> RowState? {
        try bindRow(statement, primaryKey, info: info)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        return try RowStateCoding.decode(statement, at: column, info: info, nodes: nodes)
    }

    /// Whether the row has a state in `_ls_row`. A row an import inserted may still have one in `_ls_live`:
    /// its insert into the table then fails (see ``refresh(_:nodes:)``).
    ///
    /// `entitiesWithStates` is the merge loop's memory, per entity, of whether `_ls_row` held any of its
    /// states when the loop began. Until the loop ends, `_ls_row` changes only for keys the transaction
    /// has merged, so when it held none, a key the transaction has not merged yet has none either and is
    /// not looked up: every row of a store's first import, as when a new device or account is set up.
    func hasStoredState(_ primaryKey: DatabaseValue, info: Catalog.EntityInfo, entitiesWithStates: inout [Int64: Bool]) throws -> Bool {
        let entityHasStates: Bool
        if let known = entitiesWithStates[info.id] {
            entityHasStates = known
        } else {
            entityHasStates = try connection.int64("SELECT EXISTS (SELECT 1 FROM _ls_row WHERE entity = ?)", [.integer(info.id)]) == 1
            entitiesWithStates[info.id] = entityHasStates
        }
        guard entityHasStates else { return false }
        let statement = try statements.loadState()
        try bindRow(statement, primaryKey, info: info)
        defer { statement.reset() }
        return try statement.step()
    }

    /// Stores `state` and updates the reference index for the references that changed.
    func saveState(_ state: RowState, for key: RowKey, previous: RowState?, nodes: inout NodeTable) throws {
        guard let info = catalog.byName[key.entity] else { return }
        try saveState(state, primaryKey: key.primaryKey, info: info, previous: previous, nodes: &nodes)
    }

    func saveState(
        _ state: RowState, primaryKey: DatabaseValue, info: Catalog.EntityInfo, previous: RowState?, nodes: inout NodeTable
    ) throws {
        try writeState(state, primaryKey: primaryKey, info: info, with: try statements.saveState(), nodes: &nodes)
        if previous != nil {
            // A changed state leaves `_ls_live` for good, wherever it was.
            let statement = try statements.rows(of: info).deleteLiveState
            try bindRow(statement, primaryKey, info: info)
            try statement.run()
        }
        try updateReferences(of: primaryKey, info: info, from: previous, to: state)
    }

    /// Stores the state of a row that has none yet, without looking for one first; returns false, storing
    /// nothing, when the row has a state after all. For inserts, which nearly always create their row: it
    /// saves the lookup that ``loadState(_:info:nodes:)`` would make before ``saveState(_:primaryKey:info:previous:nodes:)``.
    func saveStateIfNew(_ state: RowState, primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: inout NodeTable) throws -> Bool {
        try writeState(state, primaryKey: primaryKey, info: info, with: try statements.insertState(), nodes: &nodes)
        guard connection.changes > 0 else { return false }
        try updateReferences(of: primaryKey, info: info, from: nil, to: state)
        return true
    }

    /// Runs `statement`, an insert whose parameters are (`first`, pk, cl, state): into `_ls_row`, `first` is
    /// the entity (the default); into `_ls_live`, the live id.
    func writeState(
        _ state: RowState, primaryKey: DatabaseValue, info: Catalog.EntityInfo, with statement: Statement, first: Int64? = nil,
        nodes: inout NodeTable
    ) throws {
        try RowStateCoding.encode(state, info: info, nodes: &nodes, connection: connection, into: &statements.encodeBuffer)
        try statement.bind(first ?? info.id, at: 1)
        try statement.bind(primaryKey, at: 2)
        try statement.bind(Int64(state.causalLength), at: 3)
        try statements.encodeBuffer.withUnsafeBytes { try statement.bind(bytes: $0, at: 4) }
        try statement.run()
    }

    /// Keeps `_ls_ref` equal to the row's references: removes those it no longer has, adds the new ones.
    private func updateReferences(of primaryKey: DatabaseValue, info: Catalog.EntityInfo, from previous: RowState?, to state: RowState) throws {
        for relationship in info.entity.relationships {
            let old = previous?.columns[relationship.name]?.value ?? .null
            let new = state.columns[relationship.name]?.value ?? .null
            guard old != new, let target = catalog.byName[relationship.destination] else { continue }
            if !old.isNull {
                try runReference(try statements.deleteReference(), target: target, old, info: info, primaryKey)
            }
            if !new.isNull {
                try runReference(try statements.insertReference(), target: target, new, info: info, primaryKey)
            }
        }
    }

    /// Runs an `_ls_ref` statement whose parameters are (target entity, target, entity, pk).
    private func runReference(
        _ statement: Statement, target: Catalog.EntityInfo, _ value: DatabaseValue, info: Catalog.EntityInfo, _ primaryKey: DatabaseValue
    ) throws {
        try statement.bind(target.id, at: 1)
        try statement.bind(value, at: 2)
        try statement.bind(info.id, at: 3)
        try statement.bind(primaryKey, at: 4)
        try statement.run()
    }

    /// Whether a state change can alter other rows' projection: existence, deletes, references or
    /// unique-key columns changed.
    func isStructural(_ key: RowKey, from old: RowState?, to new: RowState) -> Bool {
        guard let info = catalog.byName[key.entity] else { return isStructuralExistence(from: old, to: new) ?? false }
        return isStructural(info, from: old, to: new)
    }

    func isStructural(_ info: Catalog.EntityInfo, from old: RowState?, to new: RowState) -> Bool {
        if let existence = isStructuralExistence(from: old, to: new) { return existence }
        guard let old else { return true }
        return info.structuralColumns.contains { old.columns[$0] != new.columns[$0] }
    }

    /// True when existence or deletes changed, nil when only the columns can tell.
    private func isStructuralExistence(from old: RowState?, to new: RowState) -> Bool? {
        guard let old else { return true }
        if old.causalLength != new.causalLength || old.deletedAt != new.deletedAt { return true }
        return nil
    }

    // MARK: - Projection

    /// Re-projects the rows one remote transaction merged, and the rows that depend on those that changed
    /// structurally, writing only the differences to the synced tables. The caller has set the merging
    /// flag, so delete-rule triggers stand aside.
    ///
    /// Rows of isolated entities are written in the order they were merged, straight from their states.
    /// Rows the merge found no state for (``MergedRows/Row/savesWithRow``) get theirs stored in `_ls_live`
    /// with the row's insert. If the row is in the table after all (its state is in `_ls_live`, which the
    /// merge did not look in), the insert fails: the two states are merged and the row updated instead.
    func refresh(_ merged: MergedRows, nodes: inout NodeTable) throws {
        try packingInserts { try refreshRows(merged, nodes: &nodes) }
    }

    private func refreshRows(_ merged: MergedRows, nodes: inout NodeTable) throws {
        var remaining: [RowKey: Bool] = [:]
        for row in merged.rows {
            if row.info.isIsolated {
                try refreshIsolated(
                    row.key, info: row.info, state: row.state, isNew: row.isNew, savesWithRow: row.savesWithRow,
                    structural: row.structural, remaining: &remaining, nodes: &nodes)
            } else {
                remaining[row.key] = (remaining[row.key] ?? false) || row.structural
            }
        }
        guard !remaining.isEmpty else { return }
        try refreshDependents(remaining, known: merged.states(), nodes: nodes)
    }

    /// Re-projects `changed` rows (true: changed structurally), as ``refresh(_:nodes:)`` does, for changes
    /// folded from local history: those rows are already in the table as the local writes left them.
    func refresh(changed: [RowKey: Bool], nodes: inout NodeTable) throws {
        try packingInserts { try refreshRows(changed: changed, nodes: &nodes) }
    }

    private func refreshRows(changed: [RowKey: Bool], nodes: inout NodeTable) throws {
        guard !changed.isEmpty else { return }
        var remaining: [RowKey: Bool] = [:]
        for (key, structural) in changed {
            guard let info = catalog.byName[key.entity], info.isIsolated, let state = try loadState(key.primaryKey, info: info, nodes: nodes) else {
                remaining[key] = (remaining[key] ?? false) || structural
                continue
            }
            try refreshIsolated(
                key, info: info, state: state, isNew: false, savesWithRow: false, structural: structural, remaining: &remaining,
                nodes: &nodes)
        }
        guard !remaining.isEmpty else { return }
        try refreshDependents(remaining, known: [:], nodes: nodes)
    }

    /// Rows of isolated entities project from their own state: write them directly, and pass on only
    /// what depends on them (rows referring to them, after a structural change).
    private func refreshIsolated(
        _ key: RowKey, info: Catalog.EntityInfo, state: RowState, isNew: Bool, savesWithRow: Bool, structural: Bool,
        remaining: inout [RowKey: Bool], nodes: inout NodeTable
    ) throws {
        try writeIsolated(key.primaryKey, info: info, state: state, isNew: isNew, savesWithRow: savesWithRow, nodes: &nodes)
        if structural, info.isReferenced {
            for child in try children(of: key, info: info) { remaining[child] = true }
        }
    }

    /// The general projection: `remaining` rows, and the rows that depend on those of them that changed
    /// structurally, projected with ``MergeProjector`` over their neighbourhood.
    ///
    /// `known` holds states the caller has just written, so they are not read again.
    private func refreshDependents(_ remaining: [RowKey: Bool], known: [RowKey: RowState], nodes: NodeTable) throws {
        let affected = try dependents(of: remaining, known: known, nodes: nodes)
        let states = try neighbourhood(of: affected, known: known, nodes: nodes)
        let (projection, aliases) = MergeProjector(schema: catalog.schema, rows: states).evaluate()

        var deletes: [(Catalog.EntityInfo, DatabaseValue)] = []
        var updates: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue], [String: DatabaseValue])] = []
        var inserts: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue])] = []
        for key in affected.sorted() {
            guard let info = catalog.byName[key.entity] else { continue }
            let desired = projection.row(key.entity, key.primaryKey)
            let actual = try baseRow(info, key.primaryKey)
            switch (actual, desired) {
            case (.some, nil): deletes.append((info, key.primaryKey))
            case (nil, .some(let values)): inserts.append((info, key.primaryKey, values))
            case (.some(let current), .some(let values)) where current != values:
                updates.append((info, key.primaryKey, current, values))
            default: break
            }
            guard !info.entity.uniqueKeys.isEmpty else { continue }
            try connection.execute("DELETE FROM _ls_alias WHERE entity = ? AND pk = ?", [.integer(info.id), key.primaryKey])
            let keepsValues = AliasValues.isKept(for: info)
            if keepsValues { try AliasValues.forget(key.primaryKey, info: info, connection: connection) }
            if let survivor = aliases[key] {
                try connection.execute(
                    "INSERT INTO _ls_alias(entity, pk, survivor) VALUES (?, ?, ?)", [.integer(info.id), key.primaryKey, survivor])
                if keepsValues, let state = states[key] {
                    try AliasValues.record(key.primaryKey, state: state, info: info, connection: connection)
                }
            }
        }
        for (info, key) in deletes {
            try deleteRow(info, key)
        }
        var deferred: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue])] = []
        for (info, key, current, values) in updates {
            do {
                try updateRow(info, key, info.columns.filter { current[$0] != values[$0] }.map { ($0, values[$0] ?? .null) })
            } catch {
                guard (error as? SQLiteError)?.isConstraint == true else { throw error }
                // Two rows trading unique values: take this one out and put it back after the others.
                try deleteRow(info, key)
                deferred.append((info, key, values))
            }
        }
        for (info, key, values) in inserts + deferred {
            _ = try insertRow(info, key) { _, column in values[column] ?? .null }
        }
    }

    /// Writes the projection of a row that depends on nothing but its own state: present with its
    /// registers (or defaults) while its causal length is odd, absent otherwise. A row never seen before is
    /// not in the table (local history is always folded before a merge), so it is not looked up.
    ///
    /// `savesWithRow`: the state is not stored yet; store it in `_ls_live` if the row is inserted, else in
    /// `_ls_row`.
    private func writeIsolated(
        _ primaryKey: DatabaseValue, info: Catalog.EntityInfo, state: RowState, isNew: Bool, savesWithRow: Bool,
        nodes: inout NodeTable
    ) throws {
        let actual = isNew ? nil : try baseRow(info, primaryKey)
        guard state.exists else {
            if actual != nil { try deleteRow(info, primaryKey) }
            if savesWithRow { try saveState(state, primaryKey: primaryKey, info: info, previous: nil, nodes: &nodes) }
            return
        }
        // Isolated entities have no relationships: their columns are exactly their attributes.
        guard let actual else {
            let rowID: Int64
            do {
                rowID = try insertRow(info, primaryKey) { bit, column in state.columns[column]?.value ?? info.defaults[bit] }
            } catch {
                guard isNew, (error as? SQLiteError)?.isConstraint == true, let stored = try loadLiveState(primaryKey, info: info, nodes: nodes) else {
                    throw error
                }
                // The row is in the table with a state in `_ls_live`: the same key inserted again.
                var combined = stored
                combined.merge(state)
                try saveState(combined, primaryKey: primaryKey, info: info, previous: stored, nodes: &nodes)
                try writeIsolated(primaryKey, info: info, state: combined, isNew: false, savesWithRow: false, nodes: &nodes)
                return
            }
            if savesWithRow {
                try storeLiveState(state, rowID: rowID, primaryKey: primaryKey, info: info, nodes: &nodes)
            }
            return
        }
        var changed: [(column: String, value: DatabaseValue)] = []
        for (bit, column) in info.columns.enumerated() {
            let value = state.columns[column]?.value ?? info.defaults[bit]
            if actual[column] != value { changed.append((column, value)) }
        }
        guard !changed.isEmpty else { return }
        try updateRow(info, primaryKey, changed)
    }

    // MARK: - Writing rows

    /// `INSERT` of a row with every column, in bit order; `value` gives each column's value. Returns the
    /// row's rowid.
    private func insertRow(
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

    private func deleteRow(_ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue) throws {
        if capturesHistory { try recordDelete(of: primaryKey, info: info) }
        let statement = try statements.rows(of: info).delete
        try statement.bind(primaryKey, at: 1)
        try statement.run()
    }

    /// `UPDATE` of some columns (at least one) of one row. Rarer than inserts and with varying columns, so
    /// its statements are found by their SQL in the connection's cache.
    private func updateRow(
        _ info: Catalog.EntityInfo, _ primaryKey: DatabaseValue, _ changes: [(column: String, value: DatabaseValue)]
    ) throws {
        let sql =
            "UPDATE \(SchemaSQL.quote(info.entity.name)) SET "
            + changes.map { "\(SchemaSQL.quote($0.column)) = ?" }.joined(separator: ", ")
            + " WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?"
        try connection.execute(sql, changes.map(\.value) + [primaryKey])
        if capturesHistory, connection.changes > 0 {
            try recordUpdate(of: primaryKey, info: info, mask: info.mask(of: changes.map(\.column)))
        }
    }

    private func children(of key: RowKey, info: Catalog.EntityInfo) throws -> [RowKey] {
        try connection.rows("SELECT entity, pk FROM _ls_ref WHERE target_entity = ? AND target = ?", [.integer(info.id), key.primaryKey]).compactMap { row in
            guard case .integer(let entityID) = row[0], let child = catalog.byID[entityID] else { return nil }
            return RowKey(child.entity.name, row[1])
        }
    }

    /// The changed rows plus, for structural changes, every row whose projection can depend on them:
    /// rows referring to them (transitively), their unique-key losers and survivors, and rows sharing
    /// their unique-key values.
    private func dependents(of changed: [RowKey: Bool], known: [RowKey: RowState], nodes: NodeTable) throws -> Set<RowKey> {
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
    private func aliasPeers(of key: RowKey, info: Catalog.EntityInfo, state: RowState?) throws -> [RowKey] {
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
    private func neighbourhood(of keys: Set<RowKey>, known: [RowKey: RowState], nodes: NodeTable) throws -> [RowKey: RowState] {
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

    private func visibleRows(_ info: Catalog.EntityInfo, matching columns: [String], values: [DatabaseValue]) throws -> [DatabaseValue] {
        guard !values.contains(.null) else { return [] }
        let sql =
            "SELECT \(SchemaSQL.quote(info.primaryKey.name)) FROM \(SchemaSQL.quote(info.entity.name)) WHERE "
            + columns.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: " AND ")
        return try connection.rows(sql, values).map { $0[0] }
    }

    /// The visible row's non-key columns, or nil when it is not in the table.
    func baseRow(_ info: Catalog.EntityInfo, _ key: DatabaseValue) throws -> [String: DatabaseValue]? {
        let statement = try statements.rows(of: info).select
        try statement.bind(key, at: 1)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        var row: [String: DatabaseValue] = Dictionary(minimumCapacity: info.columns.count)
        for (index, column) in info.columns.enumerated() {
            row[column] = statement.value(at: index)
        }
        return row
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
    }

    private(set) var rows: [Row] = []
    private var positions: [RowKey: Int] = [:]

    init(capacity: Int) {
        rows.reserveCapacity(capacity)
        positions.reserveCapacity(capacity)
    }

    /// Where `key` is in ``rows``, if this transaction has changed it.
    func position(of key: RowKey) -> Int? { positions[key] }

    /// Records a change of `key`'s state (at `position`, if it had changed before).
    /// `savesWithRow`: the state was not stored (see ``Row/savesWithRow``); otherwise it was.
    mutating func record(
        _ key: RowKey, info: Catalog.EntityInfo, state: RowState, at position: Int?, isNew: Bool, structural: Bool,
        savesWithRow: Bool = false
    ) {
        if let position {
            rows[position].state = state
            rows[position].structural = rows[position].structural || structural
            rows[position].savesWithRow = rows[position].savesWithRow && savesWithRow
        } else {
            positions[key] = rows.count
            rows.append(Row(key: key, info: info, state: state, isNew: isNew, savesWithRow: savesWithRow, structural: structural))
        }
    }

    /// The row at `position`, first merged as new, had a state in `_ls_live` after all: it is in the table.
    mutating func foundLiveState(at position: Int) {
        rows[position].isNew = false
    }

    /// Every merged state, by key.
    func states() -> [RowKey: RowState] {
        var states: [RowKey: RowState] = Dictionary(minimumCapacity: rows.count)
        for row in rows { states[row.key] = row.state }
        return states
    }
}
