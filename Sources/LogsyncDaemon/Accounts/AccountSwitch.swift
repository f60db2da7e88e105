import Dispatch
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

/// The store a daemon syncs, with its account's transport and engine (neither for the local store).
struct Mounted: Sendable {
    let store: Store
    let account: String?
    let transport: (any Transport)?
    /// Replaced by a reload with the same engine under the new settings (``SyncEngine/reconfigured(_:)``).
    var engine: SyncEngine?
}

/// What a running switch has done so far (not persisted: a restart rebuilds from the store's cursors).
struct SwitchRun: Sendable {
    var running = false
    var appliedTransactions = 0
    var appliedSegments = 0
    /// While building: how many transactions the new account's folder holds.
    var availableTransactions: Int?
    /// Why the switch waits or retries.
    var waiting: String?
    /// Failures of the step at hand in a row: the retry backs off.
    var failures = 0
}

/// Stops a rebuild's progress thread and waits (bounded) until it has let go of the store.
final class RebuildWatcher: Sendable {
    private let finished = Atomic<Bool>(false)
    private let wakeup = DispatchSemaphore(value: 0)
    let ended = DispatchSemaphore(value: 0)

    var isFinished: Bool { finished.load(ordering: .acquiring) }

    func sleep(milliseconds: Int) { _ = wakeup.wait(timeout: .now() + .milliseconds(milliseconds)) }

    func finish() {
        finished.store(true, ordering: .releasing)
        wakeup.signal()
        _ = ended.wait(timeout: .now() + 5)
    }
}

/// The account switch: a persisted state machine (``AccountState/Step``) run on a thread of its own,
/// resumed at start-up after a crash at any step (`docs/accounts.md`).
extension SyncDaemon {
    /// How long a switch waits for apps to let go of the old store before it goes on without them (the
    /// old store is then kept, not deleted, until they do).
    static let releaseDeadline = Duration.seconds(5)
    /// How long this process's own connections to a store may take to close.
    static let ownCloseDeadline = Duration.seconds(10)

    /// The transport of an account's logs for a store (node): the one place that chooses it. With
    /// `syncthing`, each publish to the shared folder asks Syncthing to scan the node's folder.
    static func transport(_ configuration: DaemonConfiguration, account: String, node: NodeID, syncthing: SyncthingNudge? = nil) throws -> any Transport {
        guard let connection = configuration.relay else {
            var published: (@Sendable (String) -> Void)?
            if let syncthing { published = { folder in syncthing.request(nodeFolder: folder) } }
            return try DirectoryTransport(root: configuration.sharedFolder, account: account, node: node, published: published)
        }
        let client: RelayClientSettings
        do {
            client = try connection.clientSettings(account: account)
        } catch {
            throw DaemonError(.setup, "cannot use the relay \(connection.url): \(error)")
        }
        return RelayTransport(settings: client, node: node)
    }

    /// Why a round cannot run now, if it cannot.
    func notSyncing() -> String? {
        if let pending = accountState.withLock({ $0.pending }) {
            return "syncd is switching accounts (\(Self.name(pending.from.account)) to \(Self.name(pending.to.account)), step \(pending.step.rawValue)); "
                + "syncing resumes when the switch is done (syncctl account status)"
        }
        if mounted.withLock({ $0?.engine == nil }) {
            return "no account is active (logged out: the local store does not sync); log in with 'syncctl account switch ID'"
        }
        return nil
    }

    static func name(_ account: String?) -> String { account.map { "account \($0)" } ?? "the local store" }

    /// The mounted store, or an error saying why there is none.
    func mountedStore() throws -> Store {
        guard let store else { throw DaemonError(.setup, notSyncing() ?? "no store is open") }
        return store
    }

    func accountReport() -> AccountReport {
        let state = accountState.withLock { $0 }
        let run = switchProgress.withLock { $0 }
        var stores = [AccountStore(account: state.active.account, path: state.active.path, role: "active")]
        if let local = state.local, local.path != state.active.path { stores.append(AccountStore(account: nil, path: local.path, role: "local")) }
        let retained = state.retained.map { AccountStore(account: $0.account, path: $0.path, role: "retained", reason: $0.reason) }
        return AccountReport(
            active: state.active.account, store: state.active.path,
            switching: state.pending.map {
                SwitchProgress(
                    from: $0.from.account, to: $0.to.account, step: $0.step.rawValue, startedAt: $0.startedAt,
                    appliedTransactions: run.appliedTransactions, appliedSegments: run.appliedSegments,
                    availableTransactions: run.availableTransactions, waiting: run.waiting)
            },
            retained: retained, stores: stores + retained)
    }

    /// Starts (or joins) the switch a request asks for and waits up to its `timeout_ms` for it to end;
    /// nil when it ended, else the failure to answer with.
    func requestSwitch(_ request: ControlRequest) -> (ControlFailure.Code, String)? {
        let target: String?
        var logout: AccountState.LogoutData?
        if request.command == .accountSwitch {
            guard let account = request.account else { return (.badRequest, "account_switch needs 'account': the account to switch to") }
            if let problem = AccountName.problem(account) { return (.badRequest, "the account name \(problem): \"\(account.prefix(64))\"") }
            target = account
        } else {
            guard let choice = AccountState.LogoutData(rawValue: request.logout ?? "keep") else {
                return (.badRequest, "'logout' is 'keep' or 'remove', not '\((request.logout ?? "").prefix(32))'")
            }
            target = nil
            logout = choice
        }
        let refused: (ControlFailure.Code, String)? = switchLock.withLock { () -> (ControlFailure.Code, String)? in
            var state = accountState.withLock { $0 }
            if let pending = state.pending {
                guard pending.to.account == target else {
                    return (.badRequest, "a switch from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) is in progress (step \(pending.step.rawValue)); wait for it to end (syncctl account status), then ask again")
                }
                return nil
            }
            if state.active.account == target { return nil }
            state.pending = AccountState.Switch(
                from: state.active, to: AccountState.Store(account: target, path: accounts.storePath(for: target, generation: state.generation)),
                step: .willChange, logout: logout, startedAt: Int64(WallClock.milliseconds()))
            state.generation += 1
            do {
                try DurableFiles.makeDirectories(accounts.folder)
                try DurableFiles.replace(accounts.schemaFile, with: Array(schema.json.utf8))
                try save(state)
            } catch {
                return (.internalError, "cannot start the switch: \(error)")
            }
            logger.notice(
                "account switch from \(Self.name(state.active.account)) to \(Self.name(target)) requested",
                metadata: ["message_id": "\(MessageID.accountSwitch)"])
            return nil
        }
        if let refused { return refused }
        runSwitchIfPending()
        let timeout = min(max(Double(request.timeoutMilliseconds ?? 600_000) / 1000, 0), 3_600)
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while let pending = accountState.withLock({ $0.pending }), pending.to.account == target {
            guard ContinuousClock.now < deadline else {
                return (.timeout, "the switch to \(Self.name(target)) goes on (step \(pending.step.rawValue)); follow it with 'syncctl account status'")
            }
            usleep(5_000)
        }
        let active = accountState.withLock { $0.active.account }
        return active == target ? nil : (.internalError, "the switch ended on \(Self.name(active)), not \(Self.name(target))")
    }

    /// Persists the state, then makes it the one in memory. Callers hold ``switchLock``.
    func save(_ state: AccountState) throws {
        try accounts.save(state)
        accountState.withLock { $0 = state }
    }

    /// At start: resumes a switch a crash interrupted, and starts shipping retained stores.
    func startAccountWork() {
        runSwitchIfPending()
        let thread = Thread { [self] in shipRetainedStores() }
        thread.name = "syncd.retained"
        thread.start()
    }

    /// Starts the switch thread unless it runs already.
    func runSwitchIfPending() {
        let start = switchProgress.withLock { run in
            guard !run.running else { return false }
            run = SwitchRun(running: true)
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            while true {
                let pending: AccountState.Switch? = switchLock.withLock {
                    let pending = accountState.withLock { $0.pending }
                    if pending == nil { switchProgress.withLock { $0.running = false } }
                    return pending
                }
                guard let pending, !switchCancellation.isCancelled else {
                    if pending != nil { switchProgress.withLock { $0.running = false } }
                    return
                }
                perform(pending)
            }
        }
        thread.name = "syncd.account-switch"
        thread.start()
    }

    /// Runs one step of the switch; on failure says why in status and the journal and retries after a
    /// pause (the step is redone in full: every step is idempotent).
    private func perform(_ pending: AccountState.Switch) {
        logger.info(
            "account switch \(Self.name(pending.from.account)) → \(Self.name(pending.to.account)): \(pending.step.rawValue)",
            metadata: ["message_id": "\(MessageID.accountSwitch)"])
        notifier.status("switching accounts: \(Self.name(pending.from.account)) → \(Self.name(pending.to.account)), \(pending.step.rawValue)")
        do {
            switch pending.step {
            case .willChange: try letGo(pending)
            case .exporting: try exportOld(pending)
            case .retiring: try retireOld(pending)
            case .building: try build(pending)
            case .swapping: try swap(pending)
            case .didChange: try announce(pending)
            }
            switchProgress.withLock { run in
                run.waiting = nil
                run.failures = 0
            }
        } catch {
            // Backs off like the sync loop: 0.5 s, doubling, at most [sync] max_backoff_ms.
            let failures = switchProgress.withLock { run in
                run.failures += 1
                return run.failures
            }
            let delay = min(Double(configuration.maximumBackoffMilliseconds) / 1000, 0.5 * pow(2, Double(min(failures - 1, 16))))
            metricsCounters.withLock { $0.errors[.switchStepFailed, default: 0] += 1 }
            let reason = "step \(pending.step.rawValue) failed: \(error); retrying in \(delay) s"
            switchProgress.withLock { $0.waiting = reason }
            logger.error("account switch: \(reason)", metadata: ["message_id": "\(MessageID.accountSwitch)"])
            // Woken early by a stop (which signals this semaphore); passes the signal on to its owner.
            if retainedWakeup.wait(timeout: .now() + delay) == .success { retainedWakeup.signal() }
        }
    }

    /// Moves the persisted switch to `step`.
    private func advance(_ pending: AccountState.Switch, to step: AccountState.Step, change: (inout AccountState) -> Void = { _ in }) throws {
        try switchLock.withLock {
            var state = accountState.withLock { $0 }
            guard state.pending == pending else { return }
            state.pending?.step = step
            change(&state)
            try save(state)
        }
    }

    private func event(_ kind: DaemonEvent.Kind, _ message: String) {
        publish(DaemonEvent(kind: kind, at: Int64(WallClock.milliseconds()), message: message))
    }

    // MARK: - Steps

    /// Stores will change: tell apps (the state file says so, and `watch` clients get the event), let go
    /// of the daemon's own store, and wait for others to let go of it.
    private func letGo(_ pending: AccountState.Switch) throws {
        event(.storesWillChange, "from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) (\(pending.from.path))")
        if mounted.withLock({ $0 != nil }) {
            stopWatchers()
            guard loop.detach(within: 30) else { throw DaemonError(.setup, "the sync round in progress did not end within 30 s") }
            mounted.withLock { $0 = nil }
        }
        try waitUntilClosedHere(pending.from.path)
        let deadline = ContinuousClock.now + Self.releaseDeadline
        while let pid = SQLiteFileHolders.holder(of: pending.from.path) {
            guard ContinuousClock.now < deadline else {
                logger.warning(
                    "process \(pid) still holds \(pending.from.path) open after \(Self.releaseDeadline); the switch goes on, and that store is kept (not deleted) until it is let go",
                    metadata: ["message_id": "\(MessageID.storeRetained)"])
                break
            }
            switchProgress.withLock { $0.waiting = "waiting for process \(pid) to let go of \(pending.from.path)" }
            usleep(10_000)
        }
        FaultInjection.point("switch.will-change")
        try advance(pending, to: .exporting)
    }

    /// Waits until no connection of this process is left on a store (they close when the last reference
    /// to a `Store` goes, and a watcher may take a moment to end).
    private func waitUntilClosedHere(_ path: String) throws {
        let deadline = ContinuousClock.now + Self.ownCloseDeadline
        while SQLiteFileHolders.heldByThisProcess(path) {
            guard ContinuousClock.now < deadline else {
                throw DaemonError(.setup, "syncd's own connections to \(path) did not close within \(Self.ownCloseDeadline)")
            }
            usleep(2_000)
        }
    }

    /// Exports and publishes every pending local transaction of the old account; for a logout that keeps
    /// the data, copies the old store as the new local store.
    /// A store syncing had stopped on (found damaged) is neither shipped nor copied: it is kept as it is.
    private func exportOld(_ pending: AccountState.Switch) throws {
        let damage = loop.halted
        if let damage, DurableFiles.exists(pending.from.path) {
            logger.warning(
                "the store \(pending.from.path) of \(Self.name(pending.from.account)) was found damaged, so its pending changes are not shipped and it is kept as it is: \(damage)",
                metadata: ["message_id": "\(MessageID.storeRetained)"])
        } else if DurableFiles.exists(pending.from.path) {
            let store = try Self.openStore(at: pending.from.path, schema: schema, options: .retiring)
            // Closed to writes first (docs/accounts.md, "Nothing lost"): whatever any process committed
            // before is exported below; nothing can be committed after.
            try store.closeToWrites(note: "from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account))")
            if let account = pending.from.account {
                do {
                    _ = try ship(store, account: account)
                } catch {
                    logger.warning(
                        "could not ship the pending changes of account \(account) before the switch: \(error); its store is kept and shipped when the shared folder takes them",
                        metadata: ["message_id": "\(MessageID.storeRetained)"])
                }
            }
            if pending.to.account == nil, pending.logout == .keep { try store.copy(to: pending.buildPath) }
        }
        try waitUntilClosedHere(pending.from.path)
        FaultInjection.point("switch.exporting")
        try advance(pending, to: .retiring) { state in
            guard let damage, DurableFiles.exists(pending.from.path), !state.retained.contains(where: { $0.path == pending.from.path }) else { return }
            state.retained.append(AccountState.Retained(
                account: pending.from.account, path: pending.from.path,
                reason: "damaged, so never shipped nor deleted: check it (sqlite3 .recover), then delete it or restore it from a backup", damaged: damage))
        }
    }

    /// Exports and publishes what an account's store has not shipped; returns what is still pending.
    func ship(_ store: Store, account: String) throws -> (transactions: Int, segments: Int) {
        let transport = try Self.transport(configuration, account: account, node: NodeID(store.nodeID), syncthing: syncthing)
        let engine = SyncEngine(store: store, transport: transport, configuration: configuration.syncConfiguration.for(account))
        var report = SyncReport()
        try engine.export(into: &report)
        if !report.published.isEmpty {
            logger.info("published \(report.published.count) segment(s) of account \(account) from \(store.path)")
        }
        return try store.pendingExports()
    }

    /// Deletes the old account's store if everything was shipped and nobody holds it; else keeps it.
    private func retireOld(_ pending: AccountState.Switch) throws {
        var outcomes: [AccountState.Retained] = []
        if pending.from.account != nil {
            if let kept = try retire(AccountState.Retained(account: pending.from.account, path: pending.from.path, reason: "")) { outcomes.append(kept) }
        }
        // A logout replaces the local store: the previous one goes (it has nothing to ship).
        let previousLocal = accountState.withLock { $0.local }
        if pending.to.account == nil, let local = previousLocal, local.path != pending.from.path {
            if let kept = try retire(AccountState.Retained(account: nil, path: local.path, reason: "")) { outcomes.append(kept) }
        }
        FaultInjection.point("switch.retiring")
        try advance(pending, to: .building) { state in
            for kept in outcomes where !state.retained.contains(where: { $0.path == kept.path }) { state.retained.append(kept) }
        }
    }

    /// Deletes a store that has nothing left to ship and that no process holds; else returns it with
    /// why it is kept. The store is closed to writes before it is looked at, so what the look finds
    /// shipped is all it will ever hold: no write can land between the look and the deletion.
    func retire(_ candidate: AccountState.Retained) throws -> AccountState.Retained? {
        guard DurableFiles.exists(candidate.path) else { return nil }
        if let kept = accountState.withLock({ $0.retained.first { $0.path == candidate.path && $0.damaged != nil } }) { return kept }
        var unshipped: String?
        do {
            let store = try Self.openStore(at: candidate.path, schema: schema, options: .retiring)
            try store.closeToWrites(note: "\(Self.name(candidate.account)) retired")
            let pending = try store.pendingExports()
            if pending.transactions > 0 || pending.segments > 0 {
                unshipped = "\(pending.transactions) transaction(s) and \(pending.segments) segment(s) not yet shipped"
            }
        }
        // Tests widen the time between the look above and the deletion below, where a store still open to
        // writes would take whatever another process commits meanwhile with it.
        FaultInjection.delay("switch.retire-slowly", milliseconds: 500)
        try waitUntilClosedHere(candidate.path)
        var kept = candidate
        if let unshipped, candidate.account != nil {
            kept.reason = unshipped
        } else if let pid = SQLiteFileHolders.holder(of: candidate.path) {
            kept.reason = "held open by process \(pid)"
        } else {
            for file in AccountStores.files(of: candidate.path) { try DurableFiles.remove(file) }
            try DurableFiles.syncFolder(of: candidate.path)
            logger.notice("deleted the retired store \(candidate.path): everything in it was shipped", metadata: ["message_id": "\(MessageID.storeRetained)"])
            return nil
        }
        if kept.reason != candidate.reason {
            logger.warning("keeping the retired store \(candidate.path): \(kept.reason)", metadata: ["message_id": "\(MessageID.storeRetained)"])
        }
        return kept
    }

    /// Builds the new store under its `.building` path: from the new account's logs, streamed and
    /// applied in batches (each with its cursors, so a crash resumes where it stopped), or the local
    /// store (a copy made while exporting, or empty).
    private func build(_ pending: AccountState.Switch) throws {
        if !DurableFiles.exists(pending.to.path) || DurableFiles.exists(pending.buildPath) {
            let store = try Self.openStore(at: pending.buildPath, schema: schema, options: .rebuilding)
            if let account = pending.to.account {
                let transport = try Self.transport(configuration, account: account, node: NodeID(store.nodeID), syncthing: syncthing)
                let engine = SyncEngine(store: store, transport: transport, configuration: configuration.syncConfiguration.for(account))
                let total = Self.availableTransactions(account: account, configuration: configuration, excluding: NodeID(store.nodeID))
                switchProgress.withLock { $0.availableTransactions = total }
                let watcher = watchRebuild(of: store, account: account)
                defer { watcher.finish() }
                let before = switchProgress.withLock { $0.appliedSegments }
                try engine.rebuild(cancellation: switchCancellation) { totals in
                    switchProgress.withLock { $0.appliedSegments = before + totals.segments }
                    FaultInjection.point("switch.building-round")
                }
                if switchCancellation.isCancelled { return }
            } else {
                // A logout's copy of the account's store was taken after that store was closed to writes;
                // the local store goes on taking the app's writes.
                try store.reopenToWrites()
            }
            try store.finishBuilding()
        }
        try waitUntilClosedHere(pending.buildPath)
        FaultInjection.point("switch.building")
        try advance(pending, to: .swapping)
    }

    /// How many transactions the account's folder holds (the sum of every node's last sequence), for
    /// the rebuild's progress; nil when the folder cannot be listed.
    static func availableTransactions(account: String, configuration: DaemonConfiguration, excluding node: NodeID) -> Int? {
        guard let transport = try? Self.transport(configuration, account: account, node: node),
            let scan = try? transport.scan(excluding: node)
        else { return nil }
        return Dictionary(grouping: scan.segments, by: \.node).values.reduce(0) { $0 + Int($1.map(\.lastSequence).max() ?? 0) }
    }

    /// Follows a rebuild from its cursors (the transactions applied per origin, which also count what a
    /// build before a crash applied): in `status` every half second, on the journal and to `watch`
    /// clients every 2 s while it advances.
    private func watchRebuild(of store: Store, account: String) -> RebuildWatcher {
        let watcher = RebuildWatcher()
        Thread.detachNewThread { [self] in
            var reported = -1
            var lastReport = ContinuousClock.now - .seconds(10)
            while true {
                let finished = watcher.isFinished
                if let cursors = try? store.appliedSequences() {
                    let applied = cursors.values.reduce(0) { $0 + Int($1) }
                    let total = switchProgress.withLock { run in
                        run.appliedTransactions = applied
                        return run.availableTransactions
                    }
                    if applied != reported, finished || ContinuousClock.now - lastReport >= .seconds(2) {
                        let of = total.map { " of \($0)" } ?? ""
                        logger.info(
                            "rebuilding the store of account \(account): \(applied)\(of) transactions applied",
                            metadata: ["message_id": "\(MessageID.accountSwitch)"])
                        event(.switchProgress, "building \(Self.name(account)): \(applied)\(of) transactions applied")
                        reported = applied
                        lastReport = ContinuousClock.now
                    }
                }
                if finished { break }
                watcher.sleep(milliseconds: 500)
            }
            watcher.ended.signal()
        }
        return watcher
    }

    /// Renames the built store to its final path (a path never used before, so nobody holds it) and
    /// makes it the active store.
    private func swap(_ pending: AccountState.Switch) throws {
        if DurableFiles.exists(pending.buildPath) {
            if let pid = SQLiteFileHolders.holder(of: pending.buildPath) {
                throw DaemonError(.setup, "process \(pid) holds the store being built (\(pending.buildPath)); it must let go before it is swapped in")
            }
            var walSize = stat()
            if lstat(pending.buildPath + "-wal", &walSize) == 0, walSize.st_size > 0 {
                throw DaemonError(.setup, "the store being built still has a write-ahead log (\(pending.buildPath)-wal); it is checkpointed first")
            }
            for file in AccountStores.files(of: pending.buildPath).dropFirst() { try DurableFiles.remove(file) }
            try DurableFiles.rename(pending.buildPath, to: pending.to.path)
        }
        guard DurableFiles.exists(pending.to.path) else {
            throw DaemonError(.setup, "neither the built store \(pending.buildPath) nor its final path \(pending.to.path) exists; the step before is redone")
        }
        FaultInjection.point("switch.swapping")
        try advance(pending, to: .didChange) { state in
            state.active = pending.to
            if pending.to.account == nil { state.local = pending.to }
        }
    }

    /// Stores did change: syncing resumes on the new store, apps are told.
    private func announce(_ pending: AccountState.Switch) throws {
        if mounted.withLock({ $0 == nil }) {
            var mount = try Self.mount(pending.to, schema: schema, configuration: configuration, syncthing: syncthing)
            FaultInjection.gate("switch.mounting", milliseconds: 3_000)
            reloading.withLock { _ in
                // Settings a reload changed since the mount was made apply to it; a later reload finds it
                // mounted and changes both it and the loop's.
                mount.engine = mount.engine.map { $0.reconfigured(to: configuration) }
                // A token rotated since the mount read it: the reload that asked for it found no store mounted.
                if let transport = mount.transport as? RelayTransport, let connection = configuration.relay, let account = mount.account,
                    let token = try? connection.token(for: account)
                {
                    transport.use(token: token)
                }
                mounted.withLock { $0 = mount }
                startWatchersHoldingReload()
                if let engine = mount.engine { loop.attach(engine) }
            }
        }
        FaultInjection.point("switch.did-change")
        try switchLock.withLock {
            var state = accountState.withLock { $0 }
            guard state.pending == pending else { return }
            state.pending = nil
            try save(state)
        }
        metricsCounters.withLock { $0.accountSwitches += 1 }
        event(.storesDidChange, "from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) (\(pending.to.path))")
        logger.notice(
            "account switch from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) done: the store is \(pending.to.path)",
            metadata: ["message_id": "\(MessageID.accountSwitch)"])
        setPhase(.idle)
        notifier.status(statusLine())
        retainedWakeup.signal()
    }

    // MARK: - Retained stores

    /// Ships what retained stores still hold and deletes them once shipped and let go of: after each
    /// switch, and at least every rescan interval, until the daemon stops.
    private func shipRetainedStores() {
        while !switchCancellation.isCancelled {
            _ = retainedWakeup.wait(timeout: .now() + .milliseconds(min(configuration.rescanIntervalMilliseconds, 5_000)))
            guard !switchCancellation.isCancelled else { return }
            let (retained, switching) = accountState.withLock { ($0.retained, $0.pending != nil) }
            guard !retained.isEmpty, !switching else { continue }
            for candidate in retained {
                var outcome: AccountState.Retained?
                do {
                    if let account = candidate.account, candidate.damaged == nil, DurableFiles.exists(candidate.path) {
                        do {
                            _ = try ship(try Self.openStore(at: candidate.path, schema: schema, options: .retiring), account: account)
                        } catch {
                            logger.debug("retained store \(candidate.path) not shipped yet: \(error)")
                        }
                    }
                    outcome = try retire(candidate)
                } catch {
                    logger.warning("retained store \(candidate.path): \(error)")
                    continue
                }
                try? switchLock.withLock {
                    var state = accountState.withLock { $0 }
                    guard let index = state.retained.firstIndex(where: { $0.path == candidate.path }) else { return }
                    if let outcome { state.retained[index] = outcome } else { state.retained.remove(at: index) }
                    if state != accountState.withLock({ $0 }) { try save(state) }
                }
            }
        }
    }
}
