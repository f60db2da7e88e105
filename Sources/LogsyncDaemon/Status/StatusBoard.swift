import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncSync
import LogsyncSystemd
import Synchronization

/// What the daemon says about itself: the phase it is in, the last round and what it found, the
/// counters of `/metrics`; and what it tells the journal, systemd and `watch` clients as rounds end. It
/// holds its state behind one lock and calls nothing while holding it.
final class StatusBoard: Sendable {
    private struct State {
        var phase: DaemonStatus.State = .starting
        var lastSummary: SyncSummary?
        var lastReport: SyncReport?
        var lastError: String?
        /// What the journal has been told waits or was refused, so that each is logged once.
        var notices: Set<Notice> = []
        /// The last time a carrier (a relay) was found to have lost history, and what was done.
        var relayReset: (message: String, at: Int64)?
        /// Peers and the newer schema versions they write with, each announced once.
        var announcedSchemas: Set<String> = []
        var counters = MetricsCounters()
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

    private let state = Mutex(State())
    private let logger: Logger
    private let notifier: SystemdNotifier
    private let events: EventHub
    /// Why the loop halted (a damaged store), asked at the moment a line is written.
    private let halted: @Sendable () -> String?

    init(logger: Logger, notifier: SystemdNotifier, events: EventHub, halted: @escaping @Sendable () -> String?) {
        self.logger = logger
        self.notifier = notifier
        self.events = events
        self.halted = halted
    }

    /// The phase, the last round (its summary and report) and the last error, as one consistent look.
    var snapshot: (phase: DaemonStatus.State, summary: SyncSummary?, report: SyncReport?, error: String?, relayReset: (message: String, at: Int64)?) {
        state.withLock { ($0.phase, $0.lastSummary, $0.lastReport, $0.lastError, $0.relayReset) }
    }

    var counters: MetricsCounters { state.withLock { $0.counters } }

    func count(_ update: (inout MetricsCounters) -> Void) { state.withLock { update(&$0.counters) } }

    /// Moves to `phase`, unless the daemon is stopping.
    func setPhase(_ phase: DaemonStatus.State) {
        state.withLock { if $0.phase != .stopping { $0.phase = phase } }
    }

    /// The one-line STATUS= systemd shows in `systemctl status`.
    func statusLine() -> String {
        let (phase, summary, error) = state.withLock { ($0.phase, $0.lastSummary, $0.lastError) }
        if let halted = halted() { return "halted: \(halted.prefix(120))" }
        var line = "\(phase.rawValue)"
        if let summary { line += "; round \(summary.round) \(summary.ok ? "ok" : "failed")" }
        if let error, phase == .backoff { line += ": \(error.prefix(120))" }
        return line
    }

    /// Tells systemd the status line.
    func tellSystemd() { notifier.status(statusLine()) }

    // MARK: - Rounds

    func roundStarted(_ round: Int) {
        setPhase(.syncing)
        notifier.status("syncing (round \(round))")
        events.publish(.syncStarted, "round \(round) started")
    }

    func roundFinished(_ outcome: SyncLoop.Outcome) {
        switch outcome {
        case .completed(let report, let summary):
            state.withLock { state in
                state.counters.count(report, seconds: Double(summary.finishedAt - summary.startedAt) / 1000)
                state.lastSummary = summary
                state.lastReport = report
                state.lastError = nil
                if let reset = report.carrierReset { state.relayReset = (reset, summary.finishedAt) }
            }
            setPhase(.idle)
            for name in report.published { events.publish(DaemonEvent(kind: .published, at: summary.finishedAt, message: name.description)) }
            for name in report.applied { events.publish(DaemonEvent(kind: .applied, at: summary.finishedAt, message: name.description)) }
            for refused in report.refused { events.publish(DaemonEvent(kind: .refused, at: summary.finishedAt, message: refused.description)) }
            for (node, version) in report.newerSchemas.sorted(by: { $0.key < $1.key })
            where state.withLock({ $0.announcedSchemas.insert("\(node)/\(version)").inserted }) {
                let message = "node \(node) writes with schema version \(version), newer than this app's: an update of the app is available; "
                    + "what this app declares of its changes is applied, the rest kept until then"
                logger.notice("\(message)", metadata: ["message_id": "\(MessageID.newerSchema)", "peer": "\(node)"])
                events.publish(DaemonEvent(kind: .newerSchema, at: summary.finishedAt, message: message))
            }
            for name in report.quarantined {
                logger.critical(
                    "QUARANTINED \(name): the same node and sequences with different content; not applied",
                    metadata: ["message_id": "\(MessageID.quarantined)", "segment": "\(name)"])
                events.publish(DaemonEvent(kind: .quarantined, at: summary.finishedAt, message: name.description))
            }
            if !report.interrupted { tellJournal(about: report) }
            if let reset = report.carrierReset {
                logger.notice("the relay lost history: \(reset)", metadata: ["message_id": "\(MessageID.relayReset)"])
            }
            // A baseline load is logged even when the round moved nothing else (a new node for which the
            // baseline held everything there was).
            if !report.published.isEmpty || !report.applied.isEmpty || !report.quarantined.isEmpty || report.loadedBaseline != nil {
                logger.info("round \(summary.round): \(report)", metadata: ["message_id": "\(MessageID.syncCompleted)"])
            } else {
                logger.debug("round \(summary.round): nothing to move (\(summary.finishedAt - summary.startedAt) ms)")
            }
            tellSystemd()
            events.publish(DaemonEvent(kind: .syncFinished, at: summary.finishedAt, message: "round \(summary.round): \(report)"))
        case .failed(let error, let summary):
            state.withLock { state in
                state.counters.countFailure(seconds: Double(summary.finishedAt - summary.startedAt) / 1000)
                state.lastSummary = summary
                state.lastError = error
            }
            setPhase(.backoff)
            logger.error("round \(summary.round) failed: \(error)", metadata: ["message_id": "\(MessageID.syncFailed)"])
            if let halted = halted() {
                logger.critical("\(halted)", metadata: ["message_id": "\(MessageID.damaged)"])
            }
            tellSystemd()
            events.publish(DaemonEvent(kind: .syncFailed, at: summary.finishedAt, message: error))
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
}
