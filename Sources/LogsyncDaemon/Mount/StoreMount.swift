import Logging
import LogsyncControl
import LogsyncCore
import LogsyncRelayTransport
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import LogsyncTransport
import Synchronization

/// The store the daemon syncs now, with its account's transport and engine, and the watchers that wake
/// the sync loop on its commits and on arrivals in its account's folder. Whatever changes what is mounted,
/// or the settings it runs with — an account switch installing its new store, a reload — does so here,
/// under this component's one lock, so a reload finds a store either not yet installed (whose install then
/// takes the reloaded settings) or installed with the loop running it.
final class StoreMount: Sendable {
    /// A mounted store, with its account's transport and engine (neither for the local store).
    struct Mounted: Sendable {
        let store: Store
        let account: String?
        let transport: (any Transport)?
        /// Replaced by a reload with the same engine under the new settings (``SyncEngine/reconfigured(_:)``).
        var engine: SyncEngine?
        /// The store was found restored from an older backup as it was mounted, and took a new node id.
        var restored: StoreRestored?
    }

    private struct State {
        var mounted: Mounted?
        /// On the monitor's own thread, not a task: cancelling it lets go of the store's connection at once,
        /// even while the cooperative pool is busy (an account switch waits for that).
        var commitWatcher: CommitObservation?
        var arrivalsWatcher: Task<Void, Never>?
        /// Once the daemon stops, no watcher starts again.
        var stopped = false
    }

    private let state: Mutex<State>
    private let loop: SyncLoop
    private let settings: SettingsInForce

    init(_ mounted: Mounted?, loop: SyncLoop, settings: SettingsInForce) {
        state = Mutex(State(mounted: mounted))
        self.loop = loop
        self.settings = settings
    }

    var current: Mounted? { state.withLock { $0.mounted } }
    var store: Store? { current?.store }
    var engine: SyncEngine? { current?.engine }

    /// The mounted store, or an error saying why there is none (`why`: the switcher's account of it).
    func store(orExplain why: () -> String?) throws -> Store {
        guard let store else { throw DaemonError(.setup, why() ?? "no store is open") }
        return store
    }

    /// Starts waking the loop on the mounted store's commits and arrivals (at start-up).
    func startWatchers() {
        state.withLock { state in startWatchers(&state) }
    }

    /// Makes `mounted` the store syncing from now on (the end of an account switch): with the settings in
    /// force (a reload meanwhile found nothing mounted), its relay token read again (rotated meanwhile),
    /// its watchers started and the loop running it.
    func install(_ mounted: Mounted) {
        state.withLock { state in
            var mounted = mounted
            let configuration = settings.current
            mounted.engine = mounted.engine.map { $0.reconfigured(to: configuration) }
            if let transport = mounted.transport?.carrierTransport as? RelayTransport, let connection = configuration.relay, let account = mounted.account,
                let token = try? connection.token(for: account)
            {
                transport.use(token: token)
            }
            state.mounted = mounted
            startWatchers(&state)
            if let engine = mounted.engine { loop.attach(engine) }
        }
    }

    /// The settings in force reach the mounted engine and the loop (a reload); the arrivals watcher starts
    /// again when `rescanChanged`.
    func reconfigure(rescanChanged: Bool) {
        state.withLock { state in
            let configuration = settings.current
            let engine = state.mounted?.engine.map { $0.reconfigured(to: configuration) }
            state.mounted?.engine = engine
            loop.reconfigure(engine: state.mounted?.engine, maximumBackoffMilliseconds: configuration.maximumBackoffMilliseconds)
            if rescanChanged, state.arrivalsWatcher != nil { watchArrivals(&state) }
        }
    }

    /// Lets go of the mounted store (the start of an account switch): its watchers end and the loop stops
    /// running rounds on it, waiting up to `timeout` for the round in progress. False when that round did
    /// not end in time (the store stays mounted).
    func letGo(within timeout: Duration) -> Bool {
        let watchers = state.withLock { state in
            defer {
                state.commitWatcher = nil
                state.arrivalsWatcher = nil
            }
            return (state.commitWatcher, state.arrivalsWatcher)
        }
        watchers.0?.cancel()
        watchers.1?.cancel()
        guard loop.detach(within: timeout) else { return false }
        state.withLock { $0.mounted = nil }
        return true
    }

    /// Opens the mounted store again under the node id it just took (``StoreRestored``, found by a round):
    /// the engine made for the old id runs no more rounds. On another thread than the loop's, since it
    /// waits for the loop to let go.
    func remount(after restored: StoreRestored, schema: Schema, carriers: Carriers, logger: Logger) {
        guard let mounted = current, let account = mounted.account, mounted.store.nodeID == restored.old.rawValue else { return }
        let path = mounted.store.path
        logger.notice("\(restored)", metadata: ["message_id": "\(MessageID.storeRestored)"])
        guard letGo(within: .seconds(60)) else {
            logger.error("the store \(path) took node id \(restored.new) but the round in progress did not end within 60 s; restart syncd to go on")
            return
        }
        do {
            install(try Self.mount(AccountState.Store(account: account, path: path), schema: schema, configuration: settings.current, carriers: carriers))
        } catch {
            logger.error("the store \(path) took node id \(restored.new) and could not be opened again: \(error); restart syncd to go on")
        }
    }

    /// Ends the watchers for good (the daemon stops).
    func stop() {
        let watchers = state.withLock { state in
            state.stopped = true
            return (state.commitWatcher, state.arrivalsWatcher)
        }
        watchers.0?.cancel()
        watchers.1?.cancel()
    }

    private func startWatchers(_ state: inout State) {
        guard let store = state.mounted?.store, !state.stopped else { return }
        state.commitWatcher?.cancel()
        let loop = self.loop
        state.commitWatcher = store.observeCommits { _ in loop.wake() }
        watchArrivals(&state)
    }

    /// (Re)starts the watcher of the account's folder at the rescan interval in force.
    private func watchArrivals(_ state: inout State) {
        guard let transport = state.mounted?.transport, !state.stopped else { return }
        state.arrivalsWatcher?.cancel()
        state.arrivalsWatcher = wake(on: transport.arrivals(rescanInterval: .milliseconds(settings.current.rescanIntervalMilliseconds)))
    }

    private func wake<Element: Sendable>(on stream: AsyncStream<Element>) -> Task<Void, Never> {
        let loop = self.loop
        return Task { for await _ in stream { loop.wake() } }
    }
}

/// The configuration in force: what syncd started with, and what reloads applied since.
final class SettingsInForce: Sendable {
    private let value: Mutex<DaemonConfiguration>

    init(_ configuration: DaemonConfiguration) { value = Mutex(configuration) }

    var current: DaemonConfiguration { value.withLock { $0 } }

    func replace(with configuration: DaemonConfiguration) { value.withLock { $0 = configuration } }
}
