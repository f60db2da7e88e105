import Foundation
import LogsyncRelayTransport

/// The control protocol between `syncd` and `syncctl`: one JSON object per line over a Unix stream
/// socket, documented in `docs/control-protocol.md`. Requests carry the protocol version; a daemon
/// answers a version it does not speak with an error instead of guessing.
public enum ControlProtocol {
    public static let version = 1
}

public struct ControlRequest: Codable, Sendable {
    public var version: Int
    public var id: Int
    public var command: Command
    /// For `trigger`: how long to wait for the sync to complete.
    public var timeoutMilliseconds: Int?
    /// For `history`: how many recent transactions.
    public var limit: Int?

    public enum Command: String, Codable, Sendable, CaseIterable {
        case status, trigger, peers, history, watch, reload, check
    }

    public init(id: Int, command: Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil) {
        self.version = ControlProtocol.version
        self.id = id
        self.command = command
        self.timeoutMilliseconds = timeoutMilliseconds
        self.limit = limit
    }

    enum CodingKeys: String, CodingKey {
        case version = "v", id, command, timeoutMilliseconds = "timeout_ms", limit
    }
}

public struct ControlResponse: Codable, Sendable {
    public var version: Int
    public var id: Int
    public var ok: Bool
    public var error: ControlFailure?
    public var status: DaemonStatus?
    public var trigger: TriggerResult?
    public var peers: [PeerStatus]?
    public var history: [HistoryEntry]?
    /// For `watch`: one event per line after the first response.
    public var event: DaemonEvent?
    public var reload: ReloadResult?
    public var check: CheckResult?

    public init(id: Int, ok: Bool = true) {
        self.version = ControlProtocol.version
        self.id = id
        self.ok = ok
    }

    enum CodingKeys: String, CodingKey {
        case version = "v", id, ok, error, status, trigger, peers, history, event, reload, check
    }
}

public struct ControlFailure: Codable, Sendable, Hashable {
    public enum Code: String, Codable, Sendable {
        case unsupportedVersion = "unsupported_version"
        case badRequest = "bad_request"
        case syncFailed = "sync_failed"
        case reloadFailed = "reload_failed"
        case timeout
        case shuttingDown = "shutting_down"
        case internalError = "internal"
        /// The daemon already serves as many clients as it allows; try again shortly.
        case tooManyClients = "too_many_clients"
        /// A `watch` client fell too far behind (or stopped reading) and was disconnected.
        case slowConsumer = "slow_consumer"
        /// `check` found the store damaged; syncing has stopped.
        case damaged
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// What `syncctl status` shows: is it syncing, how far behind each peer is, and what went wrong.
public struct DaemonStatus: Codable, Sendable {
    /// `halted`: the store was found damaged and syncing stopped (`last_error` says why).
    public enum State: String, Codable, Sendable { case starting, idle, syncing, backoff, stopping, halted }

    public var state: State
    public var account: String
    public var node: String
    public var store: String
    public var sharedFolder: String
    public var startedAt: Int64
    public var lastSync: SyncSummary?
    /// Local history not yet exported, and exported segments not yet published.
    public var pendingTransactions: Int
    public var pendingSegments: Int
    public var peers: [PeerStatus]
    public var quarantined: [QuarantineEntry]
    public var rejected: [String]
    /// How many files the last round ignored, and the first of them (at most ``ignoredListLimit``)
    /// with why, the ones worth attention first.
    public var ignoredFiles: Int
    public var ignored: [IgnoredEntry]?
    public var lastError: String?
    /// Milliseconds until the next retry while backing off.
    public var retryInMilliseconds: Int?
    /// The relay this daemon syncs through, its last answer, and the last push it refused.
    public var relay: RelayContact? = nil

    enum CodingKeys: String, CodingKey {
        case state, account, node, store, sharedFolder = "shared_folder", startedAt = "started_at", lastSync = "last_sync"
        case pendingTransactions = "pending_transactions", pendingSegments = "pending_segments", peers, quarantined, rejected
        case ignoredFiles = "ignored_files", ignored, lastError = "last_error", retryInMilliseconds = "retry_in_ms"
        case relay
    }

    /// At most this many ignored files are listed; ``ignoredFiles`` counts them all.
    public static let ignoredListLimit = 50
}

/// A file in the shared folder that was not taken as a segment, and why.
public struct IgnoredEntry: Codable, Sendable, Hashable {
    public var path: String
    public var reason: String
}

/// One completed sync round.
public struct SyncSummary: Codable, Sendable {
    public var round: Int
    public var startedAt: Int64
    public var finishedAt: Int64
    public var ok: Bool
    public var published: Int
    public var appliedSegments: Int
    public var appliedTransactions: Int
    public var error: String?

    enum CodingKeys: String, CodingKey {
        case round, startedAt = "started_at", finishedAt = "finished_at", ok, published
        case appliedSegments = "applied_segments", appliedTransactions = "applied_transactions", error
    }
}

/// How far this node is behind another, in that node's transaction sequence numbers.
public struct PeerStatus: Codable, Sendable, Hashable {
    public var node: String
    /// The last sequence applied here.
    public var appliedSequence: UInt64
    /// The last sequence that node has published in the shared folder.
    public var availableSequence: UInt64
    public var lag: UInt64
    /// The sequence this node waits for when a segment is missing, unreadable, rejected, or held.
    public var waitingFor: UInt64?
    /// Why it waits (missing, not a regular file, rejected, a newer schema, a clock in the future).
    public var waitingReason: String?
    /// When a batch from that node was last applied (milliseconds since 1970).
    public var lastAppliedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case node, appliedSequence = "applied_seq", availableSequence = "available_seq", lag, waitingFor = "waiting_for"
        case waitingReason = "waiting_reason", lastAppliedAt = "last_applied_at"
    }
}

public struct QuarantineEntry: Codable, Sendable, Hashable {
    public var node: String
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var reason: String
    public var location: String

    enum CodingKeys: String, CodingKey {
        case node, firstSequence = "first_seq", lastSequence = "last_seq", reason, location
    }
}

public struct TriggerResult: Codable, Sendable {
    public var summary: SyncSummary
    public var published: [String]
    public var applied: [String]
    /// Per node, the sequence it waits for, and why (``waitingReasons``).
    public var waiting: [String: UInt64]
    public var waitingReasons: [String: String]?
    public var rejected: [String]
    public var quarantined: [String]

    enum CodingKeys: String, CodingKey {
        case summary, published, applied, waiting, waitingReasons = "waiting_reasons", rejected, quarantined
    }
}

/// What `check` found: SQLite's `integrity_check` over the whole store.
public struct CheckResult: Codable, Sendable {
    /// Nothing wrong was found.
    public var intact: Bool
    /// The check ran to the end (false: its time ran out, with nothing wrong up to there).
    public var complete: Bool
    /// What SQLite reported, at most 100 lines.
    public var problems: [String]
    public var elapsedMilliseconds: Int

    public init(intact: Bool, complete: Bool, problems: [String], elapsedMilliseconds: Int) {
        self.intact = intact
        self.complete = complete
        self.problems = problems
        self.elapsedMilliseconds = elapsedMilliseconds
    }

    enum CodingKeys: String, CodingKey { case intact, complete, problems, elapsedMilliseconds = "elapsed_ms" }
}

public struct HistoryEntry: Codable, Sendable {
    public var token: Int64
    /// The transaction's HLC, `physical-ms.logical`: exact, and how transactions order.
    public var timestamp: String
    /// The same instant as UTC wall time for people (`2026-11-21T09:09:22.530Z`); absent from older syncd.
    public var time: String?
    public var author: String?
    public var context: String?
    public var origin: String
    public var changes: Int
}

/// Something `syncctl watch` shows as it happens.
public struct DaemonEvent: Codable, Sendable {
    public enum Kind: String, Codable, Sendable {
        case syncStarted = "sync_started", syncFinished = "sync_finished", syncFailed = "sync_failed"
        case applied, published, quarantined, stopping
    }

    public var kind: Kind
    public var at: Int64
    public var message: String
}
