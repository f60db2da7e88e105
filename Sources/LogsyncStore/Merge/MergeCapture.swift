import LogsyncCore

/// History of the merge's own writes to synced tables, recorded without triggers.
///
/// Every write to a synced table fires logsync's capture triggers. For an import that is the largest
/// cost SQLite adds per row: a trigger program to set up and tear down, and a statement journal because a
/// trigger might fail halfway (`docs/BENCHMARKS-history.md`, replay). So, while it applies remote transactions,
/// the merge turns the writer connection's triggers off and writes what they would have written itself:
/// ``MergeWriter`` records each update and delete in `_ls_log` as the capture triggers do, and a delete
/// moves the row's live state to `_ls_row` as the delete trigger does. Inserts, most of what an import
/// writes, are packed: consecutive inserts of one entity take a single history row of kind 4 whose `pk`
/// holds their keys (``HistoryReader`` reads it as one insert per key, `docs/history.md`). Nothing else is lost with the
/// triggers: the delete-rule triggers stand aside while the merge runs anyway (``SchemaSQL/unlessMerging``),
/// and the merge never changes a primary key, which is all the key guard checks.
///
/// Triggers stay on when a synced table has a trigger logsync did not create: an app's own trigger (an
/// FTS index, an audit table) must see imported rows as it sees local ones. The capture triggers then
/// record the merge's writes as before.
extension Store {
    /// Inside a sync transaction, before the merge writes the first remote change: turns the connection's
    /// triggers off, unless a synced table has a foreign trigger (``CaptureTriggers``).
    func captureMergeHistoryDirectly(_ state: inout WriterState) throws {
        guard !state.triggers.areOff else { return }
        _ = try state.triggers.turnOffUnlessForeign()
    }

    /// Turns the connection's triggers back on if a merge or a local write turned them off.
    func restoreTriggers(_ state: inout WriterState) throws {
        try state.triggers.turnOn()
    }
}

extension MergeWriter {
    /// With triggers off: records an insert of a row in history, packed with the inserts of the same entity
    /// just before it. ``recordPackedInserts()`` writes them.
    func recordInsert(of primaryKey: DatabaseValue, info: Catalog.EntityInfo) throws {
        try packInsert(info) { RowStateCoding.appendValue(primaryKey, to: &$0) }
    }

    /// ``recordInsert(of:info:)`` of a key already encoded as ``RowStateCoding/appendValue(_:to:)`` does.
    func recordInsert(encodedKey: UnsafeRawBufferPointer, info: Catalog.EntityInfo) throws {
        try packInsert(info) { $0.append(contentsOf: encodedKey) }
    }

    private func packInsert(_ info: Catalog.EntityInfo, _ appendKey: (inout [UInt8]) -> Void) throws {
        if let open = statements.packedInserts, open.entity !== info {
            try recordPackedInserts()
        }
        var keys = statements.packedInserts.take()?.keys ?? []
        appendKey(&keys)
        statements.packedInserts = (info, keys)
    }

    /// Runs `body`, a re-projection, recording the inserts it packs once it is done. Inserts left packed
    /// by a re-projection that failed (its transaction rolled back) are dropped first.
    func packingInserts(_ body: () throws -> Void) throws {
        statements.packedInserts = nil
        try body()
        try recordPackedInserts()
    }

    /// Writes the packed inserts as one history row: kind ``SchemaSQL/packedInsertsKind``, the entity,
    /// every column, and the keys as a blob (each as ``RowStateCoding/appendValue(_:to:)`` encodes it).
    /// Runs before any other history row and at the end of each re-projection, so history keeps the order
    /// of the writes.
    func recordPackedInserts() throws {
        guard let (info, keys) = statements.packedInserts.take() else { return }
        try appendHistory(kind: SchemaSQL.packedInsertsKind, key: .blob(keys), info: info, mask: info.allColumnsMask)
    }

    /// With triggers off: records an update (the columns in `mask`) of a row in history, as the capture
    /// trigger would.
    func recordUpdate(of primaryKey: DatabaseValue, info: Catalog.EntityInfo, mask: Int64) throws {
        try recordPackedInserts()
        try appendHistory(kind: Int64(ChangeKind.update.rawValue), key: primaryKey, info: info, mask: mask)
    }

    /// Appends a change row to `_ls_log` (``MergeStatements/insertHistory()``).
    private func appendHistory(kind: Int64, key: DatabaseValue, info: Catalog.EntityInfo, mask: Int64) throws {
        let statement = try statements.insertHistory()
        try statement.bind(kind, at: 1)
        try statement.bind(info.id, at: 2)
        try statement.bind(key, at: 3)
        try statement.bind(mask, at: 4)
        try statement.run()
    }

    /// With triggers off, just before the row is deleted: what the delete trigger records after it — the
    /// history row with its tombstone, and the row's live state moved to `_ls_row`.
    func recordDelete(of primaryKey: DatabaseValue, info: Catalog.EntityInfo) throws {
        try recordPackedInserts()
        let rows = try statements.rows(of: info)
        for statement in [rows.deleteHistory, rows.moveLiveState, rows.deleteLiveState] {
            try bindRow(statement, primaryKey, info: info)
            try statement.run()
        }
    }

    /// ``recordDelete(of:info:)`` of a row the merge found (``FoundRow``): by its rowid, and its live state
    /// (if it has one) by its id.
    func recordDelete(rowID: Int64, liveID: Int64?, info: Catalog.EntityInfo) throws {
        try recordPackedInserts()
        let history = try statements.rows(of: info).deleteHistoryByRowID
        try history.bind(info.id, at: 1)
        try history.bind(rowID, at: 2)
        try history.run()
        guard let liveID else { return }
        let move = try statements.moveLiveState()
        try move.bind(info.id, at: 1)
        try move.bind(liveID, at: 2)
        try move.run()
        let delete = try statements.deleteLiveState()
        try delete.bind(liveID, at: 1)
        try delete.run()
    }
}
