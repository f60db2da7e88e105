import LogsyncCore
import LogsyncSQLite

extension MergeWriter {
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

    func refreshRows(_ merged: MergedRows, nodes: inout NodeTable) throws {
        var remaining: [RowKey: Bool] = [:]
        for row in merged.rows {
            if row.info.isIsolated {
                try refreshIsolated(
                    row.key, info: row.info, state: row.state, isNew: row.isNew, savesWithRow: row.savesWithRow,
                    structural: row.structural, remaining: &remaining, nodes: &nodes, fresh: row.fresh, found: row.found)
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

    func refreshRows(changed: [RowKey: Bool], nodes: inout NodeTable) throws {
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
    func refreshIsolated(
        _ key: RowKey, info: Catalog.EntityInfo, state: RowState, isNew: Bool, savesWithRow: Bool, structural: Bool,
        remaining: inout [RowKey: Bool], nodes: inout NodeTable, fresh: FreshRow? = nil, found: FoundRow? = nil
    ) throws {
        try writeIsolated(
            key.primaryKey, info: info, state: state, isNew: isNew, savesWithRow: savesWithRow, nodes: &nodes, fresh: fresh, found: found)
        if structural, info.isReferenced {
            for child in try children(of: key, info: info) { remaining[child] = true }
        }
    }

    /// The general projection: `remaining` rows, and the rows that depend on those of them that changed
    /// structurally, projected with ``MergeProjector`` over their neighbourhood.
    ///
    /// `known` holds states the caller has just written, so they are not read again.
    func refreshDependents(_ remaining: [RowKey: Bool], known: [RowKey: RowState], nodes: NodeTable) throws {
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
    /// `_ls_row`. `fresh`: `state` prepared as a first insert, its values and encoding ready. `found`: the row
    /// as the merge found it (``FoundRow``), written by rowid without another lookup.
    func writeIsolated(
        _ primaryKey: DatabaseValue, info: Catalog.EntityInfo, state: RowState, isNew: Bool, savesWithRow: Bool,
        nodes: inout NodeTable, fresh: FreshRow? = nil, found: FoundRow? = nil
    ) throws {
        let actual: [DatabaseValue]?
        if let found {
            actual = found.table?.values
        } else {
            actual = isNew ? nil : try baseValues(info, primaryKey)
        }
        let rowID = found?.table?.rowID
        guard state.exists else {
            if let rowID {
                try deleteRow(info, rowID: rowID, liveID: found?.liveID)
            } else if actual != nil {
                try deleteRow(info, primaryKey)
            }
            if savesWithRow { try saveState(state, primaryKey: primaryKey, info: info, previous: nil, nodes: &nodes) }
            return
        }
        // Isolated entities have no relationships: their columns are exactly their attributes.
        guard let actual else {
            let rowID: Int64
            do {
                rowID = try insertRow(info, primaryKey) { bit, _ in fresh?.values[bit] ?? info.value(at: bit, of: state) }
            } catch {
                guard isNew, (error as? SQLiteError)?.isConstraint == true, let stored = try loadLiveState(primaryKey, info: info, nodes: nodes) else {
                    throw error
                }
                // The row is in the table with a state in `_ls_live`: the same key inserted again. A state
                // the merge leaves as it was stays in `_ls_live` (a baseline loaded again, after a load that
                // stopped between batches, meets every row the first one wrote).
                var combined = stored
                combined.merge(state)
                if combined != stored { try saveState(combined, primaryKey: primaryKey, info: info, previous: stored, nodes: &nodes) }
                try writeIsolated(primaryKey, info: info, state: combined, isNew: false, savesWithRow: false, nodes: &nodes)
                return
            }
            if savesWithRow {
                try storeLiveState(state, rowID: rowID, primaryKey: primaryKey, info: info, nodes: &nodes, encoded: fresh?.encodedState)
            }
            return
        }
        var changed: [(bit: Int, value: DatabaseValue)] = []
        for bit in info.columns.indices {
            let value = info.value(at: bit, of: state)
            if actual[bit] != value { changed.append((bit, value)) }
        }
        guard !changed.isEmpty else { return }
        try updateRow(info, primaryKey, bits: changed, rowID: rowID)
    }
}
