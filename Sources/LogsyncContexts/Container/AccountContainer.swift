import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import Synchronization

/// A ``Container`` that follows syncd's account switches (`docs/accounts.md`): it opens the store of the
/// active account, and when syncd starts a switch it settles the contexts' unsaved changes (saved or
/// discarded, ``storesWillChangePolicy``), closes them and lets go of the store, reports
/// ``Change/willChange(from:to:)``; when the switch is done it opens the new store and reports
/// ``Change/didChange(from:to:)``. The app then takes the new ``viewContext`` and refetches.
///
/// Between the two there is no container: ``current()`` is nil, and contexts of the old container
/// refuse work (``ContextError/Code/closed``). The old store's connections close when the last reference
/// to its contexts goes: an app keeps none past `willChange`, or syncd keeps the old store (never
/// deletes it) until they go.
public final class AccountContainer: Sendable {
    public enum Change: Sendable, Equatable {
        /// The stores will change: the container has let go of `from`'s store (nil: the local store).
        case willChange(from: String?, to: String?)
        /// The stores did change: the container holds `to`'s store.
        case didChange(from: String?, to: String?)
    }

    /// What happens to unsaved changes in the contexts when the stores will change.
    public enum UnsavedChanges: Sendable, Equatable {
        /// Saved into the old account's store (and shipped with it).
        case save(author: String?)
        case discard
    }

    public let accounts: AccountStores
    public let schema: Schema
    private let options: StoreOptions
    private let state: Mutex<State>
    private let watch: DirectoryWatch?
    private let subscribers = Subscribers<Change>(buffering: 64)

    private struct State {
        var container: Container?
        var account: String?
        var path: String?
        var policy = UnsavedChanges.save(author: nil)
        var closed = false
    }

    /// How often the state file is looked at even without an inotify event.
    static let pollMilliseconds: Int32 = 100

    /// Opens the active store of `accounts` (waiting for a switch in progress to end, up to `timeout`) and
    /// starts following switches.
    public init(accounts: AccountStores, schema: Schema, options: StoreOptions = StoreOptions(), timeout: Duration = .seconds(60)) throws {
        self.accounts = accounts
        self.schema = schema
        self.options = options
        try? DurableFiles.makeDirectories(accounts.folder)
        watch = DirectoryWatch(directory: accounts.folder)
        state = Mutex(State())
        let deadline = ContinuousClock.now + timeout
        while true {
            let active: AccountState.Store
            do {
                active = try accounts.activeStore(waitingUpTo: deadline - ContinuousClock.now)
            } catch {
                throw ContextError(.openFailed, error.code == .busy ? error.message : "cannot tell which store is active", cause: error)
            }
            let container: Container
            do {
                container = try Container(path: active.path, schema: schema, options: options)
            } catch let error as ContextError where (error.cause as? StoreError)?.code == .retired && ContinuousClock.now < deadline {
                continue  // A switch began between the look at the state file and the open: its new store is next.
            }
            state.withLock { state in
                state.container = container
                state.account = active.account
                state.path = active.path
            }
            break
        }
        let thread = Thread { [weak self] in
            while let self, !self.isClosed {
                _ = self.watch?.wait(timeoutMilliseconds: Self.pollMilliseconds)
                self.refresh()
            }
        }
        thread.name = "logsync.account-container"
        thread.start()
    }

    deinit { close() }

    private var isClosed: Bool { state.withLock { $0.closed } }

    /// The active account (nil: the local store) and its container, or nil while a switch runs.
    public func current() -> (account: String?, container: Container)? {
        state.withLock { state in state.container.map { (state.account, $0) } }
    }

    /// The container of the active store; nil while a switch runs.
    public var container: Container? { state.withLock { $0.container } }

    /// The view context of the active store; nil while a switch runs.
    public var viewContext: Context? { container?.viewContext }

    /// What happens to unsaved changes when the stores will change (saved, by default).
    public var storesWillChangePolicy: UnsavedChanges {
        get { state.withLock { $0.policy } }
        set { state.withLock { $0.policy = newValue } }
    }

    /// The switches from now on: `willChange`, then `didChange`. Ends when the container closes.
    public func accountChanges() -> AsyncStream<Change> {
        subscribers.stream()
    }

    /// Closes the container of the active store and ends every stream.
    public func close() {
        let container = state.withLock { state in
            defer {
                state.closed = true
                state.container = nil
            }
            return state.container
        }
        container?.close()
        subscribers.finish()
        watch?.stop()
    }

    /// Looks at the state file: lets go of the store when a switch has begun, opens the new one when it
    /// is done.
    private func refresh() {
        guard let loaded = try? accounts.load() else { return }
        let held = state.withLock { state in state.path }
        if let pending = loaded.pending {
            if held != nil { letGo(to: pending.to.account) }
            return
        }
        guard held != loaded.active.path else { return }
        // A switch began and ended between two looks: let go first all the same.
        if held != nil { letGo(to: loaded.active.account) }
        guard let container = try? Container(path: loaded.active.path, schema: schema, options: options) else { return }
        let (from, closed) = state.withLock { state in
            defer {
                if !state.closed {
                    state.container = container
                    state.account = loaded.active.account
                    state.path = loaded.active.path
                }
            }
            return (state.account, state.closed)
        }
        if closed {
            container.close()
            return
        }
        subscribers.yield([.didChange(from: from, to: loaded.active.account)])
    }

    /// Settles the contexts' unsaved changes, closes them and the container, and says so.
    private func letGo(to: String?) {
        let (container, from, policy) = state.withLock { state in
            defer {
                state.container = nil
                state.path = nil
            }
            return (state.container, state.account, state.policy)
        }
        guard let container else { return }
        for context in container.openContexts() where context.hasChanges {
            switch policy {
            case .save(let author): _ = try? context.save(author: author)
            case .discard: context.rollback()
            }
        }
        container.close()
        subscribers.yield([.willChange(from: from, to: to)])
    }
}
