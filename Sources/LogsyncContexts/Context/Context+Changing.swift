import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
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
}
