import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncSystemd

/// Answers control requests (all but `watch`, which ``ControlServer`` streams from the ``EventHub``),
/// each from the part of the daemon that knows. Holds nothing of its own.
struct ControlHandler: Sendable {
    let mount: StoreMount
    let loop: SyncLoop
    let board: StatusBoard
    let events: EventHub
    let switcher: AccountSwitcher
    let reloader: Reloader
    let reader: StatusReader
    let logger: Logger

    /// Whether the daemon is stopping (a trigger that did not complete says so).
    let stopping: @Sendable () -> Bool

    func handle(_ request: ControlRequest) -> ControlResponse {
        var response = ControlResponse(id: request.id)
        func fail(_ code: ControlFailure.Code, _ message: String) {
            response.ok = false
            response.error = ControlFailure(code, message)
        }
        do {
            switch request.command {
            case .status:
                response.status = try reader.status()
            case .peers:
                response.peers = try reader.status().peers
            case .history:
                response.history = try history(limit: max(1, min(request.limit ?? 20, 10_000)))
            case .trigger:
                let timeout = Self.timeout(request.timeoutMilliseconds, default: .seconds(30))
                if let reason = switcher.notSyncing() {
                    fail(.syncFailed, reason)
                    break
                }
                switch loop.trigger(timeout: timeout) {
                case nil:
                    if stopping() {
                        fail(.shuttingDown, "syncd is stopping; the round did not complete")
                    } else {
                        fail(.timeout, "the sync did not complete within \(timeout)")
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
                let result = reloader.reload()
                response.reload = result
                if !result.ok { fail(.reloadFailed, result.message) }
            case .check:
                let result = try check(timeLimit: Self.timeout(request.timeoutMilliseconds, default: .seconds(600)))
                response.check = result
                if !result.intact {
                    fail(.damaged, "the store is damaged; syncing has stopped: \(result.problems.prefix(3).joined(separator: "; "))")
                } else if !result.complete {
                    fail(.timeout, "the check did not finish in time (nothing wrong up to there)")
                }
            case .devices:
                response.devices = devices()
            case .devicesApprove, .devicesRevoke:
                guard let device = request.device, !device.isEmpty else {
                    fail(.badRequest, "name the device: its fingerprint to approve, its node id or fingerprint to revoke")
                    break
                }
                guard let sealed = mount.current?.transport as? SealedTransport else {
                    fail(.badRequest, "account \(mount.current?.account ?? "(none)") is not sealed: it has no devices to approve or revoke")
                    break
                }
                do {
                    let message = request.command == .devicesApprove ? try sealed.approve(fingerprint: device) : try sealed.revoke(device)
                    logger.notice("\(message)", metadata: ["message_id": "\(MessageID.devices)"])
                    var report = devices()
                    report.message = message
                    response.devices = report
                } catch {
                    fail(error.code == .notFound ? .notFound : .badRequest, error.message)
                }
            case .prune, .prunePlan:
                guard let engine = mount.engine else {
                    fail(.syncFailed, switcher.notSyncing() ?? "no store is mounted")
                    break
                }
                guard engine.configuration.retention.enabled else {
                    fail(.badRequest, "retention is off ([retention] enabled = false): nothing is pruned")
                    break
                }
                response.retention = try engine.prune(dryRun: request.command == .prunePlan)
            case .quarantineList, .quarantineRelease, .quarantineDrop:
                guard let engine = mount.engine else {
                    fail(.syncFailed, switcher.notSyncing() ?? "no store is mounted")
                    break
                }
                if let (code, message) = try quarantine(request, engine: engine, into: &response) { fail(code, message) }
            case .watch:
                fail(.badRequest, "watch is a stream: send it on a connection of its own")
            case .accountStatus, .accountList:
                response.accounts = switcher.report()
            case .accountSwitch, .accountLogout:
                let outcome = switcher.request(request)
                response.accounts = switcher.report()
                if let (code, message) = outcome { fail(code, message) }
            }
        } catch {
            fail(.internalError, String(describing: error))
        }
        return response
    }

    /// A request's `timeout_ms`, within an hour.
    private static func timeout(_ milliseconds: Int?, default duration: Duration) -> Duration {
        milliseconds.map { .milliseconds(min(max($0, 0), 3_600_000)) } ?? duration
    }

    func history(limit: Int) throws -> [HistoryEntry] {
        try switcher.mountedStore().sync.recentHistory(limit: limit).map {
            HistoryEntry(
                token: $0.token.rawValue, timestamp: String(describing: $0.timestamp), time: $0.timestamp.wallClockDescription, author: $0.author,
                context: $0.contextName, origin: $0.origin.description, changes: $0.changes.count)
        }
    }

    /// SQLite's full `integrity_check` of the store, on a connection of its own (the sync loop goes on
    /// meanwhile). Damage halts syncing.
    func check(timeLimit: Duration) throws -> CheckResult {
        let report = try switcher.mountedStore().checkIntegrity(full: true, timeLimit: timeLimit)
        let milliseconds = Int(report.elapsed.components.seconds * 1000 + report.elapsed.components.attoseconds / 1_000_000_000_000_000)
        if !report.isIntact {
            let reason = "syncctl check found the store damaged: \(report.problems.prefix(3).joined(separator: "; ")); syncing stopped so that the damage cannot spread. "
                + "Restore the store from a backup, or move it aside and restart syncd to rebuild it from the shared folder"
            logger.critical("\(reason)", metadata: ["message_id": "\(MessageID.damaged)"])
            loop.halt(reason)
            board.tellSystemd()
        }
        return CheckResult(intact: report.isIntact, complete: report.complete, problems: report.problems, elapsedMilliseconds: milliseconds)
    }
}

extension ControlHandler {
    /// The mounted account's devices: its keys when sealed (`docs/security.md`), or that it is not.
    func devices() -> DeviceReport {
        let mounted = mount.current
        let account = mounted?.account ?? ""
        guard let sealed = mounted?.transport as? SealedTransport else { return DeviceReport(account: account, sealed: false) }
        let (own, others) = sealed.devices()
        let roster = sealed.roster()
        func device(_ node: String, _ key: [UInt8], _ through: UInt64 = 0) -> DeviceReport.Device {
            DeviceReport.Device(node: node, fingerprint: NodeSigningKey.fingerprint(of: key), verifiedThrough: through)
        }
        return DeviceReport(
            account: account, sealed: true, accountKey: sealed.keyring?.fingerprint,
            this: DeviceReport.Device(node: mounted?.store.nodeID ?? "", fingerprint: own, verifiedThrough: 0),
            others: others.map { DeviceReport.Device(node: $0.node.rawValue, fingerprint: $0.fingerprint, verifiedThrough: $0.verifiedThrough) },
            epoch: roster.epoch, rosterVersion: roster.version, members: roster.members.map { device($0.node, $0.signingKey) },
            waiting: roster.waiting.map { device($0.node, $0.signingKey) }, revoked: roster.revoked.map { device($0.node, $0.signingKey, $0.through) },
            awaitingApproval: roster.awaitingApproval, revokedHere: roster.leftOut)
    }
}
