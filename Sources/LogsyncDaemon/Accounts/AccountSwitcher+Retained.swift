import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd

/// Retired stores: shipped, and deleted once closed to writes, shipped and let go of; kept with why until
/// then (`docs/accounts.md`, "Retained stores").
extension AccountSwitcher {
    /// Exports and publishes what an account's store has not shipped; returns what is still pending.
    func ship(_ store: Store, account: String) throws -> (transactions: Int, segments: Int) {
        let configuration = settings.current
        let transport = try carriers.transport(configuration, account, NodeID(store.nodeID))
        let engine = SyncEngine(store: store, transport: transport, configuration: configuration.syncConfiguration.for(account))
        var report = SyncReport()
        try engine.export(into: &report)
        if !report.published.isEmpty {
            logger.info("published \(report.published.count) segment(s) of account \(account) from \(store.path)")
        }
        return try store.sync.pendingExports()
    }

    /// Deletes a store that has nothing left to ship and that no process holds; else returns it with
    /// why it is kept. The store is closed to writes before it is looked at, so what the look finds
    /// shipped is all it will ever hold: no write can land between the look and the deletion.
    func retire(_ candidate: AccountState.Retained) throws -> AccountState.Retained? {
        guard AccountStores.holdsStore(candidate.path) else {
            try removeLeftover(candidate.path)
            return nil
        }
        if let kept = accountState.retained.first(where: { $0.path == candidate.path && $0.damaged != nil }) { return kept }
        var unshipped: String?
        do {
            let store = try StoreMount.openStore(at: candidate.path, schema: schema, options: .retiring)
            try store.closeToWrites(note: "\(Self.name(candidate.account)) retired")
            let pending = try store.sync.pendingExports()
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

    /// Removes the empty file a script's open of a retired path leaves there (it holds nothing to ship),
    /// unless a process still holds it.
    func removeLeftover(_ path: String) throws {
        guard DurableFiles.exists(path), !AccountStores.holdsStore(path), SQLiteFileHolders.holder(of: path) == nil else { return }
        for file in AccountStores.files(of: path) { try DurableFiles.remove(file) }
    }

    /// Ships what retained stores still hold and deletes them once shipped and let go of: after each
    /// switch, and at least every rescan interval (at most 5 s), until the daemon stops.
    func shipRetainedStores() {
        while !cancellation.isCancelled {
            retainedWakeup.wait(timeout: .milliseconds(min(settings.current.rescanIntervalMilliseconds, 5_000)))
            guard !cancellation.isCancelled else { return }
            let state = accountState
            guard !state.retained.isEmpty, state.pending == nil else { continue }
            for candidate in state.retained {
                var outcome: AccountState.Retained?
                do {
                    if let account = candidate.account, candidate.damaged == nil, AccountStores.holdsStore(candidate.path) {
                        do {
                            _ = try ship(try StoreMount.openStore(at: candidate.path, schema: schema, options: .retiring), account: account)
                        } catch {
                            logger.debug("retained store \(candidate.path) not shipped yet: \(error)")
                        }
                    }
                    outcome = try retire(candidate)
                } catch {
                    logger.warning("retained store \(candidate.path): \(error)")
                    continue
                }
                try? update { state in
                    guard let index = state.retained.firstIndex(where: { $0.path == candidate.path }) else { return }
                    if let outcome { state.retained[index] = outcome } else { state.retained.remove(at: index) }
                }
            }
        }
    }
}
