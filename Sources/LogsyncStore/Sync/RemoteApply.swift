import LogsyncCore

extension Store {
    /// Inside a sync transaction: merges one transaction from another node into the row states,
    /// re-projects the rows it affects, and closes the visible result with a marker carrying the
    /// transaction's origin, author, context and timestamp, so contexts see it as one imported history
    /// transaction. Returns its token, or nil when nothing visible changed.
    func applyRemote(_ transaction: LogTransaction, from origin: NodeID, state: inout WriterState) throws -> HistoryToken? {
        let connection = state.connection
        let writer = MergeWriter(connection: connection, catalog: catalog)
        let before = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log") ?? 0
        let clock = Clock(transaction.timestamp, origin)
        var changed: [RowKey: Bool] = [:]
        var known: [RowKey: RowState] = [:]
        var new: Set<RowKey> = []
        for change in transaction.changes {
            guard catalog.byName[change.entity] != nil else {
                throw StoreError(
                    .schema,
                    "transaction \(transaction.sequence) from node \(origin) changes entity '\(change.entity)', which this store's schema (version \(schema.version)) does not declare",
                    path: path)
            }
            let key = RowKey(change.entity, change.primaryKey)
            let previous = try known[key] ?? writer.loadState(key, nodes: state.nodes)
            var next = previous ?? RowState()
            guard next.merge(change, at: clock) else { continue }
            try writer.saveState(next, for: key, previous: previous, nodes: &state.nodes)
            known[key] = next
            if previous == nil { new.insert(key) }
            changed[key] = (changed[key] ?? false) || writer.isStructural(key, from: previous, to: next)
        }
        try writer.refresh(changed: changed, known: known, new: new, nodes: state.nodes)
        return try appendMarker(
            Marker(author: transaction.author, context: transaction.contextName, origin: origin.rawValue, timestamp: transaction.timestamp),
            ifLogGrewPast: before, state: &state)
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
