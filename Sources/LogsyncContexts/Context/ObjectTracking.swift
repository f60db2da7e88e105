import LogsyncCore

/// What a context knows about the objects it handed out and the changes it has not saved.
///
/// Records are values: the app keeps its copies and the context cannot update them in place when the
/// store changes. So the context remembers, for every object it returned, the values it returned
/// (`seen`). A property the app changed is one whose value differs from what it was handed, and a
/// property the store changed is one whose stored value differs from that too; both at once is a
/// conflict for the merge policy. A stale copy therefore never reverts a property the app did not touch.
struct ObjectTracking {
    /// The values each object had when the context last returned or saved it.
    var seen: [ObjectID: Row] = [:]
    /// Unsaved inserts: whole rows.
    var inserted: [ObjectID: Row] = [:]
    /// Unsaved edits: the changed columns only, relative to `seen`.
    var edits: [ObjectID: Row] = [:]
    /// Unsaved deletes.
    var deleted: Set<ObjectID> = []
    /// The order in which unsaved changes were first made, so a save replays them in that order
    /// (a folder inserted before the note that references it).
    private(set) var order: [ObjectID: Int] = [:]
    private var nextOrder = 0

    var hasChanges: Bool { !inserted.isEmpty || !edits.isEmpty || !deleted.isEmpty }

    /// Whether any unsaved change concerns `entity`.
    func hasChanges(in entity: String) -> Bool {
        inserted.keys.contains { $0.entity == entity } || edits.keys.contains { $0.entity == entity }
            || deleted.contains { $0.entity == entity }
    }

    /// Every object with an unsaved change, in the order the changes were made.
    var changedObjects: [ObjectID] {
        Set(inserted.keys).union(edits.keys).union(deleted).sorted { order[$0, default: 0] < order[$1, default: 0] }
    }

    mutating func touch(_ id: ObjectID) {
        if order[id] == nil {
            order[id] = nextOrder
            nextOrder += 1
        }
    }

    /// Forgets the unsaved changes, keeping what was handed out.
    mutating func discardChanges() {
        inserted = [:]
        edits = [:]
        deleted = []
        order = [:]
    }

    /// After a save of the changes in `saved` (the tracking as the save began): forgets the change to `id`
    /// that was saved, keeps one made while the store wrote (only what still differs from the saved
    /// row), and records `row` (nil: deleted) as what the object now is.
    mutating func settle(_ id: ObjectID, saved: ObjectTracking, storedAs row: Row?) {
        let untouched = inserted[id] == saved.inserted[id] && edits[id] == saved.edits[id]
            && deleted.contains(id) == saved.deleted.contains(id)
        if untouched {
            inserted[id] = nil
            edits[id] = nil
            deleted.remove(id)
        } else if let row, !deleted.contains(id) {
            // Edited (or an unsaved insert changed) meanwhile: now that the row exists, that is an edit of it.
            let newer = inserted.removeValue(forKey: id) ?? edits[id] ?? [:]
            let differing = newer.filter { (row[$0.key] ?? .null) != $0.value }
            edits[id] = differing.isEmpty ? nil : differing
        }
        if inserted[id] == nil, edits[id] == nil, !deleted.contains(id) { order[id] = nil }
        seen[id] = row
    }

    /// The context's view of an object over the store's row: nil when deleted here or absent.
    func view(of id: ObjectID, storeRow: Row?) -> Row? {
        if deleted.contains(id) { return nil }
        if let row = inserted[id] { return row }
        guard var row = storeRow else { return nil }
        if let edits = edits[id] { row.merge(edits) { _, edit in edit } }
        return row
    }

    /// Reconciles the unsaved changes to `id` with its row in the store (nil: not there), resolving
    /// conflicts by `policy`. Called when history brings changes to the object, and before saving.
    mutating func reconcile(_ id: ObjectID, storeRow: Row?, policy: MergePolicy) -> MergeConflict? {
        if deleted.contains(id) {
            guard let storeRow else {
                // Deleted on both sides: nothing left to do.
                deleted.remove(id)
                seen[id] = nil
                return nil
            }
            guard let seenRow = seen[id], changedColumns(storeRow, since: seenRow).isEmpty == false else { return nil }
            let conflict = MergeConflict(
                objectID: id, kind: .updatedWhileDeleted, resolution: policy.objectWinner == .mine ? .keptMine : .tookStore,
                mine: [:], store: storeRow)
            if policy.objectWinner == .store { deleted.remove(id) }
            // Weighed now: only a newer store change is a conflict again.
            seen[id] = storeRow
            return conflict
        }
        if let row = inserted[id] {
            guard let storeRow else { return nil }
            let differing = changedColumns(row, since: storeRow)
            let conflict = MergeConflict(
                objectID: id, kind: .insertedTwice, resolution: policy.objectWinner == .mine ? .keptMine : .tookStore,
                mine: row.filter { differing.contains($0.key) }, store: storeRow.filter { differing.contains($0.key) })
            inserted[id] = nil
            seen[id] = storeRow
            if policy.objectWinner == .mine, !differing.isEmpty {
                edits[id] = row.filter { differing.contains($0.key) }
            }
            return conflict
        }
        guard let mine = edits[id] else {
            if storeRow == nil { seen[id] = nil }
            return nil
        }
        let seenRow = seen[id] ?? [:]
        guard let storeRow else {
            let keep = policy.objectWinner == .mine
            let conflict = MergeConflict(
                objectID: id, kind: .deletedWhileEdited, resolution: keep ? .keptMine : .tookStore, mine: mine, store: [:])
            edits[id] = nil
            seen[id] = nil
            if keep { inserted[id] = seenRow.merging(mine) { _, edit in edit } }
            return conflict
        }
        // Properties both sides changed, each to a different value.
        let contested = mine.keys.filter { column in
            let stored = storeRow[column] ?? .null
            return stored != (seenRow[column] ?? .null) && stored != mine[column]
        }.sorted()
        guard !contested.isEmpty else { return nil }
        var kept: [String] = []
        var remaining = mine
        for column in contested {
            if policy.winner(entity: id.entity, column: column) == .mine {
                kept.append(column)
            } else {
                remaining.removeValue(forKey: column)
            }
        }
        edits[id] = remaining.isEmpty ? nil : remaining
        // A kept value has now been weighed against the store's: only a newer store change is a conflict again.
        // A discarded one is not: a stale copy that brings it back loses again.
        for column in kept { seen[id, default: [:]][column] = storeRow[column] ?? .null }
        let resolution: MergeConflict.Resolution =
            kept.count == contested.count ? .keptMine : (kept.isEmpty ? .tookStore : .mixed(keptMine: kept))
        return MergeConflict(
            objectID: id, kind: .properties(contested), resolution: resolution,
            mine: mine.filter { contested.contains($0.key) }, store: storeRow.filter { contested.contains($0.key) })
    }

    /// The columns whose value in `row` differs from `earlier` (columns absent from `row` are untouched).
    func changedColumns(_ row: Row, since earlier: Row) -> [String] {
        row.compactMap { column, value in (earlier[column] ?? .null) != value ? column : nil }.sorted()
    }
}
