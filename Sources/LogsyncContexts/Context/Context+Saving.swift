import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
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
    func saveAlone(author: String?) throws -> (token: HistoryToken?, changed: [ObjectID], conflicts: [MergeConflict])? {
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
                    let stored = try transaction.row(id.entity, key: key).map(columns.visible)
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
                    let columns = try model.columns(of: id.entity)
                    tracking.seen[id] = try transaction.row(id.entity, key: columns.keyValue(id.id)).map(columns.visible)
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
}
