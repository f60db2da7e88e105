import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import LogsyncTransport

/// `syncd`: its parts, put together, started in order and stopped in reverse. Each part owns its state
/// behind at most one lock (`docs/architecture.md`, "syncd's parts"):
///
/// - ``StoreMount``: the store syncing now, its engine and the watchers that wake the ``SyncLoop``;
/// - ``StatusBoard`` and ``EventHub``: what the daemon says about itself, to `status`, systemd, the
///   journal and `watch` clients;
/// - ``AccountSwitcher``: the account switch and the retained stores;
/// - ``Reloader``: what a reload changes;
/// - ``ControlServer`` with ``ControlHandler``, and the optional ``MetricsServer``.
public final class SyncDaemon: Sendable {
    /// The settings in force; a reload replaces the ones it can apply without a restart.
    public var configuration: DaemonConfiguration { settings.current }
    public var nodeID: String { mount.store?.nodeID ?? "" }

    let settings: SettingsInForce
    let mount: StoreMount
    private let loop: SyncLoop
    private let board: StatusBoard
    private let events: EventHub
    let switcher: AccountSwitcher
    private let reloader: Reloader
    let handler: ControlHandler
    private let server: ControlServer
    private let metrics: MetricsServer?
    private let carriers: Carriers
    private let notifier: SystemdNotifier
    private let logger: Logger
    /// Held for the daemon's lifetime: one syncd per store.
    private let lock: FileLock

    /// How long a stop waits for the round in progress to reach a safe point (between import batches).
    static let stopDeadline = Duration.seconds(3)

    /// Opens everything the daemon needs; throws a ``DaemonError`` that says what to fix.
    /// - Parameter logLevel: the level of the process's loggers, which `[log] level` sets (and a reload
    ///   changes) unless the command line pinned it.
    /// - Parameter carriers: how the daemon reaches an account's logs; by default what `configuration`
    ///   names (tests give an in-memory transport).
    public convenience init(configuration: DaemonConfiguration, logger: Logger, logLevel: LogLevelSetting = LogLevelSetting()) throws {
        try self.init(configuration: configuration, logger: logger, logLevel: logLevel, carriers: nil)
    }

    init(configuration: DaemonConfiguration, logger: Logger, logLevel: LogLevelSetting = LogLevelSetting(), carriers: Carriers?) throws {
        self.logger = logger
        logLevel.configure(Logger.Level(rawValue: configuration.logLevel) ?? .info)
        let socketDirectory = URL(fileURLWithPath: configuration.socketPath).deletingLastPathComponent().path
        do {
            try DurableFiles.makeDirectories(URL(fileURLWithPath: configuration.storePath).deletingLastPathComponent().path)
            // Through a relay the shared folder is not used: nothing to create.
            if configuration.ownsSharedFolder, configuration.relay == nil { try DurableFiles.makeDirectories(configuration.sharedFolder) }
        } catch {
            throw DaemonError(.setup, "cannot create the daemon's directories", cause: error)
        }
        do {
            try PrivateDirectory.prepare(socketDirectory)
        } catch {
            throw DaemonError(.unsafeRuntimeFolder, "cannot keep the control socket in \(socketDirectory): \(error.description)")
        }
        let lockPath = configuration.storePath + ".syncd.lock"
        guard let lock = try FileLock.acquire(lockPath) else {
            let holder = FileLock.holder(of: lockPath).map { " (pid \($0))" } ?? ""
            throw DaemonError(
                .alreadyRunning, "another syncd\(holder) is already running on \(configuration.storePath); stop it first, or give this one another store")
        }
        self.lock = lock

        let accounts = AccountStores(storePath: configuration.storePath, configuredAccount: configuration.account)
        let accountState: AccountState
        do {
            accountState = try accounts.load()
        } catch {
            throw DaemonError(.setup, "cannot read which account is active", cause: error)
        }
        metrics = try configuration.metricsListen.map { address in
            do {
                return try MetricsServer(address: address)
            } catch {
                throw DaemonError(.socketInUse, "cannot serve metrics at \(address) ([metrics] listen): \(error); choose another port, or unset it")
            }
        }
        let schema = try StoreMount.resolveSchema(
            configuration, stores: [accountState.active.path, accountState.pending?.from.path].compactMap { $0 }, kept: accounts.schemaFile)
        let carriers = try carriers ?? Carriers.configured(configuration, logger: logger)
        self.carriers = carriers
        var mounted: StoreMount.Mounted?
        if accountState.pending == nil {
            try StoreMount.checkStore(at: accountState.active.path, logger: logger)
            mounted = try StoreMount.mount(accountState.active, schema: schema, configuration: configuration, carriers: carriers)
        }
        // Watchdog pings come from the sync loop's own thread, at half systemd's interval: if the loop
        // hangs, they stop and systemd restarts the daemon.
        let notifier = SystemdNotifier()
        self.notifier = notifier
        let watchdog = notifier.watchdogInterval
        loop = SyncLoop(
            engine: mounted?.engine, maximumBackoffMilliseconds: configuration.maximumBackoffMilliseconds,
            heartbeatInterval: watchdog.map { $0 / 2 } ?? .seconds(3_600),
            heartbeat: { if watchdog != nil { notifier.watchdog() } })
        do {
            server = try ControlServer(path: configuration.socketPath, logger: logger)
        } catch {
            guard error.errno == EADDRINUSE else {
                throw DaemonError(.setup, "cannot open the control socket \(configuration.socketPath)", cause: error)
            }
            throw DaemonError(
                .socketInUse,
                "the control socket \(configuration.socketPath) is in use by another process; stop it or set [control] socket to another path")
        }
        let settings = SettingsInForce(configuration)
        self.settings = settings
        let loop = self.loop
        events = EventHub()
        board = StatusBoard(logger: logger, notifier: notifier, events: events, halted: { loop.halted })
        mount = StoreMount(mounted, loop: loop, settings: settings)
        switcher = AccountSwitcher(
            accounts: accounts, state: accountState, schema: schema, settings: settings, mount: mount, loop: loop, board: board, events: events,
            carriers: carriers, notifier: notifier, logger: logger)
        reloader = Reloader(
            settings: settings, mount: mount, board: board, accounts: accounts, schema: schema, syncthing: carriers.syncthing, notifier: notifier,
            logLevel: logLevel, logger: logger)
        let reader = StatusReader(
            settings: settings, mount: mount, loop: loop, board: board, switcher: switcher, syncthing: carriers.syncthing,
            startedAt: Int64(WallClock.milliseconds()))
        let board = self.board
        handler = ControlHandler(
            mount: mount, loop: loop, board: board, events: events, switcher: switcher, reloader: reloader, reader: reader, logger: logger,
            stopping: { board.snapshot.phase == .stopping })
    }

    /// Starts watching and syncing, then tells systemd it is ready: the store is open and the control
    /// socket bound. Returns at once.
    public func start() {
        let board = self.board
        let (mount, schema, carriers, logger) = (self.mount, switcher.schema, self.carriers, self.logger)
        loop.onStoreRestored { restored in mount.remount(after: restored, schema: schema, carriers: carriers, logger: logger) }
        if let restored = mount.current?.restored {
            logger.notice("\(restored)", metadata: ["message_id": "\(MessageID.storeRestored)"])
        }
        loop.start(onStart: { round in board.roundStarted(round) }, onRound: { outcome in board.roundFinished(outcome) })
        server.start(handler: handler)
        if let metrics {
            let reader = handler.reader
            metrics.start { reader.metricsText() }
            logger.notice("metrics at http://\(metrics.address)/metrics")
        }
        mount.startWatchers()
        board.setPhase(.idle)
        let configuration = settings.current
        let active = switcher.accountState.active
        let carrier = configuration.relay.map { "relay \($0.url)" } ?? "shared folder \(configuration.sharedFolder)"
        let nudge = carriers.syncthing.map { ", Syncthing at \($0.contact.url) asked to scan after each publish" } ?? ""
        logger.notice(
            "syncd ready: node \(nodeID), store \(active.path), \(carrier)\(nudge), account \(active.account ?? "(none: local store)"), socket \(configuration.socketPath), config \(configuration.source)",
            metadata: ["message_id": "\(MessageID.ready)", "node": "\(nodeID)"])
        notifier.ready(status: board.statusLine())
        switcher.start()
    }

    /// Re-reads the configuration file (``Reloader/reload()``): SIGHUP.
    public func reload() -> ReloadResult { reloader.reload() }

    /// Stops promptly, in the reverse order of ``start()``: the round in progress is asked to stop at its
    /// next safe point (every import batch is one SQLite transaction with its cursor, so nothing is
    /// half-applied or lost), then the socket closes (every client is disconnected) and the WAL is
    /// checkpointed. Bounded: a round that does not reach a safe point within ``stopDeadline`` is left to
    /// the exit, which rolls its transaction back.
    public func stop() {
        notifier.stopping()
        board.setPhase(.stopping)
        logger.notice("syncd stopping", metadata: ["message_id": "\(MessageID.stopping)"])
        events.publish(.stopping, "syncd is stopping")
        switcher.stop()
        mount.stop()
        carriers.syncthing?.stop()
        metrics?.stop()
        let ended = loop.stop(within: Self.stopDeadline)
        server.stop()
        guard ended else {
            logger.warning(
                "the round in progress did not reach a safe point within \(Self.stopDeadline); exiting anyway (its open transaction is rolled back, nothing is lost)")
            return
        }
        // The checkpoint may wait for another process's readers: it gets a second, then the exit goes on.
        if let store = mount.store {
            let done = Wakeup()
            Thread.detachNewThread {
                try? store.checkpoint()
                done.signal()
            }
            if !done.wait(timeout: .seconds(1)) {
                logger.info("the WAL checkpoint waits for another process; left to the next start")
            }
        }
        logger.info("syncd stopped")
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
