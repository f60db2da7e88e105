import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
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
    func mergeChanges(read: ReadHistory?) throws {
        var merged = ContextChanges(cause: .merge)
        try writing.withLock { _ in try mergeAlone(read: read, into: &merged) }
        guard !merged.isEmpty else { return }
        emit(merged)
        refreshObservers()
    }

    /// Merges history batch by batch. History is read without holding `state` (reading it may seal a
    /// foreign writer's changes, which waits for the store's lock); `writing` keeps other merges and
    /// saves out meanwhile, so the context stands where the batch begins when it is merged.
    func mergeAlone(read: ReadHistory?, into merged: inout ContextChanges) throws {
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

    func merge(_ transactions: [HistoryTransaction], into merged: inout ContextChanges, state: inout State) throws {
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
}
