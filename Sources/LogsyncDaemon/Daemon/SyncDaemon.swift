import Foundation
import Logging
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import LogsyncTransport

/// `syncd`: keeps one store in sync through a shared folder, and answers `syncctl` on its control socket.
public final class SyncDaemon: @unchecked Sendable {
    /// The settings in force; a reload replaces the ones it can apply without a restart.
    public var configuration: DaemonConfiguration { state.withLock { current } }
    private var current: DaemonConfiguration
    let store: Store
    let transport: DirectoryTransport
    let engine: SyncEngine
    private let lock: FileLock
    private var loop: SyncLoop!
    private var server: ControlServer!
    private var watchers: [Task<Void, Never>] = []
    private var arrivalsWatcher: Task<Void, Never>?
    private let logger: Logger
    private let notifier = SystemdNotifier()
    private let startedAt = Int64(WallClock.milliseconds())

    private let state = NSLock()
    private var phase: DaemonStatus.State = .starting
    private var lastSummary: SyncSummary?
    private var lastReport: SyncReport?
    private var lastError: String?
    private var subscribers: [Int: @Sendable (DaemonEvent) -> Void] = [:]
    private var nextSubscriber = 0

    /// Opens everything the daemon needs; throws a ``DaemonError`` that says what to fix.
    public init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.current = configuration
        self.logger = logger
        let storeDirectory = URL(fileURLWithPath: configuration.storePath).deletingLastPathComponent().path
        let socketDirectory = URL(fileURLWithPath: configuration.socketPath).deletingLastPathComponent().path
        do {
            try DurableFiles.makeDirectories(storeDirectory)
            try DurableFiles.makeDirectories(socketDirectory)
            if configuration.ownsSharedFolder { try DurableFiles.makeDirectories(configuration.sharedFolder) }
        } catch {
            throw DaemonError(.setup, "cannot create the daemon's directories: \(error)")
        }
        chmod(socketDirectory, 0o700)

        let lockPath = configuration.storePath + ".syncd.lock"
        guard let lock = try FileLock.acquire(lockPath) else {
            let holder = FileLock.holder(of: lockPath).map { " (pid \($0))" } ?? ""
            throw DaemonError(
                .alreadyRunning,
                "another syncd\(holder) is already running on \(configuration.storePath); stop it first, or give this one another store")
        }
        self.lock = lock

        store = try Self.openStore(configuration)
        transport = try DirectoryTransport(root: configuration.sharedFolder, account: configuration.account, node: NodeID(store.nodeID))
        engine = SyncEngine(
            store: store, transport: transport,
            configuration: configuration.syncConfiguration)
        // Watchdog pings come from the sync loop's own thread, at half systemd's interval: if the loop
        // hangs, they stop and systemd restarts the daemon.
        let notifier = self.notifier
        let watchdog = notifier.watchdogInterval
        loop = SyncLoop(
            engine: engine, maximumBackoffMilliseconds: configuration.maximumBackoffMilliseconds,
            heartbeatInterval: watchdog.map { $0.seconds / 2 } ?? 3_600,
            heartbeat: { if watchdog != nil { notifier.watchdog() } },
            onStart: { [weak self] round in self?.roundStarted(round) },
            onRound: { [weak self] outcome in self?.roundFinished(outcome) })
        do {
            server = try ControlServer(path: configuration.socketPath, daemon: self)
        } catch {
            guard error.errno == EADDRINUSE else {
                throw DaemonError(.setup, "cannot open the control socket \(configuration.socketPath): \(error)")
            }
            throw DaemonError(
                .socketInUse,
                "the control socket \(configuration.socketPath) is in use by another process; stop it or set [control] socket to another path")
        }
    }

    private static func openStore(_ configuration: DaemonConfiguration) throws -> Store {
        let schema: Schema
        if let path = configuration.schemaPath {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw DaemonError(.setup, "cannot read schema file \(path)")
            }
            schema = try Schema(json: data)
        } else if let registered = try Store.registeredSchema(at: configuration.storePath) {
            schema = registered
        } else {
            // Neither the configuration nor the store names one: the notes of the README's tour.
            schema = .notes
        }
        return try Store(path: configuration.storePath, schema: schema)
    }

    public var nodeID: String { store.nodeID }

    /// Starts watching and syncing, then tells systemd it is ready: the store is open and the control
    /// socket bound. Returns at once.
    public func start() {
        loop.start()
        server.start()
        let commits = store.commits()
        watchers.append(Task { [loop] in for await _ in commits { loop?.wake() } })
        watchArrivals(rescanIntervalMilliseconds: configuration.rescanIntervalMilliseconds)
        setPhase(.idle)
        let configuration = self.configuration
        logger.notice(
            "syncd ready: node \(store.nodeID), store \(configuration.storePath), shared folder \(configuration.sharedFolder), account \(configuration.account), socket \(configuration.socketPath), config \(configuration.source)",
            metadata: ["message_id": "\(MessageID.ready)", "node": "\(store.nodeID)"])
        notifier.ready(status: statusLine())
    }

    private func watchArrivals(rescanIntervalMilliseconds: Int) {
        arrivalsWatcher?.cancel()
        let arrivals = transport.arrivals(rescanInterval: .milliseconds(rescanIntervalMilliseconds))
        arrivalsWatcher = Task { [loop] in for await _ in arrivals { loop?.wake() } }
    }

    /// Finishes the round in progress (never half an apply), stops watching, closes the socket,
    /// checkpoints the WAL.
    public func stop() {
        notifier.stopping()
        setPhase(.stopping)
        logger.notice("syncd stopping", metadata: ["message_id": "\(MessageID.stopping)"])
        publish(DaemonEvent(kind: .stopping, at: Int64(WallClock.milliseconds()), message: "syncd is stopping"))
        for watcher in watchers { watcher.cancel() }
        arrivalsWatcher?.cancel()
        loop.stop()
        server.stop()
        try? store.checkpoint()
        logger.info("syncd stopped")
    }

    /// Re-reads the configuration file. Settings that need a restart (store, schema, account, shared
    /// folder, socket) are reported and left as they are; a file with errors changes nothing.
    public func reload() -> ReloadResult {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let old = configuration
        let file = old.source == "embedded defaults" ? nil : old.source
        let new: DaemonConfiguration
        do {
            new = try DaemonConfiguration.load(file: file)
        } catch {
            logger.error("reload failed, still running on the previous configuration: \(error)", metadata: ["message_id": "\(MessageID.reloadFailed)"])
            return ReloadResult(ok: false, message: "reload failed, still running on the previous configuration: \(error)", needsRestart: [])
        }
        var needsRestart: [String] = []
        if new.storePath != old.storePath { needsRestart.append("store.path") }
        if new.schemaPath != old.schemaPath { needsRestart.append("store.schema") }
        if new.account != old.account { needsRestart.append("sync.account") }
        if new.sharedFolder != old.sharedFolder { needsRestart.append("sync.shared_folder") }
        if new.socketPath != old.socketPath { needsRestart.append("control.socket") }
        var applied = old
        applied.rescanIntervalMilliseconds = new.rescanIntervalMilliseconds
        applied.segmentChanges = new.segmentChanges
        applied.batchChanges = new.batchChanges
        applied.batchMilliseconds = new.batchMilliseconds
        applied.maximumBackoffMilliseconds = new.maximumBackoffMilliseconds
        state.withLock { current = applied }
        loop.reconfigure(
            engine: SyncEngine(
                store: store, transport: transport,
                configuration: applied.syncConfiguration),
            maximumBackoffMilliseconds: applied.maximumBackoffMilliseconds)
        if new.rescanIntervalMilliseconds != old.rescanIntervalMilliseconds {
            watchArrivals(rescanIntervalMilliseconds: new.rescanIntervalMilliseconds)
        }
        var message = "reloaded \(file ?? "embedded defaults")"
        if !needsRestart.isEmpty { message += "; restart syncd to apply \(needsRestart.joined(separator: ", "))" }
        logger.notice("\(message)", metadata: ["message_id": "\(MessageID.reloaded)"])
        return ReloadResult(ok: true, message: message, needsRestart: needsRestart)
    }

    /// The one-line STATUS= systemd shows in `systemctl status`.
    private func statusLine() -> String {
        let (phase, summary, error) = state.withLock { (self.phase, lastSummary, lastError) }
        var line = "\(phase.rawValue)"
        if let summary { line += "; round \(summary.round) \(summary.ok ? "ok" : "failed")" }
        if let error, phase == .backoff { line += ": \(error.prefix(120))" }
        return line
    }

    // MARK: - Requests from the control socket

    func trigger(timeout: TimeInterval) -> SyncLoop.Outcome? { loop.trigger(timeout: timeout) }

    func status() throws -> DaemonStatus {
        let (summary, report, error, phase) = state.withLock { (lastSummary, lastReport, lastError, self.phase) }
        let pending = try store.pendingExports()
        var available: [String: UInt64] = [:]
        if let scan = try? transport.scan(excluding: NodeID(store.nodeID)) {
            for name in scan.segments { available[name.node.rawValue] = max(available[name.node.rawValue] ?? 0, name.lastSequence) }
        }
        var peers: [String: PeerStatus] = [:]
        for (node, applied, at) in try store.peerCursors() {
            peers[node.rawValue] = PeerStatus(node: node.rawValue, appliedSequence: applied, availableSequence: applied, lag: 0, waitingFor: nil, lastAppliedAt: at)
        }
        for (node, last) in available {
            var peer = peers[node] ?? PeerStatus(node: node, appliedSequence: 0, availableSequence: 0, lag: 0, waitingFor: nil, lastAppliedAt: nil)
            peer.availableSequence = max(last, peer.appliedSequence)
            peers[node] = peer
        }
        for (node, next) in report?.waiting ?? [:] { peers[node.rawValue]?.waitingFor = next }
        let peerList = peers.values.map { peer -> PeerStatus in
            var peer = peer
            peer.lag = peer.availableSequence - peer.appliedSequence
            return peer
        }.sorted { $0.node < $1.node }
        return DaemonStatus(
            state: phase, account: configuration.account, node: store.nodeID, store: configuration.storePath,
            sharedFolder: configuration.sharedFolder, startedAt: startedAt, lastSync: summary,
            pendingTransactions: pending.transactions, pendingSegments: pending.segments, peers: peerList,
            quarantined: try store.quarantined().map {
                QuarantineEntry(node: $0.node.rawValue, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence, reason: $0.reason, location: $0.location)
            },
            rejected: report?.rejected.map(\.description) ?? [], ignoredFiles: report?.ignored.count ?? 0,
            lastError: error, retryInMilliseconds: phase == .backoff ? loop.retryIn : nil)
    }

    func history(limit: Int) throws -> [HistoryEntry] {
        try store.recentHistory(limit: limit).map {
            HistoryEntry(token: $0.token.rawValue, timestamp: String(describing: $0.timestamp), time: $0.timestamp.wallClockDescription, author: $0.author, context: $0.contextName,
                         origin: $0.origin.description, changes: $0.changes.count)
        }
    }

    func subscribe(_ handler: @escaping @Sendable (DaemonEvent) -> Void) -> Int {
        state.withLock {
            nextSubscriber += 1
            subscribers[nextSubscriber] = handler
            return nextSubscriber
        }
    }

    func unsubscribe(_ id: Int) {
        _ = state.withLock { subscribers.removeValue(forKey: id) }
    }

    // MARK: - Rounds

    private func setPhase(_ phase: DaemonStatus.State) {
        state.withLock { if self.phase != .stopping { self.phase = phase } }
    }

    private func roundStarted(_ round: Int) {
        setPhase(.syncing)
        notifier.status("syncing (round \(round))")
        publish(DaemonEvent(kind: .syncStarted, at: Int64(WallClock.milliseconds()), message: "round \(round) started"))
    }

    private func roundFinished(_ outcome: SyncLoop.Outcome) {
        switch outcome {
        case .completed(let report, let summary):
            state.withLock {
                lastSummary = summary
                lastReport = report
                lastError = nil
            }
            setPhase(.idle)
            for name in report.published { publish(DaemonEvent(kind: .published, at: summary.finishedAt, message: name.description)) }
            for name in report.applied { publish(DaemonEvent(kind: .applied, at: summary.finishedAt, message: name.description)) }
            for name in report.quarantined {
                logger.critical(
                    "QUARANTINED \(name): the same node and sequences with different content; not applied",
                    metadata: ["message_id": "\(MessageID.quarantined)", "segment": "\(name)"])
                publish(DaemonEvent(kind: .quarantined, at: summary.finishedAt, message: name.description))
            }
            if !report.published.isEmpty || !report.applied.isEmpty || !report.quarantined.isEmpty {
                logger.info("round \(summary.round): \(report)", metadata: ["message_id": "\(MessageID.syncCompleted)"])
            }
            notifier.status(statusLine())
            publish(DaemonEvent(kind: .syncFinished, at: summary.finishedAt, message: "round \(summary.round): \(report)"))
        case .failed(let error, let summary):
            state.withLock {
                lastSummary = summary
                lastError = String(describing: error)
            }
            setPhase(.backoff)
            logger.error("round \(summary.round) failed: \(error)", metadata: ["message_id": "\(MessageID.syncFailed)"])
            notifier.status(statusLine())
            publish(DaemonEvent(kind: .syncFailed, at: summary.finishedAt, message: String(describing: error)))
        }
    }

    private func publish(_ event: DaemonEvent) {
        let handlers = state.withLock { Array(subscribers.values) }
        for handler in handlers { handler(event) }
    }
}

public struct ReloadResult: Codable, Sendable {
    public var ok: Bool
    public var message: String
    /// Keys whose new values apply only after a restart.
    public var needsRestart: [String]

    enum CodingKeys: String, CodingKey { case ok, message, needsRestart = "needs_restart" }
}

extension Duration {
    var seconds: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
