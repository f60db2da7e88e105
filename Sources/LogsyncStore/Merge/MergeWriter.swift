import LogsyncCore
import LogsyncSQLite

/// Keeps a store's synced tables equal to the projection of its merged row states (`docs/merge.md`),
/// incrementally: runs inside a write transaction, on the writer connection.
///
/// Every row's ``RowState`` lives in `_ls_row` or, while a row an import inserted stays in the table, in
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
        self.capturesHistory = state.triggers.areOff
    }

    init(connection: Connection, catalog: Catalog, statements: MergeStatements, capturesHistory: Bool) {
        self.connection = connection
        self.catalog = catalog
        self.statements = statements
        self.capturesHistory = capturesHistory
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

    /// A row of an isolated entity as the merge first finds it, and its state, in one lookup by key
    /// (``RowSQL/found``) where ``loadState(_:info:nodes:)`` and the projection's ``baseValues(_:_:)`` would
    /// each look the key up, twice or three times. What is found lets the merge and the projection write
    /// the row and its live state by rowid (``FoundRow``). A state in both `_ls_row` and `_ls_live` is
    /// taken as their merge.
    func findIsolated(_ primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: NodeTable) throws -> (FoundRow, RowState?) {
        let statement = try statements.rows(of: info).found
        try bindRow(statement, primaryKey, info: info)
        guard try statement.step() else {
            throw StoreError(.sqlite, "looking up row \(primaryKey) of '\(info.entity.name)' returned no row")
        }
        defer { statement.reset() }
        let count = info.columns.count
        var found = FoundRow()
        if !statement.isNull(at: 0) {
            found.table = (statement.int64(at: 0), (0..<count).map { statement.value(at: $0 + 1) })
        }
        let live = try RowStateCoding.decode(statement, at: count + 2, info: info, nodes: nodes)
        if live != nil { found.liveID = statement.int64(at: count + 1) }
        var state = try RowStateCoding.decode(statement, at: count + 4, info: info, nodes: nodes)
        if let live {
            if state == nil { state = live } else { state?.merge(live) }
        }
        return (found, state)
    }

    /// Binds a row's entity id and key to parameters 1 and 2, as every per-row state and history statement
    /// takes them.
    func bindRow(_ statement: Statement, _ primaryKey: DatabaseValue, info: Catalog.EntityInfo) throws(SQLiteError) {
        try statement.bind(info.id, at: 1)
        try statement.bind(primaryKey, at: 2)
    }

    /// Runs `statement` with parameters (entity, pk) and decodes the state in its columns `at` (cl) and
    /// `at + 1` (state).
    func readState(
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
        guard try entityHasStoredStates(info, entitiesWithStates: &entitiesWithStates) else { return false }
        let statement = try statements.loadState()
        try bindRow(statement, primaryKey, info: info)
        defer { statement.reset() }
        return try statement.step()
    }

    /// Whether `_ls_row` held any state of `info`'s rows when the merge loop began (see
    /// ``hasStoredState(_:info:entitiesWithStates:)``).
    func entityHasStoredStates(_ info: Catalog.EntityInfo, entitiesWithStates: inout [Int64: Bool]) throws -> Bool {
        if let known = entitiesWithStates[info.id] { return known }
        let known = try connection.int64("SELECT EXISTS (SELECT 1 FROM _ls_row WHERE entity = ?)", [.integer(info.id)]) == 1
        entitiesWithStates[info.id] = known
        return known
    }

    /// Stores `state` and updates the reference index for the references that changed.
    func saveState(_ state: RowState, for key: RowKey, previous: RowState?, nodes: inout NodeTable) throws {
        guard let info = catalog.byName[key.entity] else { return }
        try saveState(state, primaryKey: key.primaryKey, info: info, previous: previous, nodes: &nodes)
    }

    /// `found`: what ``findIsolated(_:info:nodes:)`` found of the row, if it looked (an isolated row with a
    /// stored state): its state is then replaced by its `_ls_live` id, or stored in `_ls_row` without looking
    /// in `_ls_live`.
    func saveState(
        _ state: RowState, primaryKey: DatabaseValue, info: Catalog.EntityInfo, previous: RowState?, nodes: inout NodeTable,
        found: FoundRow? = nil
    ) throws {
        if let found, previous != nil {
            if let liveID = found.liveID {
                try writeState(state, primaryKey: primaryKey, info: info, with: try statements.updateLiveState(), first: liveID, nodes: &nodes)
                if connection.changes > 0 { return }
            } else {
                // Isolated rows have no references to update.
                try writeState(state, primaryKey: primaryKey, info: info, with: try statements.saveState(), nodes: &nodes)
                return
            }
        }
        if previous != nil, info.isIsolated {
            // A state found by its row's rowid is replaced where it is: a changed row keeps its state in
            // `_ls_live` until the row leaves the table (`docs/merge.md`). Isolated rows have no references.
            try writeState(state, primaryKey: primaryKey, info: info, with: try statements.rows(of: info).updateLiveState, nodes: &nodes)
            if connection.changes > 0 { return }
        }
        try writeState(state, primaryKey: primaryKey, info: info, with: try statements.saveState(), nodes: &nodes)
        if previous != nil {
            // Wherever it was, the state is in `_ls_row` now.
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
        nodes: inout NodeTable, encoded: [UInt8]? = nil
    ) throws {
        if encoded == nil {
            try RowStateCoding.encode(state, info: info, nodes: &nodes, connection: connection, into: &statements.encodeBuffer)
        }
        try statement.bind(first ?? info.id, at: 1)
        try statement.bind(primaryKey, at: 2)
        guard let causalLength = Int64(exactly: state.causalLength) else {
            throw StoreError(.constraint, "row \(primaryKey) of '\(info.entity.name)' has causal length \(state.causalLength), above what a store records")
        }
        try statement.bind(causalLength, at: 3)
        try (encoded ?? statements.encodeBuffer).withUnsafeBytes { try statement.bind(bytes: $0, at: 4) }
        try statement.run()
    }

    /// Keeps `_ls_ref` equal to the row's references: removes those it no longer has, adds the new ones.
    func updateReferences(of primaryKey: DatabaseValue, info: Catalog.EntityInfo, from previous: RowState?, to state: RowState) throws {
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
    func runReference(
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
    func isStructuralExistence(from old: RowState?, to new: RowState) -> Bool? {
        guard let old else { return true }
        if old.causalLength != new.causalLength || old.deletedAt != new.deletedAt { return true }
        return nil
    }

}
