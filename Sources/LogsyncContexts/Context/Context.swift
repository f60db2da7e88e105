import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

/// A scratchpad over the store: fetch records, change them in memory, and save the changes as one
/// history transaction carrying the context's name and an author.
///
/// Get one from a ``Container``: its ``Container/viewContext`` or ``Container/newBackgroundContext(name:)``.
/// A context is safe to use from any thread or task; its operations are serialized by a lock, and none
/// of them calls back into app code while holding it.
///
/// When history grows (`syncd` imported another node's changes, another process wrote the store), a
/// context that ``automaticallyMergesChanges`` merges the new transactions: objects it handed out that
/// were deleted are forgotten, and its unsaved changes are reconciled with the store by its
/// ``mergePolicy``, property by property. Every conflict is reported, in ``conflicts`` and in the
/// ``events()`` stream: whichever side wins, a local edit never disappears without the app being told.
///
/// Records are values, so the app's copies do not change by themselves: re-fetch the objects a merge
/// reports, or ``observe(_:)`` a fetch to get each new result with its diff.
public final class Context: Sendable {
    /// The context's name, recorded in history with every save.
    public let name: String
    /// The store the context reads and saves.
    public let store: Store
    let model: Model
    private let state: Mutex<State>
    private let listeners = Mutex(Listeners())
    /// Held by a save from start to end, and by a merge: one save at a time, and a merge never sees a
    /// save between its commit and the settling of the context's changes. Never held by reads or edits,
    /// and `state` is not held across the write, so those go on while a save waits for the store.
    private let writing = Mutex(())

    struct State {
        var tracking = ObjectTracking()
        var mergePolicy: MergePolicy
        var automaticallyMergesChanges: Bool
        /// Set while the context's reads are pinned (see ``pin()``).
        var snapshot: StoreSnapshot?
        /// History up to here has been merged.
        var mergedToken: HistoryToken
        var conflicts: [MergeConflict] = []
        var closed = false
        /// How many times ``reset()`` forgot everything: a save that ran meanwhile leaves no trace.
        var resets = 0
        /// This context's saves not yet met again in history: merging skips them.
        var ownSaves: Set<HistoryToken> = []
    }

    private struct Listeners {
        var events: [UUID: AsyncStream<ContextChanges>.Continuation] = [:]
        var observers: [UUID: any ResultsObserving] = [:]
    }

    init(name: String, store: Store, model: Model, mergedToken: HistoryToken, automaticallyMergesChanges: Bool) {
        self.name = name
        self.store = store
        self.model = model
        state = Mutex(State(
            mergePolicy: .mineWins, automaticallyMergesChanges: automaticallyMergesChanges, mergedToken: mergedToken))
    }

    // MARK: - Settings

    /// How unsaved changes are reconciled with changes that reach the store meanwhile. Mine wins unless set.
    public var mergePolicy: MergePolicy {
        get { state.withLock { $0.mergePolicy } }
        set { state.withLock { $0.mergePolicy = newValue } }
    }

    /// Whether the context merges new history as soon as the container sees it. The view context does;
    /// background contexts do not unless asked, and merge with ``mergeChanges()``.
    public var automaticallyMergesChanges: Bool {
        get { state.withLock { $0.automaticallyMergesChanges } }
        set { state.withLock { $0.automaticallyMergesChanges = newValue } }
    }

    /// Whether the context has unsaved inserts, updates or deletes.
    public var hasChanges: Bool { state.withLock { $0.tracking.hasChanges } }

    /// The objects with unsaved changes, in the order they were first changed.
    public var changedObjects: [ObjectID] { state.withLock { $0.tracking.changedObjects } }

    /// The history token up to which the context has merged.
    public var mergedToken: HistoryToken { state.withLock { $0.mergedToken } }

    /// Conflicts found by merges and saves since the last ``clearConflicts()``, oldest first.
    public var conflicts: [MergeConflict] { state.withLock { $0.conflicts } }

    /// Forgets the reported conflicts.
    public func clearConflicts() { state.withLock { $0.conflicts = [] } }

    // MARK: - Fetching

    /// The records matching `request`, including this context's unsaved inserts and edits and without its
    /// unsaved deletes.
    public func fetch<R: Record>(_ request: FetchRequest<R>) throws -> [R] {
        let coder = try model.coder(for: R.self)
        let rows = try fetchRows(request, entity: coder.entity.name)
        return try rows.map { try coder.decode(R.self, from: $0) }
    }

    /// All records of a type, in primary-key order.
    public func fetch<R: Record>(_ type: R.Type) throws -> [R] {
        try fetch(FetchRequest<R>())
    }

    /// How many records match `request` (its limit and offset apply).
    public func count<R: Record>(_ request: FetchRequest<R>) throws -> Int {
        try fetchRows(request, entity: try model.coder(for: R.self).entity.name).count
    }

    /// The record with `id`, as this context sees it; nil if there is none.
    public func object<R: Record>(_ type: R.Type, id: UUID) throws -> R? {
        try fetch(FetchRequest<R>(where: Column(try model.columns(of: R.entityName).keyColumn) == id, limit: 1)).first
    }

    /// The record a relationship points to; nil if it points nowhere or to a deleted record.
    public func object<R: Record>(_ reference: Reference<R>?) throws -> R? {
        guard let reference else { return nil }
        return try object(R.self, id: reference.id)
    }

    /// Calls `body` with the records matching `request`, `size` at a time, so that memory stays bounded
    /// however many there are. The matching keys are read first; each batch's rows are read when its turn
    /// comes, so a record changed meanwhile is returned as it is then (pin the context for a stable view).
    /// Records read this way are not remembered by the context.
    public func forEachBatch<R: Record>(_ request: FetchRequest<R>, size: Int = 500, _ body: ([R]) throws -> Void) throws {
        let coder = try model.coder(for: R.self)
        let columns = try model.columns(of: coder.entity.name)
        let ids = try fetchRows(request, entity: coder.entity.name, remember: false).compactMap(columns.objectID(of:))
        var start = 0
        while start < ids.count {
            let batch = Array(ids[start..<min(start + max(size, 1), ids.count)])
            start += batch.count
            let rows = try state.withLock { state in
                try readRows(batch, columns: columns, state: &state)
            }
            let records = try batch.compactMap { rows[$0] }.map { row in try coder.decode(R.self, from: row) }
            try body(records)
        }
    }

    /// Reads the views of `ids` (store rows under unsaved changes), keyed by id; deleted ones are absent.
    private func readRows(_ ids: [ObjectID], columns: EntityColumns, state: inout State) throws -> [ObjectID: Row] {
        let keys = ids.map { columns.keyValue($0.id) }
        let sql = columns.selectAll + " WHERE \(SQLIdentifier.quoted(columns.keyColumn)) IN ("
            + Array(repeating: "?", count: keys.count).joined(separator: ", ") + ")"
        var stored: [ObjectID: Row] = [:]
        for values in try read(sql, keys, state: state) {
            let row = columns.row(values)
            if let id = columns.objectID(of: row) { stored[id] = row }
        }
        var rows: [ObjectID: Row] = [:]
        for id in ids {
            if let row = state.tracking.view(of: id, storeRow: stored[id]) { rows[id] = row }
        }
        return rows
    }

    /// The rows of a fetch: SQL against the store (or the pinned snapshot), then, when this context has
    /// unsaved changes to the entity, those changes laid over the result, filtered and sorted again in
    /// memory by the same rules. `remember`: record the store's rows as handed out.
    func fetchRows<R: Record>(_ request: FetchRequest<R>, entity: String, remember: Bool = true) throws -> [Row] {
        let columns = try model.columns(of: entity)
        let filter = try ResolvedFilter(request.filter, entity: columns)
        for ordering in request.ordering { _ = try columns.type(of: ordering.column) }
        let orderClause = (request.ordering.map { "\(SQLIdentifier.quoted($0.column)) \($0.ascending ? "ASC" : "DESC")" }
            + ["\(SQLIdentifier.quoted(columns.keyColumn)) ASC"]).joined(separator: ", ")
        return try state.withLock { state in
            try checkOpen(state)
            let overlay = state.tracking.hasChanges(in: entity)
            let (expression, arguments) = filter.sql
            var sql = columns.selectAll + " WHERE " + expression + " ORDER BY " + orderClause
            if !overlay, request.limit != nil || request.offset > 0 {
                sql += " LIMIT \(request.limit.map(String.init) ?? "-1") OFFSET \(max(request.offset, 0))"
            }
            let stored = try read(sql, arguments, state: state).map(columns.row)
            if remember { handOut(stored, columns: columns, state: &state) }
            guard overlay else { return stored }

            var rows: [Row] = []
            var present: Set<ObjectID> = []
            for row in stored {
                guard let id = columns.objectID(of: row) else { continue }
                present.insert(id)
                if let view = state.tracking.view(of: id, storeRow: row), filter.matches(view) { rows.append(view) }
            }
            // Objects that match only because of unsaved changes: inserts, and edits that now pass the filter.
            for (id, row) in state.tracking.inserted where id.entity == entity && !present.contains(id) && filter.matches(row) {
                rows.append(row)
            }
            let edited = state.tracking.edits.keys.filter { $0.entity == entity && !present.contains($0) }
            if !edited.isEmpty {
                for (_, view) in try readRows(Array(edited), columns: columns, state: &state) where filter.matches(view) {
                    rows.append(view)
                }
            }
            rows.sort { lhs, rhs in
                for ordering in request.ordering {
                    let order = (lhs[ordering.column] ?? .null).sqliteOrder(comparedTo: rhs[ordering.column] ?? .null)
                    if order != 0 { return ordering.ascending ? order < 0 : order > 0 }
                }
                return (lhs[columns.keyColumn] ?? .null).sqliteOrder(comparedTo: rhs[columns.keyColumn] ?? .null) < 0
            }
            let start = min(max(request.offset, 0), rows.count)
            let end = request.limit.map { min(start + max($0, 0), rows.count) } ?? rows.count
            return Array(rows[start..<end])
        }
    }

    /// Records store rows as handed out. An object with unsaved edits is first reconciled with the row,
    /// so a conflict is not hidden by the fresh values.
    private func handOut(_ rows: [Row], columns: EntityColumns, state: inout State) {
        var conflicts: [MergeConflict] = []
        for row in rows {
            guard let id = columns.objectID(of: row) else { continue }
            if state.tracking.edits[id] != nil || state.tracking.inserted[id] != nil || state.tracking.deleted.contains(id) {
                if let conflict = state.tracking.reconcile(id, storeRow: row, policy: state.mergePolicy) {
                    conflicts.append(conflict)
                }
            }
            if state.tracking.inserted[id] == nil { state.tracking.seen[id] = row }
        }
        state.conflicts += conflicts
        if !conflicts.isEmpty {
            emit(ContextChanges(cause: .fetch, token: nil, conflicts: conflicts))
        }
    }

    /// Runs a read on the pinned snapshot if there is one, else on the store's latest state.
    private func read(_ sql: String, _ arguments: [DatabaseValue], state: State) throws -> [[DatabaseValue]] {
        do {
            if let snapshot = state.snapshot { return try snapshot.read(sql, arguments) }
            return try store.read(sql, arguments)
        } catch {
            throw ContextError(.fetchFailed, "context '\(name)' could not read the store", cause: error)
        }
    }

    /// The store's row for `id` (or the snapshot's), nil when there is none.
    func storeRow(_ id: ObjectID, state: State) throws -> Row? {
        let columns = try model.columns(of: id.entity)
        let sql = columns.selectAll + " WHERE \(SQLIdentifier.quoted(columns.keyColumn)) = ?"
        return try read(sql, [columns.keyValue(id.id)], state: state).first.map(columns.row)
    }

    // MARK: - Changing

    /// Adds a new record; it is written by the next ``save(author:)``.
    public func insert<R: Record>(_ record: R) throws {
        let row = try model.coder(for: R.self).encode(record)
        let id = record.objectID
        try state.withLock { state in
            try checkOpen(state)
            if state.tracking.inserted[id] != nil || state.tracking.edits[id] != nil
                || (state.tracking.seen[id] != nil && !state.tracking.deleted.contains(id))
            {
                throw ContextError(
                    .duplicateObject, "\(id) is already in context '\(name)'; use update(_:) to change it", entity: id.entity)
            }
            state.tracking.touch(id)
            if state.tracking.deleted.remove(id) != nil, let seen = state.tracking.seen[id] {
                // Deleted then inserted again before saving: the object stays, with the new values.
                state.tracking.edits[id] = row.filter { seen[$0.key] != $0.value }
            } else {
                state.tracking.inserted[id] = row
            }
        }
        refreshObservers()
    }

    /// Records the record's changed properties: those whose value differs from what this context last
    /// returned for it. Properties the app did not change are left alone, even if the copy is stale.
    public func update<R: Record>(_ record: R) throws {
        let row = try model.coder(for: R.self).encode(record)
        let id = record.objectID
        let key = try model.columns(of: id.entity).keyColumn
        try state.withLock { state in
            try checkOpen(state)
            if var inserted = state.tracking.inserted[id] {
                inserted.merge(row) { _, new in new }
                state.tracking.inserted[id] = inserted
                return
            }
            guard !state.tracking.deleted.contains(id) else {
                throw ContextError(.objectNotFound, "\(id) was deleted in context '\(name)'; insert it to keep it", entity: id.entity)
            }
            let seen: Row
            if let known = state.tracking.seen[id] {
                seen = known
            } else if let stored = try storeRow(id, state: state) {
                seen = stored
                state.tracking.seen[id] = stored
            } else {
                throw ContextError(.objectNotFound, "\(id) is not in the store; insert it instead", entity: id.entity)
            }
            var edits = state.tracking.edits[id] ?? [:]
            for (column, value) in row where column != key {
                // Not a ternary: DatabaseValue is ExpressibleByNilLiteral, so `nil` there would be `.null`.
                if (seen[column] ?? .null) == value {
                    edits.removeValue(forKey: column)
                } else {
                    edits[column] = value
                }
            }
            state.tracking.touch(id)
            state.tracking.edits[id] = edits.isEmpty ? nil : edits
        }
        refreshObservers()
    }

    /// Marks a record for deletion at the next save (an unsaved insert is simply dropped).
    public func delete<R: Record>(_ record: R) throws {
        try delete(R.self, id: record.id)
    }

    /// Marks the record with `id` for deletion at the next save.
    public func delete<R: Record>(_ type: R.Type, id: UUID) throws {
        let objectID = ObjectID(entity: R.entityName, id: id)
        try state.withLock { state in
            try checkOpen(state)
            if state.tracking.inserted.removeValue(forKey: objectID) != nil { return }
            if state.tracking.seen[objectID] == nil {
                guard let stored = try storeRow(objectID, state: state) else {
                    throw ContextError(.objectNotFound, "\(objectID) is not in the store", entity: objectID.entity)
                }
                state.tracking.seen[objectID] = stored
            }
            state.tracking.touch(objectID)
            state.tracking.edits[objectID] = nil
            state.tracking.deleted.insert(objectID)
        }
        refreshObservers()
    }

    /// Discards the unsaved changes; objects already handed out stay known.
    public func rollback() {
        state.withLock { $0.tracking.discardChanges() }
        emit(ContextChanges(cause: .rollback))
        refreshObservers()
    }

    /// Discards the unsaved changes and forgets every object handed out and every conflict reported, as
    /// a new context would start.
    public func reset() {
        state.withLock { state in
            state.resets += 1
            state.tracking = ObjectTracking()
            state.conflicts = []
        }
        emit(ContextChanges(cause: .reset))
        refreshObservers()
    }

    // MARK: - Saving

    /// Writes the unsaved changes as one history transaction with this context's name and `author`, and
    /// returns its token (nil when there was nothing to write).
    ///
    /// Each changed object is first reconciled, inside the write transaction, with its row in the store:
    /// changes that reached the store since the last merge are resolved by the merge policy, and reported.
    /// If the store refuses the write (a unique key, a `deny` delete rule, a busy timeout), nothing is
    /// written, the unsaved changes are kept, and the error says why.
    @discardableResult
    public func save(author: String? = nil) throws -> HistoryToken? {
        // One save at a time per context. The state lock is not held while the store writes (which may
        // wait up to the busy timeout for another process): fetches, edits and merges go on meanwhile,
        // and what they change is reconciled with what was saved afterwards.
        let saved = try writing.withLock { _ in try saveAlone(author: author) }
        guard let saved else { return nil }
        emit(ContextChanges(cause: .save, token: saved.token, updated: Set(saved.changed), conflicts: saved.conflicts))
        if isPinned { try advance() } else { refreshObservers() }
        return saved.token
    }

    /// Writes the changes; nil when there were none.
    private func saveAlone(author: String?) throws -> (token: HistoryToken?, changed: [ObjectID], conflicts: [MergeConflict])? {
        let (pending, policy, resets) = try state.withLock { state in
            try checkOpen(state)
            return (state.tracking, state.mergePolicy, state.resets)
        }
        guard pending.hasChanges else { return nil }
        let changed = pending.changedObjects
        var tracking = pending
        var conflicts: [MergeConflict] = []
        let token: HistoryToken?
        do {
            token = try store.recordedWrite(author: author, context: name) { transaction in
                for id in changed {
                    let columns = try model.columns(of: id.entity)
                    let key = columns.keyValue(id.id)
                    let stored = try transaction.row(id.entity, key: key)
                    if let conflict = tracking.reconcile(id, storeRow: stored, policy: policy) { conflicts.append(conflict) }
                    if tracking.deleted.contains(id) {
                        try transaction.delete(id.entity, key: key)
                    } else if let row = tracking.inserted[id] {
                        try transaction.insert(id.entity, row)
                    } else if let edits = tracking.edits[id], stored != nil {
                        try transaction.update(id.entity, key: key, edits)
                    }
                }
                // What the app now holds is what was saved (defaults and delete rules included).
                for id in changed {
                    tracking.seen[id] = try transaction.row(id.entity, key: try model.columns(of: id.entity).keyValue(id.id))
                }
            }.token
        } catch {
            throw ContextError(
                .saveFailed, "context '\(name)' could not save \(changed.count) changed object(s); its changes are kept",
                cause: error)
        }
        state.withLock { state in
            // Changes saved are no longer unsaved; changes made while the store wrote stay unsaved, over
            // the saved values. A reset meanwhile forgot everything, what was saved included.
            if let token, state.mergedToken < token {
                state.ownSaves.insert(token)
                // A context that never merges would collect them for ever: past a bound, the oldest go
                // (merging one later only reports it as a change, which it was).
                if state.ownSaves.count > 256, let oldest = state.ownSaves.min() { state.ownSaves.remove(oldest) }
            }
            guard state.resets == resets else { return }
            for id in changed { state.tracking.settle(id, saved: pending, storedAs: tracking.seen[id]) }
            state.conflicts += conflicts
        }
        return (token, changed, conflicts)
    }

    // MARK: - Batch operations

    /// Inserts `records` straight into the store in one history transaction with this context's name and
    /// `author`, without going through the context's unsaved changes (like `NSBatchInsertRequest`). The
    /// context then merges it like any other transaction when it merges automatically.
    @discardableResult
    public func batchInsert<R: Record>(_ records: [R], author: String? = nil) throws -> HistoryToken? {
        let coder = try model.coder(for: R.self)
        let rows = try records.map { try coder.encode($0) }
        let token = try batchWrite(author: author, what: "insert \(rows.count) \(coder.entity.name) record(s)") { transaction in
            for row in rows { try transaction.insert(coder.entity.name, row) }
        }
        try mergeIfAutomatic()
        return token
    }

    /// Deletes every record of a type that matches `filter` straight in the store, in one history
    /// transaction with this context's name and `author` (like `NSBatchDeleteRequest`); delete rules
    /// apply. Returns how many were deleted. The context merges it like any other transaction when it
    /// merges automatically.
    @discardableResult
    public func batchDelete<R: Record>(_ type: R.Type, where filter: Filter = .all, author: String? = nil) throws -> Int {
        let columns = try model.columns(of: R.entityName)
        let (expression, arguments) = try ResolvedFilter(filter, entity: columns).sql
        var deleted = 0
        try batchWrite(author: author, what: "delete \(R.entityName) records") { transaction in
            let count = try transaction.rows("SELECT count(*) FROM \(SQLIdentifier.quoted(columns.name)) WHERE \(expression)", arguments)
            if case .integer(let value)? = count.first?.first { deleted = Int(value) }
            try transaction.execute("DELETE FROM \(SQLIdentifier.quoted(columns.name)) WHERE \(expression)", arguments)
        }
        try mergeIfAutomatic()
        return deleted
    }

    @discardableResult
    private func batchWrite(author: String?, what: String, _ body: (WriteTransaction) throws -> Void) throws -> HistoryToken? {
        try state.withLock { try checkOpen($0) }
        do {
            return try store.recordedWrite(author: author, context: name, body).token
        } catch {
            throw ContextError(.saveFailed, "context '\(name)' could not \(what)", cause: error)
        }
    }

    private func mergeIfAutomatic() throws {
        let automatic = state.withLock { $0.automaticallyMergesChanges && $0.snapshot == nil }
        if automatic { try mergeChanges() } else { refreshObservers() }
    }

    // MARK: - Merging

    /// Merges history committed since the last merge (up to the pinned state, when pinned): deleted
    /// objects are forgotten, unsaved changes are reconciled by the merge policy, and the app is told what
    /// changed through ``events()`` and observed fetches.
    public func mergeChanges() throws {
        try mergeChanges(read: nil)
    }

    /// History a caller has already read: the transactions right after `after`, oldest first.
    typealias ReadHistory = (after: HistoryToken, transactions: [HistoryTransaction])

    /// Merges `read` when it continues exactly where this context stands and its reads are not pinned,
    /// so that the container reads each commit's history once for all its contexts; otherwise reads
    /// history itself, up to the latest (or the pinned) state.
    private func mergeChanges(read: ReadHistory?) throws {
        var merged = ContextChanges(cause: .merge)
        try writing.withLock { _ in try mergeAlone(read: read, into: &merged) }
        guard !merged.isEmpty else { return }
        emit(merged)
        refreshObservers()
    }

    /// Merges history batch by batch. History is read without holding `state` (reading it may seal a
    /// foreign writer's changes, which waits for the store's lock); `writing` keeps other merges and
    /// saves out meanwhile, so the context stands where the batch begins when it is merged.
    private func mergeAlone(read: ReadHistory?, into merged: inout ContextChanges) throws {
        var handed = read
        while true {
            let (start, limit) = try state.withLock { state in
                try checkOpen(state)
                return (state.mergedToken, state.snapshot?.token)
            }
            let transactions: [HistoryTransaction]
            if let read = handed, read.after == start, limit == nil {
                transactions = read.transactions
            } else {
                do {
                    transactions = try store.history(after: start, limit: 200).filter { limit == nil || $0.token <= limit! }
                } catch {
                    throw ContextError(.fetchFailed, "context '\(name)' could not read history", cause: error)
                }
            }
            let done = handed != nil && handed?.after == start && limit == nil
            handed = nil
            let merging = try state.withLock { state -> Bool in
                try checkOpen(state)
                guard state.mergedToken == start, let last = transactions.last else { return false }
                let before = merged.conflicts.count
                try merge(transactions, into: &merged, state: &state)
                state.mergedToken = last.token
                state.conflicts += merged.conflicts[before...]
                return true
            }
            merged.token = state.withLock { $0.mergedToken }
            // History handed by the container is merged once; history read here, until none is left.
            if done || !merging { return }
        }
    }

    /// Called by the container with the history it read after a commit.
    func mergeAutomatically(_ read: ReadHistory) {
        guard state.withLock({ $0.automaticallyMergesChanges && $0.snapshot == nil && !$0.closed }) else { return }
        do {
            try mergeChanges(read: read)
        } catch {
            emit(ContextChanges(cause: .merge, error: "\(error)"))
        }
    }

    private func merge(_ transactions: [HistoryTransaction], into merged: inout ContextChanges, state: inout State) throws {
        var touched: [ObjectID] = []
        var seenIDs: Set<ObjectID> = []
        for transaction in transactions {
            // This context's own save: what it holds already is what was saved (`settle`), and it told
            // its listeners when it saved.
            if state.ownSaves.remove(transaction.token) != nil { continue }
            for change in transaction.changes {
                guard let uuid = RowCoder.uuid(from: change.primaryKey) else { continue }
                let id = ObjectID(entity: change.entity, id: uuid)
                switch change.kind {
                case .insert: merged.inserted.insert(id)
                case .update: merged.updated.insert(id)
                case .delete: merged.deleted.insert(id)
                }
                if seenIDs.insert(id).inserted { touched.append(id) }
            }
            merged.origins.insert(transaction.origin)
        }
        // An object inserted and deleted within the batch is reported as deleted only; one inserted and
        // then updated, as inserted.
        merged.inserted.subtract(merged.deleted)
        merged.updated.subtract(merged.inserted.union(merged.deleted))
        let tracking = state.tracking
        for id in touched
        where tracking.seen[id] != nil || tracking.inserted[id] != nil || tracking.edits[id] != nil
            || tracking.deleted.contains(id)
        {
            let stored = try storeRow(id, state: state)
            if let conflict = state.tracking.reconcile(id, storeRow: stored, policy: state.mergePolicy) {
                merged.conflicts.append(conflict)
            }
        }
    }

    // MARK: - Pinned reads

    /// Pins the context's reads to the store's state as of now, like a Core Data query generation:
    /// fetches see nothing committed later, and automatic merges wait, until ``advance()`` or ``unpin()``.
    /// Saving advances the pin.
    public func pin() throws {
        let snapshot: StoreSnapshot
        do {
            snapshot = try store.snapshot()
        } catch {
            throw ContextError(.fetchFailed, "context '\(name)' could not pin its reads", cause: error)
        }
        try state.withLock { state in
            try checkOpen(state)
            state.snapshot = snapshot
        }
        try mergeChanges()
    }

    /// Whether reads are pinned.
    public var isPinned: Bool { state.withLock { $0.snapshot != nil } }

    /// The history token of the pinned state, nil when not pinned.
    public var pinnedToken: HistoryToken? { state.withLock { $0.snapshot?.token } }

    /// Moves the pinned state to the store's latest and merges what happened in between.
    public func advance() throws {
        let snapshot = state.withLock { $0.snapshot }
        do {
            try snapshot?.advance()
        } catch {
            throw ContextError(.fetchFailed, "context '\(name)' could not advance its pinned reads", cause: error)
        }
        try mergeChanges()
    }

    /// Returns to reading the latest state, merging what happened since the pin.
    public func unpin() throws {
        state.withLock { $0.snapshot = nil }
        try mergeChanges()
    }

    // MARK: - Events and observation

    /// What happens to the context from now on: merges (with the object ids that changed and the
    /// conflicts met), saves, rollbacks and resets. The stream ends when the container closes.
    public func events() -> AsyncStream<ContextChanges> {
        let (stream, continuation) = AsyncStream<ContextChanges>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        let closed = state.withLock { $0.closed }
        if closed {
            continuation.finish()
            return stream
        }
        listeners.withLock { $0.events[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.events.removeValue(forKey: id) }
        }
        return stream
    }

    /// The records matching `request` now, and again with a diff whenever they change: after merges,
    /// saves and this context's own unsaved changes. The first element has every record as an insert.
    public func observe<R: Record>(_ request: FetchRequest<R>) -> AsyncStream<FetchedResults<R>> {
        let (stream, continuation) = AsyncStream<FetchedResults<R>>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let observer = ResultsObserver(request: request, continuation: continuation)
        let id = UUID()
        listeners.withLock { $0.observers[id] = observer }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.observers.removeValue(forKey: id) }
        }
        observer.refresh(in: self)
        return stream
    }

    private func emit(_ changes: ContextChanges) {
        for continuation in listeners.withLock({ Array($0.events.values) }) { continuation.yield(changes) }
    }

    private func refreshObservers() {
        for observer in listeners.withLock({ Array($0.observers.values) }) { observer.refresh(in: self) }
    }

    // MARK: - Closing

    /// Called by the container when it closes: later operations fail with ``ContextError/Code/closed``.
    func close() {
        state.withLock { state in
            state.closed = true
            state.snapshot = nil
        }
        let (events, observers) = listeners.withLock { listeners in
            defer { listeners = Listeners() }
            return (Array(listeners.events.values), Array(listeners.observers.values))
        }
        for continuation in events { continuation.finish() }
        for observer in observers { observer.finish() }
    }

    private func checkOpen(_ state: State) throws {
        if state.closed {
            throw ContextError(.closed, "context '\(name)' belongs to a closed container")
        }
    }
}
