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
    let state: Mutex<State>
    let listeners = Mutex(Listeners())
    /// Held by a save from start to end, and by a merge: one save at a time, and a merge never sees a
    /// save between its commit and the settling of the context's changes. Never held by reads or edits,
    /// and `state` is not held across the write, so those go on while a save waits for the store.
    let writing = Mutex(())

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

    struct Listeners {
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

    func checkOpen(_ state: State) throws {
        if state.closed {
            throw ContextError(.closed, "context '\(name)' belongs to a closed container")
        }
    }
}
