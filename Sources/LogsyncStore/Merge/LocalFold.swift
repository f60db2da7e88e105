import LogsyncCore

extension Store {
    /// The node id that clocks this store's local changes.
    var node: NodeID { NodeID(nodeID) }

    /// Inside a sync transaction: turns local history not yet exported into log transactions numbered
    /// with this node's next sequence numbers, merges them into the row states, and re-projects rows whose
    /// visibility they affect (a unique-key loser reappears when its survivor is deleted locally). Imported
    /// and merge-written transactions are skipped: a node never re-exports what it imported.
    ///
    /// Reads whole history transactions spanning at most `rowLimit` log rows (or one transaction, if a
    /// single one is larger), so memory does not grow with the amount of history waiting. `emit` receives
    /// each folded transaction in order and must persist it (in the outbox) in the same SQLite
    /// transaction. Returns how many were folded and whether history remains.
    func foldLocalHistory(
        _ state: inout WriterState, rowLimit: Int64 = 20_000, emit: (LogTransaction) throws -> Void
    ) throws -> (folded: Int, more: Bool) {
        let connection = state.connection
        let exported = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_token'") ?? 0
        var sequence = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_seq'") ?? 0
        let withinLimit = try connection.int64(
            "SELECT max(seq) FROM _ls_log WHERE kind = 0 AND seq > ? AND seq <= ?", [.integer(exported), .integer(exported + rowLimit)])
        guard let bound = try withinLimit
            ?? connection.int64("SELECT seq FROM _ls_log WHERE kind = 0 AND seq > ? ORDER BY seq LIMIT 1", [.integer(exported)])
        else { return (0, false) }

        let rows = try connection.rows(
            "SELECT seq, kind, entity, pk, cols, hlc, author, context, origin FROM _ls_log WHERE seq > ? AND seq <= ? ORDER BY seq",
            [.integer(exported), .integer(bound)])
        let writer = MergeWriter(state: state, catalog: catalog)
        var pending: [[DatabaseValue]] = []
        var changed: [RowKey: Bool] = [:]
        var folded = 0
        for row in rows {
            guard case .integer(let kind) = row[1] else { continue }
            if kind != 0 {
                pending.append(row)
                continue
            }
            defer { pending = [] }
            guard row[8].isNull, case .integer(let hlc) = row[5] else { continue }
            sequence += 1
            let clock = Clock(HLCTimestamp(storageValue: hlc), node)
            var changes: [LogChange] = []
            for change in pending {
                guard case .integer(let kindValue) = change[1], case .integer(let entityID) = change[2],
                    let info = catalog.byID[entityID], case .integer(let mask) = change[4]
                else { continue }
                if kindValue == SchemaSQL.packedInsertsKind {
                    // Inserts the library's helpers recorded as one row (`LocalCapture.swift`): one change per key.
                    guard case .blob(let keys) = change[3] else { continue }
                    for key in try Self.packedKeys(keys) {
                        changes.append(
                            try foldChange(.insert, info: info, key: key, mask: mask, clock: clock, writer: writer, state: &state, changed: &changed))
                    }
                    continue
                }
                guard let kind = ChangeKind(rawValue: Int(kindValue)) else { continue }
                changes.append(
                    try foldChange(kind, info: info, key: change[3], mask: mask, clock: clock, writer: writer, state: &state, changed: &changed))
            }
            // In the log's names: a renamed attribute travels under the name it was first declared with.
            try emit(changeRules.names.log(LogTransaction(
                sequence: UInt64(sequence), timestamp: clock.timestamp, author: row[6].text, contextName: row[7].text,
                changes: changes)))
            folded += 1
        }
        try writer.refresh(changed: changed, nodes: &state.nodes)
        try connection.execute(
            "INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('export_token', ?), ('export_seq', ?)",
            [.integer(bound), .integer(sequence)])
        let more = try connection.int64("SELECT 1 FROM _ls_log WHERE kind = 0 AND seq > ? LIMIT 1", [.integer(bound)]) != nil
        return (folded, more)
    }

    /// Keys packed one after another in a history row of kind ``SchemaSQL/packedInsertsKind``.
    static func packedKeys(_ bytes: [UInt8]) throws -> [DatabaseValue] {
        try bytes.withUnsafeBytes { raw in
            var reader = RowStateCoding.ByteReader(raw)
            var keys: [DatabaseValue] = []
            while !reader.isAtEnd { keys.append(try reader.value()) }
            return keys
        }
    }

    /// One captured change → the shipped change, with the causal length it gives the row and the values of
    /// its changed columns as the table holds them now.
    private func foldChange(
        _ kind: ChangeKind, info: Catalog.EntityInfo, key primaryKey: DatabaseValue, mask: Int64, clock: Clock, writer: MergeWriter,
        state: inout WriterState, changed: inout [RowKey: Bool]
    ) throws -> LogChange {
        let key = RowKey(info.entity.name, primaryKey)
        let previous = try writer.loadState(key, nodes: state.nodes)
        let length = previous?.causalLength ?? 0
        let causalLength: UInt64
        var values: [String: DatabaseValue] = [:]
        switch kind {
        case .insert, .update:
            causalLength = length % 2 == 1 ? length : length + 1
            if let current = try writer.baseRow(info, key.primaryKey) {
                for name in info.columnNames(inMask: mask) { values[name] = current[name] ?? .null }
            }
        case .delete:
            causalLength = length % 2 == 1 ? length + 1 : max(length, 2)
        }
        let change = LogChange(entity: key.entity, primaryKey: key.primaryKey, kind: kind, causalLength: causalLength, values: values)
        var next = previous ?? RowState()
        next.merge(change, at: clock)
        try writer.saveState(next, for: key, previous: previous, nodes: &state.nodes)
        changed[key] = (changed[key] ?? false) || writer.isStructural(key, from: previous, to: next)
        return change
    }
}

extension DatabaseValue {
    var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }
}
