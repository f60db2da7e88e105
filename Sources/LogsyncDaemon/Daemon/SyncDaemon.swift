import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncStore
import LogsyncSync
import LogsyncSyncthing
import LogsyncSystemd
import LogsyncTransport
import Synchronization

/// `syncd`: keeps one store in sync through a shared folder, and answers `syncctl` on its control socket.
///
/// No neighbour can stop it (`docs/architecture.md`): every wait has a deadline, control clients are
/// bounded and never hold up the sync loop, only regular files are read from the shared folder, what is
/// held or refused is reported with its reason (status, peers, trigger, the journal), a damaged store
/// stops syncing instead of spreading, and a stop is prompt at any moment.
public final class SyncDaemon: Sendable {
    /// The settings in force; a reload replaces the ones it can apply without a restart.
    public var configuration: DaemonConfiguration { state.withLock { $0.configuration } }
    /// The store syncing now, with its account's transport; nil while an account switch runs.
    let mounted: Mutex<Mounted?>
    /// The stores per account and the persisted state of a switch (`docs/accounts.md`).
    let accounts: AccountStores
    /// The schema every store of this daemon registers.
    let schema: Schema
    /// The account state as last persisted, and the switch's progress; changed only under ``switchLock``.
    let accountState: Mutex<AccountState>
    let switchProgress = Mutex(SwitchRun())
    /// Held by whoever changes the account state: a switch's steps, the shipping of retained stores.
    let switchLock = NSLock()
    /// Stops a switch or a rebuild at its next safe point when the daemon stops.
    let switchCancellation = Cancellation()
    /// Wakes the thread that ships and deletes retained stores.
    let retainedWakeup = DispatchSemaphore(value: 0)
    private let lock: FileLock
    let loop: SyncLoop
    /// Asks Syncthing to scan this node's folder after each publish (`[syncthing]`), off the sync loop.
    let syncthing: SyncthingNudge?
    private let server: ControlServer
    let logger: Logger
    let logLevel: LogLevelSetting
    let notifier = SystemdNotifier()
    /// What `/metrics` counts since start (`[metrics] listen`).
    let metricsCounters = Mutex(MetricsCounters())
    private let metrics: MetricsServer?
    private let startedAt = Int64(WallClock.milliseconds())
    let state: Mutex<State>
    /// Held by a reload from start to end (SIGHUP and `syncctl reload` may come at once), and by whatever
    /// changes what a reload changes: a stop ending the watchers (no reload starts one after it), an
    /// account switch mounting its new store and starting them (a reload sees the store before or after).
    let reloading = Mutex(())

    /// How long start-up may spend on SQLite's quick_check of the store (`docs/operations.md`).
    public static let startCheckLimit = Duration.seconds(2)
    /// How long a stop waits for the round in progress to reach a safe point (between import batches).
    static let stopDeadline = 3.0

    struct State {
        var configuration: DaemonConfiguration
        var phase: DaemonStatus.State = .starting
        var lastSummary: SyncSummary?
        var lastReport: SyncReport?
        var lastError: String?
        var subscribers: [Int: (accountEvents: Bool, refusalEvents: Bool, handler: @Sendable (DaemonEvent) -> Void)] = [:]
        var nextSubscriber = 0
        var commitWatcher: Task<Void, Never>?
        var arrivalsWatcher: Task<Void, Never>?
        var stopped = false
        /// What the journal has been told waits or was refused, so that each is logged once.
        var notices: Set<Notice> = []
        /// The last time a round found the relay had lost history, and what it did (for `status`).
        var relayReset: (message: String, at: Int64)?
    }

    /// Something held or refused that the journal is told about once, when it appears.
    struct Notice: Hashable, Comparable {
        enum Kind: Int, Comparable {
            case waiting, rejected, strayFile
            static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
        }

        var kind: Kind
        var subject: String
        var reason: String

        static func < (lhs: Self, rhs: Self) -> Bool { (lhs.kind, lhs.subject, lhs.reason) < (rhs.kind, rhs.subject, rhs.reason) }
    }

    /// Opens everything the daemon needs; throws a ``DaemonError`` that says what to fix.
    /// - Parameter logLevel: the level of the process's loggers, which `[log] level` sets (and a reload
    ///   changes) unless the command line pinned it.
    public init(configuration: DaemonConfiguration, logger: Logger, logLevel: LogLevelSetting = LogLevelSetting()) throws {
        self.logger = logger
        self.logLevel = logLevel
        logLevel.configure(Logger.Level(rawValue: configuration.logLevel) ?? .info)
        let storeDirectory = URL(fileURLWithPath: configuration.storePath).deletingLastPathComponent().path
        let socketDirectory = URL(fileURLWithPath: configuration.socketPath).deletingLastPathComponent().path
        do {
            try DurableFiles.makeDirectories(storeDirectory)
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
                .alreadyRunning,
                "another syncd\(holder) is already running on \(configuration.storePath); stop it first, or give this one another store")
        }
        self.lock = lock

        accounts = AccountStores(storePath: configuration.storePath, configuredAccount: configuration.account)
        let accountState: AccountState
        do {
            accountState = try accounts.load()
        } catch {
            throw DaemonError(.setup, "cannot read which account is active", cause: error)
        }
        self.accountState = Mutex(accountState)
        if let address = configuration.metricsListen {
            do {
                metrics = try MetricsServer(address: address)
            } catch {
                throw DaemonError(.socketInUse, "cannot serve metrics at \(address) ([metrics] listen): \(error); choose another port, or unset it")
            }
        } else {
            metrics = nil
        }
        schema = try Self.resolveSchema(
            configuration, stores: [accountState.active.path, accountState.pending?.from.path].compactMap { $0 }, kept: accounts.schemaFile)
        syncthing = try Self.syncthingNudge(configuration, logger: logger)
        var mounted: Mounted?
        if accountState.pending == nil {
            try Self.checkStore(at: accountState.active.path, logger: logger)
            mounted = try Self.mount(accountState.active, schema: schema, configuration: configuration, syncthing: syncthing)
        }
        self.mounted = Mutex(mounted)
        // Watchdog pings come from the sync loop's own thread, at half systemd's interval: if the loop
        // hangs, they stop and systemd restarts the daemon.
        let notifier = self.notifier
        let watchdog = notifier.watchdogInterval
        loop = SyncLoop(
            engine: mounted?.engine,
            maximumBackoffMilliseconds: configuration.maximumBackoffMilliseconds,
            heartbeatInterval: watchdog.map { $0.seconds / 2 } ?? 3_600,
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
        state = Mutex(State(configuration: configuration))
    }

    /// SQLite's quick_check of an existing store, bounded by ``startCheckLimit``: a store found damaged is
    /// refused (syncing it could export the damage to every node); a check cut short by the bound is
    /// logged, and `syncctl check` does the full one.
    private static func checkStore(at path: String, logger: Logger) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let report: IntegrityReport
        do {
            report = try Store.checkIntegrity(at: path, full: false, timeLimit: startCheckLimit)
        } catch {
            throw DaemonError(.setup, "cannot check the store \(path) before syncing it", cause: error)
        }
        let milliseconds = report.elapsed.components.seconds * 1000 + report.elapsed.components.attoseconds / 1_000_000_000_000_000
        guard report.isIntact else {
            let shown = report.problems.prefix(5).joined(separator: "; ")
            let more = report.problems.count > 5 ? " (and \(report.problems.count - 5) more)" : ""
            logger.critical("the store \(path) is damaged: \(shown)\(more)", metadata: ["message_id": "\(MessageID.damaged)"])
            throw DaemonError(
                .damaged,
                "the store \(path) is damaged (SQLite's quick_check: \(shown)\(more)); syncd does not sync it, so that the damage cannot spread to other nodes. "
                    + "Restore it from a backup, or move it aside with its -wal and -shm files and start syncd again: a new store is rebuilt from what the shared folder holds (changes never exported are lost)")
        }
        if report.complete {
            logger.info("store check: quick_check found nothing wrong in \(milliseconds) ms")
        } else {
            logger.warning(
                "store check: quick_check did not finish within \(startCheckLimit) (nothing wrong up to there); syncing anyway. Run 'syncctl check' for a full check")
        }
    }

    /// The schema of every store: the configured one, else the one registered in an existing store,
    /// else the notes of the README's tour.
    /// (A switch keeps the schema in `kept` when it starts: after a crash in the middle, neither the old
    /// store nor the new one may be there to tell it.)
    private static func resolveSchema(_ configuration: DaemonConfiguration, stores: [String], kept: String) throws -> Schema {
        if let path = configuration.schemaPath { return try readSchema(path) }
        for path in stores {
            if let registered = try retryingWhileBusy({ try Store.registeredSchema(at: path) }) { return registered }
        }
        if DurableFiles.exists(kept) { return try readSchema(kept) }
        return .notes
    }

    static func readSchema(_ path: String) throws -> Schema {
        guard case .bytes(let bytes)? = try? Directory.readFile(atPath: path, maximumBytes: 16 << 20) else {
            throw DaemonError(.setup, "cannot read schema file \(path) (missing, unreadable, not a regular file, or over 16 MiB)")
        }
        do {
            return try Schema(json: Data(bytes))
        } catch {
            throw DaemonError(.setup, "schema file \(path) does not hold a valid schema; fix it or point store.schema elsewhere", cause: error)
        }
    }

    /// Another program writing the store may hold its locks past one busy timeout at start-up: try
    /// again until a deadline.
    private static func retryingWhileBusy<T>(_ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            do {
                return try body()
            } catch let error as StoreError where error.code == .busy && ContinuousClock.now < deadline {
                usleep(10_000)
            }
        }
    }

    /// Opens a store for syncing (creating it if needed).
    static func openStore(at path: String, schema: Schema, options: StoreOptions = .syncing) throws -> Store {
        do {
            return try retryingWhileBusy { try Store(path: path, schema: schema, options: options) }
        } catch let error as StoreError where error.code == .schemaDrift {
            throw DaemonError(.schemaDrift, "syncd does not sync \(path): \(error.message)", cause: error)
        }
    }

    /// Opens `store` with its account's transport and engine (none for the local store).
    static func mount(_ store: AccountState.Store, schema: Schema, configuration: DaemonConfiguration, syncthing: SyncthingNudge?) throws -> Mounted {
        let opened = try openStore(at: store.path, schema: schema)
        guard let account = store.account else { return Mounted(store: opened, account: nil, transport: nil, engine: nil) }
        let transport = try transport(configuration, account: account, node: NodeID(opened.nodeID), syncthing: syncthing)
        var settings = configuration.syncConfiguration
        settings.account = account
        return Mounted(store: opened, account: account, transport: transport, engine: SyncEngine(store: opened, transport: transport, configuration: settings))
    }

    /// The store being synced, if one is mounted.
    var store: Store? { mounted.withLock { $0?.store } }

    public var nodeID: String { store?.nodeID ?? "" }

    /// Starts watching and syncing, then tells systemd it is ready: the store is open and the control
    /// socket bound. Returns at once.
    public func start() {
        loop.start(
            onStart: { [weak self] round in self?.roundStarted(round) },
            onRound: { [weak self] outcome in self?.roundFinished(outcome) })
        server.start(daemon: self)
        if let metrics {
            metrics.start { [weak self] in self?.metricsText() ?? "" }
            logger.notice("metrics at http://\(metrics.address)/metrics")
        }
        let configuration = self.configuration
        startWatchers()
        setPhase(.idle)
        let active = accountState.withLock { $0.active }
        logger.notice(
            "syncd ready: node \(nodeID), store \(active.path), \(configuration.relay.map { "relay \($0.url)" } ?? "shared folder \(configuration.sharedFolder)")\(syncthing.map { ", Syncthing at \($0.contact.url) asked to scan after each publish" } ?? ""), account \(active.account ?? "(none: local store)"), socket \(configuration.socketPath), config \(configuration.source)",
            metadata: ["message_id": "\(MessageID.ready)", "node": "\(nodeID)"])
        notifier.ready(status: statusLine())
        startAccountWork()
    }

    /// Wakes the loop on the mounted store's commits and on arrivals in its account's folder.
    func startWatchers() {
        reloading.withLock { _ in startWatchersHoldingReload() }
    }

    /// ``startWatchers()`` for a caller that holds ``reloading``.
    func startWatchersHoldingReload() {
        guard let store else { return }
        install(\.commitWatcher, waking: store.commits())
        watchArrivals(rescanIntervalMilliseconds: configuration.rescanIntervalMilliseconds)
    }

    /// Wakes the loop on each element of `stream`, in place of the watcher at `slot` (none once stopped).
    private func install<Element: Sendable>(_ slot: WritableKeyPath<State, Task<Void, Never>?>, waking stream: AsyncStream<Element>) {
        let loop = self.loop
        let watcher = Task { for await _ in stream { loop.wake() } }
        let (previous, stopped) = state.withLock { state in
            defer { if !state.stopped { state[keyPath: slot] = watcher } }
            return (state[keyPath: slot], state.stopped)
        }
        previous?.cancel()
        if stopped { watcher.cancel() }
    }

    /// Ends the watchers of the mounted store (before it is let go of).
    func stopWatchers() {
        let watchers = reloading.withLock { _ in
            state.withLock { state in
                defer {
                    state.commitWatcher = nil
                    state.arrivalsWatcher = nil
                }
                return [state.commitWatcher, state.arrivalsWatcher]
            }
        }
        for watcher in watchers { watcher?.cancel() }
    }

    /// (Re)starts the watcher of the shared folder; callers hold ``reloading`` or run before any reload.
    func watchArrivals(rescanIntervalMilliseconds: Int) {
        guard let transport = mounted.withLock({ $0?.transport }) else { return }
        install(\.arrivalsWatcher, waking: transport.arrivals(rescanInterval: .milliseconds(rescanIntervalMilliseconds)))
    }

    /// Stops promptly: the round in progress is asked to stop at its next safe point (every import batch
    /// is one SQLite transaction with its cursor, so nothing is half-applied or lost), then the socket
    /// closes (every client is disconnected) and the WAL is checkpointed. Bounded: a round that does not
    /// reach a safe point within ``stopDeadline`` is left to the exit, which rolls its transaction back.
    public func stop() {
        notifier.stopping()
        setPhase(.stopping)
        logger.notice("syncd stopping", metadata: ["message_id": "\(MessageID.stopping)"])
        publish(DaemonEvent(kind: .stopping, at: Int64(WallClock.milliseconds()), message: "syncd is stopping"))
        let watchers = reloading.withLock { _ in
            state.withLock { state in
                state.stopped = true
                return [state.commitWatcher, state.arrivalsWatcher]
            }
        }
        for watcher in watchers { watcher?.cancel() }
        switchCancellation.cancel()
        retainedWakeup.signal()
        syncthing?.stop()
        metrics?.stop()
        let ended = loop.stop(within: Self.stopDeadline)
        server.stop()
        guard ended else {
            logger.warning(
                "the round in progress did not reach a safe point within \(Self.stopDeadline) s; exiting anyway (its open transaction is rolled back, nothing is lost)")
            return
        }
        // The checkpoint may wait for another process's readers: it gets a second, then the exit goes on.
        guard let store = self.store else {
            logger.info("syncd stopped")
            return
        }
        let checkpointed = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.checkpoint()
            checkpointed.signal()
        }
        if checkpointed.wait(timeout: .now() + 1) == .timedOut {
            logger.info("the WAL checkpoint waits for another process; left to the next start")
        }
        logger.info("syncd stopped")
    }

    /// The one-line STATUS= systemd shows in `systemctl status`.
    func statusLine() -> String {
        let (phase, summary, error) = state.withLock { ($0.phase, $0.lastSummary, $0.lastError) }
        if let halted = loop.halted { return "halted: \(halted.prefix(120))" }
        var line = "\(phase.rawValue)"
        if let summary { line += "; round \(summary.round) \(summary.ok ? "ok" : "failed")" }
        if let error, phase == .backoff { line += ": \(error.prefix(120))" }
        return line
    }

    // MARK: - Requests from the control socket

    /// Answers one control request (all but `watch`, which the server streams).
    func handle(_ request: ControlRequest) -> ControlResponse {
        var response = ControlResponse(id: request.id)
        func fail(_ code: ControlFailure.Code, _ message: String) {
            response.ok = false
            response.error = ControlFailure(code, message)
        }
        do {
            switch request.command {
            case .status:
                response.status = try status()
            case .peers:
                response.peers = try status().peers
            case .history:
                response.history = try history(limit: max(1, min(request.limit ?? 20, 10_000)))
            case .trigger:
                let timeout = Self.seconds(request.timeoutMilliseconds, default: 30)
                if let reason = notSyncing() {
                    fail(.syncFailed, reason)
                    break
                }
                switch loop.trigger(timeout: timeout) {
                case nil:
                    if state.withLock({ $0.stopped }) {
                        fail(.shuttingDown, "syncd is stopping; the round did not complete")
                    } else {
                        fail(.timeout, "the sync did not complete within \(timeout) s")
                    }
                case .completed(let report, let summary)?:
                    response.trigger = TriggerResult(
                        summary: summary, published: report.published.map(\.description), applied: report.applied.map(\.description),
                        waiting: Dictionary(uniqueKeysWithValues: report.waiting.map { ($0.key.rawValue, $0.value) }),
                        waitingReasons: Dictionary(uniqueKeysWithValues: report.waitingReasons.map { ($0.key.rawValue, $0.value) }),
                        rejected: report.rejected.map(\.description), quarantined: report.quarantined.map(\.description))
                    if report.interrupted { fail(.shuttingDown, "syncd is stopping; the round stopped before it completed") }
                case .failed(let error, let summary)?:
                    fail(.syncFailed, error)
                    response.trigger = TriggerResult(
                        summary: summary, published: [], applied: [], waiting: [:], waitingReasons: [:], rejected: [], quarantined: [])
                }
            case .reload:
                let result = reload()
                response.reload = result
                if !result.ok { fail(.reloadFailed, result.message) }
            case .check:
                let result = try check(timeLimit: Self.seconds(request.timeoutMilliseconds, default: 600))
                response.check = result
                if !result.intact {
                    fail(.damaged, "the store is damaged; syncing has stopped: \(result.problems.prefix(3).joined(separator: "; "))")
                } else if !result.complete {
                    fail(.timeout, "the check did not finish in time (nothing wrong up to there)")
                }
            case .prune, .prunePlan:
                guard let engine = mounted.withLock({ $0?.engine }) else {
                    fail(.syncFailed, notSyncing() ?? "no store is mounted")
                    break
                }
                guard engine.configuration.retention.enabled else {
                    fail(.badRequest, "retention is off ([retention] enabled = false): nothing is pruned")
                    break
                }
                response.retention = try engine.prune(dryRun: request.command == .prunePlan)
            case .quarantineList, .quarantineRelease, .quarantineDrop:
                guard let engine = mounted.withLock({ $0?.engine }) else {
                    fail(.syncFailed, notSyncing() ?? "no store is mounted")
                    break
                }
                if let (code, message) = try quarantine(request, engine: engine, into: &response) { fail(code, message) }
            case .watch:
                fail(.badRequest, "watch is a stream: send it on a connection of its own")
            case .accountStatus, .accountList:
                response.accounts = accountReport()
            case .accountSwitch, .accountLogout:
                let outcome = requestSwitch(request)
                response.accounts = accountReport()
                if let (code, message) = outcome { fail(code, message) }
            }
        } catch {
            fail(.internalError, String(describing: error))
        }
        return response
    }

    /// A request's `timeout_ms` in seconds, within an hour.
    private static func seconds(_ milliseconds: Int?, default seconds: Double) -> Double {
        min(max(milliseconds.map { Double($0) / 1000 } ?? seconds, 0), 3_600)
    }

    func status() throws -> DaemonStatus {
        let (summary, report, error, phase, configuration) = state.withLock {
            ($0.lastSummary, $0.lastReport, $0.lastError, $0.phase, $0.configuration)
        }
        let halted = loop.halted
        let store = self.store
        let pending = try store?.pendingExports() ?? (transactions: 0, segments: 0)
        var peers: [String: PeerStatus] = [:]
        func peer(_ node: String) -> PeerStatus {
            peers[node] ?? PeerStatus(node: node, appliedSequence: 0, availableSequence: 0, lag: 0, waitingFor: nil, lastAppliedAt: nil)
        }
        for (node, applied, at) in try store?.peerCursors() ?? [] {
            peers[node.rawValue] = PeerStatus(node: node.rawValue, appliedSequence: applied, availableSequence: applied, lag: 0, waitingFor: nil, lastAppliedAt: at)
        }
        // What could be applied: segments that follow on from the cursor without a gap and were not
        // rejected (`SyncReport.available`), so that a stray file far ahead cannot fake a lag.
        for (node, available) in report?.available ?? [:] {
            var status = peer(node.rawValue)
            status.availableSequence = max(status.availableSequence, available)
            peers[node.rawValue] = status
        }
        for (node, next) in report?.waiting ?? [:] {
            var status = peer(node.rawValue)
            status.waitingFor = next
            status.waitingReason = report?.waitingReasons[node]
            peers[node.rawValue] = status
        }
        let peerList = peers.values.map { peer -> PeerStatus in
            var peer = peer
            peer.lag = peer.availableSequence > peer.appliedSequence ? peer.availableSequence - peer.appliedSequence : 0
            return peer
        }.sorted { $0.node < $1.node }
        let ignored = (report?.ignored ?? []).sorted { ($0.reason.isSuspicious ? 0 : 1, $0.path) < ($1.reason.isSuspicious ? 0 : 1, $1.path) }
        let accounts = accountReport()
        var relayContact = (mounted.withLock { $0?.transport } as? RelayTransport)?.lastContact
        if let reset = state.withLock({ $0.relayReset }) {
            // What the engine did about it says more than what the transport saw (and a restart sees only the former).
            relayContact?.lastReset = reset.message
            relayContact?.lastResetAt = reset.at
        }
        var status = DaemonStatus(
            state: halted != nil ? .halted : phase, account: accounts.active ?? "", node: store?.nodeID ?? "", store: accounts.store,
            sharedFolder: configuration.sharedFolder, startedAt: startedAt, lastSync: summary,
            pendingTransactions: pending.transactions, pendingSegments: pending.segments, peers: peerList,
            quarantined: try (store?.quarantined() ?? []).map {
                QuarantineEntry(node: $0.node.rawValue, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence, reason: $0.reason, location: $0.location)
            },
            rejected: report?.rejected.map(\.description) ?? [], ignoredFiles: ignored.count,
            ignored: ignored.prefix(DaemonStatus.ignoredListLimit).map { IgnoredEntry(path: $0.path, reason: $0.reason.description) },
            lastError: halted ?? error, retryInMilliseconds: phase == .backoff ? loop.retryIn : nil, relay: relayContact, accounts: accounts,
            retention: try mounted.withLock { $0?.engine }.map { engine in
                // As of the last prune, with what this node keeps now.
                var retention = engine.retentionStatus
                retention.retainedSegments = try engine.store.retainedSegmentCount()
                retention.prunedThrough = try engine.store.prunedSequence()
                return retention
            },
            syncthing: syncthing?.contact)
        status.refused = try store?.refusals().map(Self.entry)
        return status
    }

    /// The text `/metrics` answers with (``MetricsText``): the status `syncctl status --json` gives, and
    /// the counters since start.
    func metricsText() -> String {
        let counters = metricsCounters.withLock { $0 }
        guard let status = try? status() else { return "# syncd could not read its status; see syncctl status\n" }
        let report = state.withLock { $0.lastReport }
        var held: [String: Int] = [:]
        if let report {
            let kinds = [
                ("newer_schema", report.heldForSchema.map(\.node)), ("clock_ahead", report.heldForClockSkew.map(\.node)),
                ("rejected", report.rejected.map(\.name.node)),
            ]
            var explained: Set<NodeID> = []
            for (kind, nodes) in kinds {
                let waiting = Set(nodes).intersection(report.waiting.keys).subtracting(explained)
                held[kind] = waiting.count
                explained.formUnion(waiting)
            }
            held["missing"] = Set(report.waiting.keys).subtracting(explained).count
        }
        return MetricsText.render(status: status, counters: counters, held: held, version: LogsyncVersion.current)
    }

    func history(limit: Int) throws -> [HistoryEntry] {
        try mountedStore().recentHistory(limit: limit).map {
            HistoryEntry(token: $0.token.rawValue, timestamp: String(describing: $0.timestamp), time: $0.timestamp.wallClockDescription, author: $0.author, context: $0.contextName,
                         origin: $0.origin.description, changes: $0.changes.count)
        }
    }

    /// SQLite's full `integrity_check` of the store, on a connection of its own (the sync loop goes on
    /// meanwhile). Damage halts syncing.
    func check(timeLimit: Double) throws -> CheckResult {
        let report = try mountedStore().checkIntegrity(full: true, timeLimit: .milliseconds(Int(timeLimit * 1000)))
        let milliseconds = Int(report.elapsed.components.seconds * 1000 + report.elapsed.components.attoseconds / 1_000_000_000_000_000)
        if !report.isIntact {
            let reason = "syncctl check found the store damaged: \(report.problems.prefix(3).joined(separator: "; ")); syncing stopped so that the damage cannot spread. "
                + "Restore the store from a backup, or move it aside and restart syncd to rebuild it from the shared folder"
            logger.critical("\(reason)", metadata: ["message_id": "\(MessageID.damaged)"])
            loop.halt(reason)
            notifier.status(statusLine())
        }
        return CheckResult(intact: report.isIntact, complete: report.complete, problems: report.problems, elapsedMilliseconds: milliseconds)
    }

    func subscribe(accountEvents: Bool = false, refusalEvents: Bool = false, _ handler: @escaping @Sendable (DaemonEvent) -> Void) -> Int {
        state.withLock { state in
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = (accountEvents, refusalEvents, handler)
            return state.nextSubscriber
        }
    }

    func unsubscribe(_ id: Int) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    // MARK: - Rounds

    func setPhase(_ phase: DaemonStatus.State) {
        state.withLock { if $0.phase != .stopping { $0.phase = phase } }
    }

    private func roundStarted(_ round: Int) {
        setPhase(.syncing)
        notifier.status("syncing (round \(round))")
        publish(DaemonEvent(kind: .syncStarted, at: Int64(WallClock.milliseconds()), message: "round \(round) started"))
    }

    private func roundFinished(_ outcome: SyncLoop.Outcome) {
        switch outcome {
        case .completed(let report, let summary):
            metricsCounters.withLock { $0.count(report, seconds: Double(summary.finishedAt - summary.startedAt) / 1000) }
            state.withLock { state in
                state.lastSummary = summary
                state.lastReport = report
                state.lastError = nil
            }
            setPhase(.idle)
            for name in report.published { publish(DaemonEvent(kind: .published, at: summary.finishedAt, message: name.description)) }
            for name in report.applied { publish(DaemonEvent(kind: .applied, at: summary.finishedAt, message: name.description)) }
            for refused in report.refused {
                publish(DaemonEvent(kind: .refused, at: summary.finishedAt, message: refused.description))
            }
            for name in report.quarantined {
                logger.critical(
                    "QUARANTINED \(name): the same node and sequences with different content; not applied",
                    metadata: ["message_id": "\(MessageID.quarantined)", "segment": "\(name)"])
                publish(DaemonEvent(kind: .quarantined, at: summary.finishedAt, message: name.description))
            }
            if !report.interrupted { tellJournal(about: report) }
            if let reset = report.carrierReset {
                state.withLock { $0.relayReset = (reset, summary.finishedAt) }
                logger.notice("the relay lost history: \(reset)", metadata: ["message_id": "\(MessageID.relayReset)"])
            }
            // A baseline load is logged even when the round moved nothing else (a new node for which the
            // baseline held everything there was).
            if !report.published.isEmpty || !report.applied.isEmpty || !report.quarantined.isEmpty || report.loadedBaseline != nil {
                logger.info("round \(summary.round): \(report)", metadata: ["message_id": "\(MessageID.syncCompleted)"])
            } else {
                logger.debug("round \(summary.round): nothing to move (\(summary.finishedAt - summary.startedAt) ms)")
            }
            notifier.status(statusLine())
            publish(DaemonEvent(kind: .syncFinished, at: summary.finishedAt, message: "round \(summary.round): \(report)"))
        case .failed(let error, let summary):
            metricsCounters.withLock { $0.countFailure(seconds: Double(summary.finishedAt - summary.startedAt) / 1000) }
            state.withLock { state in
                state.lastSummary = summary
                state.lastError = error
            }
            setPhase(.backoff)
            logger.error("round \(summary.round) failed: \(error)", metadata: ["message_id": "\(MessageID.syncFailed)"])
            if let halted = loop.halted {
                logger.critical("\(halted)", metadata: ["message_id": "\(MessageID.damaged)"])
            }
            notifier.status(statusLine())
            publish(DaemonEvent(kind: .syncFailed, at: summary.finishedAt, message: error))
        }
    }

    /// Logs, once each, what newly waits or was refused in this round (and what no longer waits), so that
    /// the journal tells the same story as `status` without repeating it every round.
    private func tellJournal(about report: SyncReport) {
        var current: Set<Notice> = []
        for (node, sequence) in report.waiting {
            current.insert(Notice(kind: .waiting, subject: "\(node) sequence \(sequence)", reason: report.waitingReasons[node] ?? "waiting"))
        }
        for rejection in report.rejected { current.insert(Notice(kind: .rejected, subject: rejection.name.description, reason: rejection.reason)) }
        for file in report.ignored where file.reason.isSuspicious {
            current.insert(Notice(kind: .strayFile, subject: file.path, reason: file.reason.description))
        }
        let (new, gone) = state.withLock { state in
            defer { state.notices = current }
            return (current.subtracting(state.notices).sorted(), state.notices.subtracting(current).sorted())
        }
        let shown = 20
        for notice in new.prefix(shown) {
            switch notice.kind {
            case .waiting:
                logger.warning("waiting for \(notice.subject): \(notice.reason)", metadata: ["message_id": "\(MessageID.waiting)"])
            case .rejected:
                logger.warning("rejected \(notice.subject): \(notice.reason)", metadata: ["message_id": "\(MessageID.rejected)"])
            case .strayFile:
                logger.warning("ignoring \(notice.subject): \(notice.reason)", metadata: ["message_id": "\(MessageID.strayFile)"])
            }
        }
        if new.count > shown { logger.warning("… and \(new.count - shown) more held or refused; see 'syncctl status'") }
        for notice in gone where notice.kind == .waiting { logger.info("no longer waiting for \(notice.subject)") }
    }

    /// Hands an event to every subscriber. Subscribers only enqueue (``EventQueue``): publishing never
    /// waits for a client.
    func publish(_ event: DaemonEvent) {
        let isAccountEvent = [.storesWillChange, .switchProgress, .storesDidChange].contains(event.kind)
        let isRefusalEvent = [.refused, .dropped].contains(event.kind)
        let handlers = state.withLock {
            $0.subscribers.values.filter { ($0.accountEvents || !isAccountEvent) && ($0.refusalEvents || !isRefusalEvent) }.map(\.handler)
        }
        for handler in handlers { handler(event) }
    }
}

extension Duration {
    var seconds: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
