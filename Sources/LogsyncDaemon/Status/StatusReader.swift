import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncStore
import LogsyncSync
import LogsyncSyncthing
import LogsyncTransport

/// `syncctl status` and `/metrics`: what the daemon's parts know, read together into one
/// ``DaemonStatus``. Holds nothing of its own.
struct StatusReader: Sendable {
    let settings: SettingsInForce
    let mount: StoreMount
    let loop: SyncLoop
    let board: StatusBoard
    let switcher: AccountSwitcher
    let syncthing: SyncthingNudge?
    let startedAt: Int64

    func status() throws -> DaemonStatus {
        let (phase, summary, report, error, relayReset) = board.snapshot
        let halted = loop.halted
        let mounted = mount.current
        let store = mounted?.store
        let pending = try store?.sync.pendingExports() ?? (transactions: 0, segments: 0)
        var peers: [String: PeerStatus] = [:]
        func peer(_ node: String) -> PeerStatus {
            peers[node] ?? PeerStatus(node: node, appliedSequence: 0, availableSequence: 0, lag: 0, waitingFor: nil, lastAppliedAt: nil)
        }
        for (node, applied, at, version) in try store?.sync.peerCursors() ?? [] {
            var status = PeerStatus(node: node.rawValue, appliedSequence: applied, availableSequence: applied, lag: 0, waitingFor: nil, lastAppliedAt: at)
            status.schemaVersion = version
            peers[node.rawValue] = status
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
        let accounts = switcher.report()
        var relayContact = (mounted?.transport?.carrierTransport as? RelayTransport)?.lastContact
        if let relayReset {
            // What the engine did about it says more than what the transport saw (and a restart sees only the former).
            relayContact?.lastReset = relayReset.message
            relayContact?.lastResetAt = relayReset.at
        }
        var status = DaemonStatus(
            state: halted != nil ? .halted : phase, account: accounts.active ?? "", node: store?.nodeID ?? "", store: accounts.store,
            sharedFolder: settings.current.sharedFolder, startedAt: startedAt, lastSync: summary,
            pendingTransactions: pending.transactions, pendingSegments: pending.segments, peers: peerList,
            quarantined: try (store?.sync.quarantined() ?? []).map {
                QuarantineEntry(node: $0.node.rawValue, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence, reason: $0.reason, location: $0.location)
            },
            rejected: report?.rejected.map(\.description) ?? [], ignoredFiles: ignored.count,
            ignored: ignored.prefix(DaemonStatus.ignoredListLimit).map { IgnoredEntry(path: $0.path, reason: $0.reason.description) },
            lastError: halted ?? error, retryInMilliseconds: phase == .backoff ? loop.retryIn : nil, relay: relayContact, accounts: accounts,
            retention: try mounted?.engine.map { engine in
                // As of the last prune, with what this node keeps now.
                var retention = engine.retentionStatus
                retention.retainedSegments = try engine.store.sync.retainedSegmentCount()
                retention.prunedThrough = try engine.store.sync.prunedSequence()
                return retention
            },
            syncthing: syncthing?.contact)
        status.refused = try store?.sync.refusals().map(ControlHandler.entry)
        if let store {
            let newest = peerList.compactMap(\.schemaVersion).max().flatMap { $0 > store.schema.version ? $0 : nil }
            status.schema = SchemaReport(
                version: store.schema.version, newestPeerVersion: newest, keptTransactions: try store.sync.keptTransactionCount(),
                undeclared: try store.sync.undeclaredKept())
        }
        return status
    }

    /// The text `/metrics` answers with (``MetricsText``): the status `syncctl status --json` gives, and
    /// the counters since start.
    func metricsText() -> String {
        let counters = board.counters
        guard let status = try? status() else { return "# syncd could not read its status; see syncctl status\n" }
        var held: [String: Int] = [:]
        if let report = board.snapshot.report {
            let kinds = [
                ("clock_ahead", report.heldForClockSkew.map(\.node)),
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
}
