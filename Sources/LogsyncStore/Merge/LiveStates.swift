import LogsyncCore
import LogsyncSQLite

/// What ``MergeWriter/findIsolated(_:info:nodes:)`` found of a row of an isolated entity: where the row and
/// its live state are, so that the merge and the projection write them by rowid instead of looking the key
/// up again. Valid until the transaction's projection has written the row: nothing else writes it meanwhile.
struct FoundRow {
    /// The row's rowid and its columns in bit order; nil when the table has no such row.
    var table: (rowID: Int64, values: [DatabaseValue])?
    /// The id of the row's state in `_ls_live`; nil when it has none there.
    var liveID: Int64?
}

/// States in `_ls_live` (``SchemaSQL/rowStates``): stored with the insert of a row an import created, found
/// through that row's rowid, and moved to `_ls_row` when the rowid no longer leads to them.
extension MergeWriter {
    /// Stores the state of a row the merge has just inserted at `rowID`. An orphan holding that key (its
    /// row was replaced or renumbered behind logsync's back) is moved to `_ls_row` first. A rowid too large
    /// for a live key (``SchemaSQL/liveID(entity:rowID:)``) stores the state in `_ls_row`.
    ///
    /// `encoded`: `state` already encoded with this writer's node indexes (``FreshRow``).
    func storeLiveState(
        _ state: RowState, rowID: Int64, primaryKey: DatabaseValue, info: Catalog.EntityInfo, nodes: inout NodeTable,
        encoded: [UInt8]? = nil
    ) throws {
        guard let id = SchemaSQL.liveID(entity: info.id, rowID: rowID) else {
            try saveState(state, primaryKey: primaryKey, info: info, previous: nil, nodes: &nodes)
            return
        }
        try insertingLiveState(at: id, info: info, nodes: &nodes) { nodes in
            try writeState(state, primaryKey: primaryKey, info: info, with: try statements.insertLiveState(), first: id, nodes: &nodes, encoded: encoded)
        }
    }

    /// Runs `insert`, which puts a state into `_ls_live` at `id`; when an orphan holds that id, moves the
    /// orphan to `_ls_row` and runs `insert` again.
    func insertingLiveState(
        at id: Int64, info: Catalog.EntityInfo, nodes: inout NodeTable, _ insert: (inout NodeTable) throws -> Void
    ) throws {
        do {
            try insert(&nodes)
        } catch let error as SQLiteError where error.isConstraint {
            try rehomeLiveState(info: info, id: id, nodes: &nodes)
            try insert(&nodes)
        }
    }

    /// Moves the state at `id` in `_ls_live` to `_ls_row`, merged with any state the row has there (a row
    /// replaced by another program gets a new state when its insert is folded).
    func rehomeLiveState(info: Catalog.EntityInfo, id: Int64, nodes: inout NodeTable) throws {
        guard
            let row = try connection.rows("SELECT pk, cl, state FROM _ls_live WHERE id = ?", [.integer(id)]).first,
            case .integer(let length) = row[1], let causalLength = UInt64(exactly: length), case .blob(let bytes) = row[2]
        else { return }
        let orphan = try RowStateCoding.decode(bytes, causalLength: causalLength, info: info, nodes: nodes)
        try connection.execute("DELETE FROM _ls_live WHERE id = ?", [.integer(id)])
        let stored = try loadState(row[0], info: info, nodes: nodes)
        var combined = orphan
        if let stored { combined.merge(stored) }
        try saveState(combined, primaryKey: row[0], info: info, previous: stored ?? orphan, nodes: &nodes)
    }

    /// Moves every state in `_ls_live` whose rowid no longer leads to its row to `_ls_row`.
    func rehomeLiveStates(nodes: inout NodeTable) throws {
        for info in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
            for row in try connection.rows(info.sql.liveOrphans, [.integer(info.id)]) {
                guard case .integer(let id) = row[0] else { continue }
                try rehomeLiveState(info: info, id: id, nodes: &nodes)
            }
        }
    }
}

extension Store {
    /// At the start of a sync transaction: when the schema cookie changed since the last check (`VACUUM`,
    /// which may renumber rowids, bumps it, as does any schema change), moves orphaned live states to
    /// `_ls_row` before anything looks for them.
    func rehomeLiveStatesIfSchemaChanged(_ state: inout WriterState) throws {
        let connection = state.connection
        let cookie = try connection.int64("PRAGMA schema_version") ?? 0
        guard cookie != state.liveStatesCheckedAt else { return }
        let checked = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'live_checked'")
        if checked != cookie {
            let writer = MergeWriter(state: state, catalog: catalog)
            try writer.rehomeLiveStates(nodes: &state.nodes)
            try connection.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('live_checked', ?)", [.integer(cookie)])
        }
        state.liveStatesCheckedAt = cookie
    }
}
