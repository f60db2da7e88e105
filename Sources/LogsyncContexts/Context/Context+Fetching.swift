import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
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
    func readRows(_ ids: [ObjectID], columns: EntityColumns, state: inout State) throws -> [ObjectID: Row] {
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
    func handOut(_ rows: [Row], columns: EntityColumns, state: inout State) {
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
    func read(_ sql: String, _ arguments: [DatabaseValue], state: State) throws -> [[DatabaseValue]] {
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
}
