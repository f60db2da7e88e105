import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncSync

/// What syncd counts between starts for its metrics: the counters Prometheus's `_total` metrics
/// report. Everything else the metrics say is read from ``DaemonStatus`` at scrape time, so `syncctl
/// status --json` and `/metrics` cannot disagree.
struct MetricsCounters: Sendable {
    var roundsOK = 0
    var roundsFailed = 0
    /// Seconds spent in rounds, and how many: a summary without quantiles.
    var roundSeconds = 0.0
    var publishedSegments = 0
    var publishedBytes = 0
    var appliedSegments = 0
    var appliedTransactions = 0
    var appliedBytes = 0
    /// Errors by kind (``ErrorKind``).
    var errors: [ErrorKind: Int] = [:]
    var accountSwitches = 0

    /// The kinds of `logsync_errors_total`: a bounded set, so that it stays one series each.
    enum ErrorKind: String, Sendable, CaseIterable {
        /// A round failed as a whole (the store or the transport unusable).
        case roundFailed = "round_failed"
        /// A segment failed verification in a round (torn, corrupt, another account's, refused).
        case segmentRejected = "segment_rejected"
        /// A segment was quarantined (the same node and sequences with other content).
        case segmentQuarantined = "segment_quarantined"
        /// A step of an account switch failed and is retried.
        case switchStepFailed = "switch_step_failed"
    }

    mutating func count(_ report: SyncReport, seconds: Double) {
        roundsOK += 1
        roundSeconds += seconds
        publishedSegments += report.published.count
        publishedBytes += report.publishedBytes
        appliedSegments += report.applied.count
        appliedTransactions += report.appliedTransactions
        appliedBytes += report.appliedBytes
        errors[.segmentRejected, default: 0] += report.rejected.count
        errors[.segmentQuarantined, default: 0] += report.quarantined.count
    }

    mutating func countFailure(seconds: Double) {
        roundsFailed += 1
        roundSeconds += seconds
        errors[.roundFailed, default: 0] += 1
    }
}

/// Prometheus's text exposition format (version 0.0.4) of a daemon's status and counters: metric names
/// under `logsync_`, base units (seconds, bytes), `_total` for counters, and labels only from bounded
/// sets (a peer's node id, a reason's kind, a state) so that every series stays one.
enum MetricsText {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func render(status: DaemonStatus, counters: MetricsCounters, held: [String: Int], version: String) -> String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: Double)]) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples {
                let labels = sample.labels.isEmpty ? "" : "{" + sample.labels.map { "\($0.0)=\"\(escaped($0.1))\"" }.joined(separator: ",") + "}"
                text += "\(name)\(labels) \(number(sample.value))\n"
            }
        }
        func one(_ name: String, _ type: String, _ help: String, _ value: Double) { family(name, type, help, [([], value)]) }

        family("logsync_info", "gauge", "The node, account and version of this syncd (always 1).",
               [([("node", status.node), ("account", status.account), ("version", version)], 1)])
        family("logsync_state", "gauge", "What syncd is doing: 1 for the current state, 0 for the others.",
               DaemonStatus.State.allCases.map { ([("state", $0.rawValue)], $0 == status.state ? 1 : 0) })
        one("logsync_start_time_seconds", "gauge", "When this syncd started, in seconds since 1970.", Double(status.startedAt) / 1000)
        family("logsync_sync_rounds_total", "counter", "Sync rounds since start, by outcome.",
               [([("outcome", "ok")], Double(counters.roundsOK)), ([("outcome", "failed")], Double(counters.roundsFailed))])
        text += "# HELP logsync_sync_round_duration_seconds How long sync rounds took.\n# TYPE logsync_sync_round_duration_seconds summary\n"
        text += "logsync_sync_round_duration_seconds_sum \(number(counters.roundSeconds))\n"
        text += "logsync_sync_round_duration_seconds_count \(counters.roundsOK + counters.roundsFailed)\n"
        if let last = status.lastSync {
            one("logsync_last_sync_timestamp_seconds", "gauge", "When the last sync round ended, in seconds since 1970.", Double(last.finishedAt) / 1000)
            one("logsync_last_sync_success", "gauge", "Whether the last sync round succeeded (1) or failed (0).", last.ok ? 1 : 0)
        }
        one("logsync_published_segments_total", "counter", "This node's segments published since start.", Double(counters.publishedSegments))
        one("logsync_published_bytes_total", "counter", "Bytes of this node's segments published since start.", Double(counters.publishedBytes))
        one("logsync_applied_segments_total", "counter", "Other nodes' segments applied since start.", Double(counters.appliedSegments))
        one("logsync_applied_transactions_total", "counter", "Other nodes' transactions applied since start.", Double(counters.appliedTransactions))
        one("logsync_applied_bytes_total", "counter", "Bytes of other nodes' segments applied since start.", Double(counters.appliedBytes))
        one("logsync_pending_transactions", "gauge", "Local transactions not yet exported.", Double(status.pendingTransactions))
        one("logsync_pending_segments", "gauge", "This node's segments not yet published.", Double(status.pendingSegments))
        family("logsync_peer_applied_sequence", "gauge", "The last sequence of each peer applied here.",
               status.peers.map { ([("peer", $0.node)], Double($0.appliedSequence)) })
        family("logsync_peer_available_sequence", "gauge", "The last sequence of each peer that could be applied (no gap, not refused).",
               status.peers.map { ([("peer", $0.node)], Double($0.availableSequence)) })
        family("logsync_peer_lag_transactions", "gauge", "Transactions of each peer that could be applied and are not yet.",
               status.peers.map { ([("peer", $0.node)], Double($0.lag)) })
        family("logsync_held_segments", "gauge", "Peers whose next segment is held, by why: missing, rejected, clock_ahead.",
               held.sorted { $0.key < $1.key }.map { ([("reason", $0.key)], Double($0.value)) })
        family("logsync_quarantined_segments", "gauge", "Segments in quarantine, by reason.",
               Dictionary(grouping: status.quarantined, by: { reasonKind($0.reason) }).sorted { $0.key < $1.key }.map { ([("reason", $0.key)], Double($0.value.count)) })
        family("logsync_refused_segments", "gauge", "Segments refused (they fail verification or do not fit this node's schema), each holding its node's stream, by reason.",
               Dictionary(grouping: status.refused ?? [], by: { reasonKind($0.reason) }).sorted { $0.key < $1.key }.map { ([("reason", $0.key)], Double($0.value.count)) })
        if let schema = status.schema {
            one("logsync_schema_version", "gauge", "The schema version this node's store is registered with.", Double(schema.version))
            one("logsync_newest_peer_schema_version", "gauge", "The newest schema version a peer writes with (this node's own when none is newer).",
                Double(schema.newestPeerVersion ?? schema.version))
            one("logsync_kept_transactions", "gauge", "Other nodes' transactions kept in part until this node's app registers their newer schema.",
                Double(schema.keptTransactions))
        }
        one("logsync_ignored_files", "gauge", "Files in the shared folder that are not segments (temporary files, conflict copies, links, FIFOs).", Double(status.ignoredFiles))
        family("logsync_errors_total", "counter", "Errors since start, by kind.",
               MetricsCounters.ErrorKind.allCases.map { ([("kind", $0.rawValue)], Double(counters.errors[$0] ?? 0)) })
        one("logsync_account_switches_total", "counter", "Account switches completed since start.", Double(counters.accountSwitches))
        one("logsync_account_switching", "gauge", "Whether an account switch is in progress.", status.accounts?.switching == nil ? 0 : 1)
        one("logsync_retained_stores", "gauge", "Retired stores kept until they are shipped and let go of.", Double(status.accounts?.retained.count ?? 0))
        if let retention = status.retention {
            one("logsync_retention_kept_segments", "gauge", "This node's segments kept in the shared folder or relay.", Double(retention.retainedSegments))
            one("logsync_retention_pruned_through_sequence", "gauge", "This node's segments are pruned up to this sequence.", Double(retention.prunedThrough))
        }
        return text
    }

    /// A reason's kind: the words before its first colon (reasons say the kind first, then the details),
    /// at most 60 characters, so that a label value does not grow with file names or sizes.
    static func reasonKind(_ reason: String) -> String {
        String((reason.split(separator: ":", maxSplits: 1).first ?? "").prefix(60)).trimmingCharacters(in: .whitespaces)
    }

    static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
