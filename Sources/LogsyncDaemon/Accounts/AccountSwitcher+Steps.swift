import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import Synchronization

/// The steps of a switch, in order (`docs/accounts.md`, "The switch"). Each is persisted before it runs
/// and is idempotent: a crash anywhere resumes at that step and ends as an uninterrupted switch would.
extension AccountSwitcher {
    /// Moves the persisted switch to `step`, with `change` made in the same write.
    private func advance(_ pending: AccountState.Switch, to step: AccountState.Step, change: (inout AccountState) -> Void = { _ in }) throws {
        try update(ifStill: pending) { state in
            state.pending?.step = step
            change(&state)
        }
    }

    /// Stores will change: tell apps (the state file says so, and `watch` clients get the event), let go
    /// of the daemon's own store, and wait for others to let go of it.
    func letGo(_ pending: AccountState.Switch) throws {
        event(.storesWillChange, "from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) (\(pending.from.path))")
        if mount.current != nil, !mount.letGo(within: .seconds(30)) {
            throw DaemonError(.setup, "the sync round in progress did not end within 30 s")
        }
        try waitUntilClosedHere(pending.from.path)
        let released = Poll.until(timeout: Self.releaseDeadline, every: .milliseconds(10)) {
            guard let pid = SQLiteFileHolders.holder(of: pending.from.path) else { return true }
            updateRun { $0.waiting = "waiting for process \(pid) to let go of \(pending.from.path)" }
            return false
        }
        if !released, let pid = SQLiteFileHolders.holder(of: pending.from.path) {
            logger.warning(
                "process \(pid) still holds \(pending.from.path) open after \(Self.releaseDeadline); the switch goes on, and that store is kept (not deleted) until it is let go",
                metadata: ["message_id": "\(MessageID.storeRetained)"])
        }
        FaultInjection.point("switch.will-change")
        try advance(pending, to: .exporting)
    }

    /// Waits until no connection of this process is left on a store (they close when the last reference
    /// to a `Store` goes, and a watcher may take a moment to end).
    func waitUntilClosedHere(_ path: String) throws {
        guard Poll.until(timeout: Self.ownCloseDeadline, every: .milliseconds(2), { !SQLiteFileHolders.heldByThisProcess(path) }) else {
            throw DaemonError(.setup, "syncd's own connections to \(path) did not close within \(Self.ownCloseDeadline)")
        }
    }

    /// Closes the old store to writes, exports and publishes every pending local transaction of the old
    /// account; for a logout that keeps the data, copies the old store as the new local store.
    /// A store syncing had stopped on (found damaged) is neither closed, shipped nor copied: it is kept.
    func exportOld(_ pending: AccountState.Switch) throws {
        let damage = loop.halted
        if let damage, AccountStores.holdsStore(pending.from.path) {
            logger.warning(
                "the store \(pending.from.path) of \(Self.name(pending.from.account)) was found damaged, so its pending changes are not shipped and it is kept as it is: \(damage)",
                metadata: ["message_id": "\(MessageID.storeRetained)"])
        } else if AccountStores.holdsStore(pending.from.path) {
            let store = try StoreMount.openStore(at: pending.from.path, schema: schema, options: .retiring)
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
            guard let damage, AccountStores.holdsStore(pending.from.path), !state.retained.contains(where: { $0.path == pending.from.path }) else { return }
            state.retained.append(AccountState.Retained(
                account: pending.from.account, path: pending.from.path,
                reason: "damaged, so never shipped nor deleted: check it (sqlite3 .recover), then delete it or restore it from a backup", damaged: damage))
        }
    }

    /// Deletes the old account's store if everything was shipped and nobody holds it; else keeps it.
    func retireOld(_ pending: AccountState.Switch) throws {
        var outcomes: [AccountState.Retained] = []
        if pending.from.account != nil {
            if let kept = try retire(AccountState.Retained(account: pending.from.account, path: pending.from.path, reason: "")) { outcomes.append(kept) }
        }
        // A logout replaces the local store: the previous one goes (it has nothing to ship).
        if pending.to.account == nil, let local = accountState.local, local.path != pending.from.path {
            if let kept = try retire(AccountState.Retained(account: nil, path: local.path, reason: "")) { outcomes.append(kept) }
        }
        FaultInjection.point("switch.retiring")
        try advance(pending, to: .building) { state in
            for kept in outcomes where !state.retained.contains(where: { $0.path == kept.path }) { state.retained.append(kept) }
        }
    }

    /// Builds the new store under its `.building` path: from the new account's logs, streamed and
    /// applied in batches (each with its cursors, so a crash resumes where it stopped), or the local
    /// store (a copy made while exporting, or empty).
    func build(_ pending: AccountState.Switch) throws {
        if !DurableFiles.exists(pending.to.path) || DurableFiles.exists(pending.buildPath) {
            let store = try StoreMount.openStore(at: pending.buildPath, schema: schema, options: .rebuilding)
            if let account = pending.to.account {
                let configuration = settings.current
                let transport = try carriers.transport(configuration, account, NodeID(store.nodeID))
                let engine = SyncEngine(store: store, transport: transport, configuration: configuration.syncConfiguration.for(account))
                updateRun { $0.availableTransactions = availableTransactions(account: account, excluding: NodeID(store.nodeID)) }
                let watcher = watchRebuild(of: store, account: account)
                defer { watcher.finish() }
                let before = run.appliedSegments
                try engine.rebuild(cancellation: cancellation) { totals in
                    updateRun { $0.appliedSegments = before + totals.segments }
                    FaultInjection.point("switch.building-round")
                }
                if cancellation.isCancelled { return }
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
    private func availableTransactions(account: String, excluding node: NodeID) -> Int? {
        guard let transport = try? carriers.transport(settings.current, account, node), let scan = try? transport.scan(excluding: node) else { return nil }
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
                if let cursors = try? store.sync.appliedSequences() {
                    let applied = cursors.values.reduce(0) { $0 + Int($1) }
                    var total: Int?
                    updateRun { run in
                        run.appliedTransactions = applied
                        total = run.availableTransactions
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
                watcher.wakeup.wait(timeout: .milliseconds(500))
            }
            watcher.end()
        }
        return watcher
    }

    /// Renames the built store to its final path (a path never used before, so nobody holds it) and
    /// makes it the active store.
    func swap(_ pending: AccountState.Switch) throws {
        if DurableFiles.exists(pending.buildPath) {
            if let pid = SQLiteFileHolders.holder(of: pending.buildPath) {
                throw DaemonError(.setup, "process \(pid) holds the store being built (\(pending.buildPath)); it must let go before it is swapped in")
            }
            if (DurableFiles.size(of: pending.buildPath + "-wal") ?? 0) > 0 {
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
    func announce(_ pending: AccountState.Switch) throws {
        if mount.current == nil {
            let mounted = try StoreMount.mount(pending.to, schema: schema, configuration: settings.current, carriers: carriers)
            if let restored = mounted.restored { logger.notice("\(restored)", metadata: ["message_id": "\(MessageID.storeRestored)"]) }
            FaultInjection.gate("switch.mounting", milliseconds: 3_000)
            mount.install(mounted)
        }
        FaultInjection.point("switch.did-change")
        try removeLeftover(pending.from.path)
        try update(ifStill: pending) { $0.pending = nil }
        board.count { $0.accountSwitches += 1 }
        event(.storesDidChange, "from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) (\(pending.to.path))")
        logger.notice(
            "account switch from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) done: the store is \(pending.to.path)",
            metadata: ["message_id": "\(MessageID.accountSwitch)"])
        board.setPhase(.idle)
        board.tellSystemd()
        retainedWakeup.signal()
    }
}

/// Stops a rebuild's progress thread and waits (bounded) until it has let go of the store.
final class RebuildWatcher: Sendable {
    private let finished = Atomic<Bool>(false)
    private let ended = Atomic<Bool>(false)
    let wakeup = Wakeup()
    private let endedWakeup = Wakeup()

    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Called by the progress thread as it ends.
    func end() {
        ended.store(true, ordering: .releasing)
        endedWakeup.signal()
    }

    func finish() {
        finished.store(true, ordering: .releasing)
        wakeup.signal()
        _ = endedWakeup.wait(timeout: .seconds(5)) { ended.load(ordering: .acquiring) }
    }
}
