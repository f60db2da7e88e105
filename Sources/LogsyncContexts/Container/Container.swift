import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

/// The app's entry point: opens a store for a schema, gives out contexts, and merges whatever commits to
/// the store into them as it lands — `NSPersistentContainer` for logsync.
///
/// ```swift
/// let container = try Container(path: "\(home)/.local/state/logsync/store.sqlite", schema: .notes)
/// let context = container.viewContext
/// try context.insert(Note(title: "Groceries"))
/// try context.save(author: "alice")
/// for await change in container.changes() { print(change.token, change.origin) }
/// ```
///
/// The container watches the store (inotify, confirmed by SQLite's `data_version`), so it sees commits
/// by `syncd`'s imports, other processes and other containers alike, usually within a millisecond. For
/// each new history transaction it merges the contexts that merge automatically, then reports the
/// transaction on ``changes()``. It does so on its monitor's own thread, never on Swift's cooperative
/// pool: reading history may seal a foreign writer's changes, which waits for the store's lock, and a
/// wait there would hold up every task of the app.
public final class Container: Sendable {
    /// The store the container opened, for what contexts do not cover: history, purge, raw SQL.
    public let store: Store
    /// The context for the app's main reads and edits. It merges automatically.
    public let viewContext: Context
    let model: Model
    private let state: Mutex<State>
    private let subscribers = Subscribers<StoreChange>(buffering: 1024)
    private let schemaSubscribers = Subscribers<Int>(buffering: 1)

    private struct State {
        var contexts: [WeakContext] = []
        var monitor: CommitObservation?
        /// History up to here has been merged and reported; only the monitor's thread changes it.
        var delivered = HistoryToken.zero
        /// The newest schema version of a peer reported on ``schemaUpdates()``.
        var announcedSchema: Int?
        var closed = false
    }

    private struct WeakContext {
        weak var context: Context?
    }

    /// Opens (creating if needed) the store at `path` for `schema`, and starts watching it.
    public convenience init(path: String, schema: Schema, options: StoreOptions = StoreOptions()) throws {
        let store: Store
        do {
            store = try Store(path: path, schema: schema, options: options)
        } catch {
            throw ContextError(.openFailed, "could not open the store at \(path)", cause: error)
        }
        try self.init(store: store)
    }

    /// A container over an open store, watching it.
    public init(store: Store) throws {
        self.store = store
        model = try Model(schema: store.schema)
        let token: HistoryToken
        do {
            token = try store.currentToken()
        } catch {
            throw ContextError(.openFailed, "could not read the history of \(store.path)", cause: error)
        }
        viewContext = Context(name: "view", store: store, model: model, mergedToken: token, automaticallyMergesChanges: true)
        state = Mutex(State(contexts: [WeakContext(context: viewContext)]))
        startMonitor(after: token)
    }

    deinit {
        close()
    }

    /// A new context, named in history by `name`. It does not merge automatically unless told to.
    public func newBackgroundContext(name: String = "background") -> Context {
        let context = Context(
            name: name, store: store, model: model, mergedToken: (try? store.currentToken()) ?? .zero,
            automaticallyMergesChanges: false)
        state.withLock { state in
            state.contexts.removeAll { $0.context == nil }
            state.contexts.append(WeakContext(context: context))
        }
        return context
    }

    /// The contexts of this container still in use (the view context first).
    func openContexts() -> [Context] {
        state.withLock { state in
            state.contexts.removeAll { $0.context == nil }
            return state.contexts.compactMap(\.context)
        }
    }

    /// Every history transaction committed from now on, in order, after the contexts that merge
    /// automatically have merged it. The stream ends when the container closes.
    public func changes() -> AsyncStream<StoreChange> {
        subscribers.stream()
    }

    /// The newest schema version another node writes with, when it is newer than this app's: an update
    /// of the app is available (`docs/schema-evolution.md`). Meanwhile what this app's schema declares of
    /// that node's changes is merged, and the rest is kept until the app registers the newer schema.
    public var newerPeerSchemaVersion: Int? {
        guard let newest = try? store.sync.newestPeerSchemaVersion(), newest > store.schema.version else { return nil }
        return newest
    }

    /// ``newerPeerSchemaVersion`` now if there is one, then each time a newer one is first seen (as the
    /// import that applied its segment commits). The stream ends when the container closes.
    public func schemaUpdates() -> AsyncStream<Int> {
        schemaSubscribers.stream(startingWith: newerPeerSchemaVersion)
    }

    /// Stops watching the store and ends every stream; contexts refuse further work. The store closes
    /// when the last reference to it goes.
    public func close() {
        let (monitor, contexts) = state.withLock { state in
            guard !state.closed else { return (nil as CommitObservation?, [Context]()) }
            state.closed = true
            defer {
                state.contexts = []
                state.monitor = nil
            }
            return (state.monitor, state.contexts.compactMap(\.context))
        }
        monitor?.cancel()
        subscribers.finish()
        schemaSubscribers.finish()
        for context in contexts { context.close() }
    }

    // MARK: - Watching the store

    private func startMonitor(after token: HistoryToken) {
        state.withLock { $0.delivered = token }
        let monitor = store.observeCommits { [weak self] _ in
            guard let self else { return }
            let delivered = self.deliver(after: self.state.withLock { $0.delivered })
            self.state.withLock { $0.delivered = delivered }
            self.announceNewerSchema()
        }
        let closed = state.withLock { state in
            state.monitor = monitor
            return state.closed
        }
        if closed { monitor.cancel() }
    }

    /// Reports a peer's schema version on ``schemaUpdates()`` the first time it is newer than this app's
    /// and than any reported before: one indexed query per commit seen.
    private func announceNewerSchema() {
        guard let newest = newerPeerSchemaVersion else { return }
        let isNew = state.withLock { state in
            guard newest > (state.announcedSchema ?? 0) else { return false }
            state.announcedSchema = newest
            return true
        }
        if isNew { schemaSubscribers.yield([newest]) }
    }

    /// Reads the history after `token` once, merges it into the contexts that merge automatically, then
    /// reports it on ``changes()``; returns the last token reported.
    private func deliver(after token: HistoryToken) -> HistoryToken {
        let contexts = state.withLock { state in
            state.contexts.removeAll { $0.context == nil }
            return state.contexts.compactMap(\.context)
        }
        var delivered = token
        while let transactions = try? store.history(after: delivered, limit: 200), let last = transactions.last {
            for context in contexts { context.mergeAutomatically((after: delivered, transactions: transactions)) }
            subscribers.yield(transactions.map(StoreChange.init))
            delivered = last.token
        }
        return delivered
    }
}
