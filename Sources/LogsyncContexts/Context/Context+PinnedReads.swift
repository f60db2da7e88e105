import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
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
}
