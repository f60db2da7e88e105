import LogsyncCore

extension Store {
    /// Inside a sync transaction: merges one transaction from another node into the row states,
    /// re-projects the rows it affects, and closes the visible result with a marker carrying the
    /// transaction's origin, author, context and timestamp, so contexts see it as one imported history
    /// transaction. Returns its token, or nil when nothing visible changed. `fresh`: its changes' prepared
    /// first inserts (``FreshRow``), where the segment's reader prepared them.
    func applyRemote(_ transaction: LogTransaction, from origin: NodeID, state: inout WriterState, fresh: [FreshRow?]? = nil) throws -> HistoryToken? {
        try captureMergeHistoryDirectly(&state)
        let connection = state.connection
        let writer = MergeWriter(state: state, catalog: catalog)
        let before = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log") ?? 0
        let clock = Clock(transaction.timestamp, origin)
        var merged = MergedRows(capacity: transaction.changes.count)
        var entitiesWithStates: [Int64: Bool] = [:]
        var entity: Catalog.EntityInfo?
        for (index, change) in transaction.changes.enumerated() {
            // A transaction's changes usually share an entity: compare the name before hashing it.
            if entity?.entity.name != change.entity { entity = catalog.byName[change.entity] }
            guard let info = entity else {
                throw StoreError(
                    .schema,
                    "transaction \(transaction.sequence) from node \(origin) changes entity '\(change.entity)', which this store's schema (version \(schema.version)) does not declare",
                    path: path)
            }
            try merge(
                change, info: info, at: clock, into: &merged, writer: writer, nodes: &state.nodes, entitiesWithStates: &entitiesWithStates,
                fresh: fresh?[index])
        }
        try writer.refresh(merged, nodes: &state.nodes)
        return try appendMarker(
            Marker(author: transaction.author, context: transaction.contextName, origin: origin.rawValue, timestamp: transaction.timestamp),
            ifLogGrewPast: before, state: &state)
    }

    /// Merges one change into its row's state (as this transaction left it, or as stored) and stores the
    /// result if it changed. `fresh`: the change prepared as a first insert (its state is the one computed
    /// here from an empty state).
    private func merge(
        _ change: LogChange, info: Catalog.EntityInfo, at clock: Clock, into merged: inout MergedRows, writer: MergeWriter,
        nodes: inout NodeTable, entitiesWithStates: inout [Int64: Bool], fresh: FreshRow?
    ) throws {
        let key = RowKey(change.entity, change.primaryKey)
        let position = merged.position(of: key)
        // A first insert almost always creates its row: store its state without looking for an old one
        // first, and fall back to the lookup when there is one after all (its update arrived earlier).
        // A row of an isolated entity gets its state in `_ls_live` when the projection inserts it; only
        // `_ls_row` is looked in here, and a state in `_ls_live` makes that insert fail instead.
        if position == nil, change.kind == .insert, change.causalLength == 1 {
            var next = fresh?.state ?? RowState()
            if fresh != nil || next.merge(change, at: clock) {
                let structural = writer.isStructural(info, from: nil, to: next)
                if info.isIsolated {
                    if try !writer.hasStoredState(change.primaryKey, info: info, entitiesWithStates: &entitiesWithStates) {
                        merged.record(key, info: info, state: next, at: nil, isNew: true, structural: structural, savesWithRow: true, fresh: fresh)
                        return
                    }
                } else if try writer.saveStateIfNew(next, primaryKey: change.primaryKey, info: info, nodes: &nodes) {
                    merged.record(key, info: info, state: next, at: nil, isNew: true, structural: structural)
                    return
                }
            }
        }
        var previous: RowState?
        // What was found of an isolated row the first time this transaction changes it, or before.
        var found: FoundRow?
        if let position {
            previous = merged.rows[position].state
            found = merged.rows[position].found
            if merged.rows[position].savesWithRow, let live = try writer.loadLiveState(change.primaryKey, info: info, nodes: nodes) {
                // The fast path did not look in `_ls_live`: another node inserted the key before. Saving the
                // state below takes it out of `_ls_live`, so it must hold that one too.
                previous?.merge(live)
                merged.foundLiveState(at: position)
            }
        } else if info.isIsolated {
            (found, previous) = try writer.findIsolated(change.primaryKey, info: info, nodes: nodes)
        } else {
            previous = try writer.loadState(change.primaryKey, info: info, nodes: nodes)
        }
        var next = previous ?? RowState()
        guard next.merge(change, at: clock) else { return }
        try writer.saveState(next, primaryKey: change.primaryKey, info: info, previous: previous, nodes: &nodes, found: found)
        merged.record(
            key, info: info, state: next, at: position, isNew: previous == nil,
            structural: writer.isStructural(info, from: previous, to: next), found: found)
    }

    /// Folds all local history, handing each transaction to `emit` (which persists it in the same SQLite
    /// transaction), and closes any re-projection writes with a merge marker.
    func exportLocal(emit: (LogTransaction) throws -> Void) throws -> Int {
        try syncTransaction { state, _ in try foldAll(&state, emit: emit) }
    }

    /// Applies transactions from `origin` in one SQLite transaction, after folding local history first so
    /// that row states are current. `emit` receives the folded local transactions.
    func applyRemote(_ transactions: [LogTransaction], from origin: NodeID, emit: (LogTransaction) throws -> Void) throws {
        try syncTransaction { state, _ in
            _ = try foldAll(&state, emit: emit)
            for transaction in transactions {
                _ = try applyRemote(transaction, from: origin, state: &state)
            }
        }
    }

    /// After a sync transaction's own merge writes: everything after the fold is this transaction's
    /// imported or merge-written history, which the fold would only skip. Moving the export token past it
    /// keeps the next fold from re-reading every import.
    func skipOwnMergeHistory(_ state: inout WriterState) throws {
        try state.connection.execute(
            """
            INSERT INTO _ls_meta(key, value) VALUES ('export_token', (SELECT ifnull(max(seq), 0) FROM _ls_log))
              ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)
            """)
    }

    func foldAll(_ state: inout WriterState, emit: (LogTransaction) throws -> Void) throws -> Int {
        var total = 0
        while true {
            let before = try state.connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log") ?? 0
            let (folded, more) = try foldLocalHistory(&state, emit: emit)
            _ = try appendMarker(Marker(origin: Origin.mergeStorageValue), ifLogGrewPast: before, state: &state)
            total += folded
            if !more { return total }
        }
    }
}
