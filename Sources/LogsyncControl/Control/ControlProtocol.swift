import Foundation
import LogsyncCore
@_exported import LogsyncStatus

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
    /// For `account_switch`: the account to switch to.
    public var account: String?
    /// For `account_logout`: `keep` (the local store becomes a copy of the account's data) or `remove`.
    public var logout: String?
    /// For `watch`: also send the account events (`stores_will_change`, `switch_progress`,
    /// `stores_did_change`). Clients that do not ask never get event kinds they may not know.
    public var accountEvents: Bool?
    /// For `quarantine_release` and `quarantine_drop`: the segment, as `NODE/FIRST-LAST`.
    public var segment: String?
    /// For `watch`: also send the refusal events (`refused`, `dropped`); clients that do not ask never
    /// get event kinds they may not know.
    public var refusalEvents: Bool?
    /// For `watch`: also send the schema events (`newer_schema`).
    public var schemaEvents: Bool?
    /// For `devices_approve`: the waiting device's fingerprint; for `devices_revoke`: a member's node id or
    /// fingerprint.
    public var device: String?

    public enum Command: String, Codable, Sendable, CaseIterable {
        case status, trigger, peers, history, watch, reload, check
        /// `prune` deletes what retention allows now; `prune_plan` only says what would go and why.
        case prune, prunePlan = "prune_plan"
        case accountStatus = "account_status", accountList = "account_list", accountSwitch = "account_switch", accountLogout = "account_logout"
        /// Refused and divergent segments (`quarantine_list`); forget a refusal so the segment is tried
        /// again (`quarantine_release`); give up on a refused segment (`quarantine_drop`).
        case quarantineList = "quarantine_list", quarantineRelease = "quarantine_release", quarantineDrop = "quarantine_drop"
        /// A sealed account's devices: this node's signing key and the keys other nodes sign with
        /// (`docs/security.md`).
        case devices
        /// Approve a waiting device (`device`: its fingerprint): the account's keys are wrapped to it;
        /// revoke a member (`device`: its node id or fingerprint): a new key epoch it is not given.
        case devicesApprove = "devices_approve", devicesRevoke = "devices_revoke"
    }

    public init(
        id: Int, command: Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil, account: String? = nil, logout: String? = nil,
        accountEvents: Bool? = nil, segment: String? = nil, refusalEvents: Bool? = nil, schemaEvents: Bool? = nil, device: String? = nil
    ) {
        self.version = ControlProtocol.version
        self.id = id
        self.command = command
        self.timeoutMilliseconds = timeoutMilliseconds
        self.limit = limit
        self.account = account
        self.logout = logout
        self.accountEvents = accountEvents
        self.segment = segment
        self.refusalEvents = refusalEvents
        self.schemaEvents = schemaEvents
        self.device = device
    }

    enum CodingKeys: String, CodingKey {
        case version = "v", id, command, timeoutMilliseconds = "timeout_ms", limit, account, logout, accountEvents = "account_events", segment
        case refusalEvents = "refusal_events", schemaEvents = "schema_events", device
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
    /// For the `account_*` commands: the active account, the switch in progress, the stores kept.
    public var accounts: AccountReport?
    /// For `prune` and `prune_plan`: what went (or would go), what holds the rest back, and why.
    public var retention: RetentionStatus?
    /// For the `quarantine_*` commands: what is refused, divergent and dropped after the command.
    public var quarantine: QuarantineReport?
    /// For `devices`: whether the account is sealed, and its devices' keys.
    public var devices: DeviceReport?

    public init(id: Int, ok: Bool = true) {
        self.version = ControlProtocol.version
        self.id = id
        self.ok = ok
    }

    enum CodingKeys: String, CodingKey {
        case version = "v", id, ok, error, status, trigger, peers, history, event, reload, check, accounts, retention, quarantine, devices
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
        /// `quarantine_release` or `quarantine_drop` named a segment that is not there to release or drop.
        case notFound = "not_found"
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
    public enum State: String, Codable, Sendable, CaseIterable { case starting, idle, syncing, backoff, stopping, halted }

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
    /// The account state: which store is active, a switch in progress and its step, stores kept after a
    /// switch (absent from syncd before accounts). `account` is "" while the local store is active.
    public var accounts: AccountReport?
    /// Retained segments, the newest baseline, nodes holding pruning back (absent before retention).
    public var retention: RetentionStatus? = nil
    /// With `[syncthing]`: the scans asked of Syncthing after publishes, and its last answer and failure.
    package var syncthing: SyncthingContact? = nil
    /// Segments this node refused, each holding its own node's stream until released or dropped
    /// (`syncctl quarantine`); absent from syncd before refusals were recorded.
    public var refused: [RefusedEntry]? = nil
    /// This node's schema, and what it keeps of other nodes' newer one (absent from syncd before
    /// mixed-version fleets).
    public var schema: SchemaReport? = nil

    public init(
        state: State, account: String, node: String, store: String, sharedFolder: String, startedAt: Int64, lastSync: SyncSummary? = nil, pendingTransactions: Int, pendingSegments: Int, peers: [PeerStatus], quarantined: [QuarantineEntry], rejected: [String], ignoredFiles: Int, ignored: [IgnoredEntry]? = nil, lastError: String? = nil, retryInMilliseconds: Int? = nil,
        relay: RelayContact? = nil, accounts: AccountReport? = nil, retention: RetentionStatus? = nil
    ) {
        self.init(
            state: state, account: account, node: node, store: store, sharedFolder: sharedFolder, startedAt: startedAt, lastSync: lastSync,
            pendingTransactions: pendingTransactions, pendingSegments: pendingSegments, peers: peers, quarantined: quarantined, rejected: rejected,
            ignoredFiles: ignoredFiles, ignored: ignored, lastError: lastError, retryInMilliseconds: retryInMilliseconds, relay: relay,
            accounts: accounts, retention: retention, syncthing: nil)
    }

    package init(
        state: State, account: String, node: String, store: String, sharedFolder: String, startedAt: Int64, lastSync: SyncSummary? = nil, pendingTransactions: Int, pendingSegments: Int, peers: [PeerStatus], quarantined: [QuarantineEntry], rejected: [String], ignoredFiles: Int, ignored: [IgnoredEntry]? = nil, lastError: String? = nil, retryInMilliseconds: Int? = nil,
        relay: RelayContact? = nil, accounts: AccountReport? = nil, retention: RetentionStatus? = nil, syncthing: SyncthingContact?
    ) {
        self.state = state
        self.account = account
        self.node = node
        self.store = store
        self.sharedFolder = sharedFolder
        self.startedAt = startedAt
        self.lastSync = lastSync
        self.pendingTransactions = pendingTransactions
        self.pendingSegments = pendingSegments
        self.peers = peers
        self.quarantined = quarantined
        self.rejected = rejected
        self.ignoredFiles = ignoredFiles
        self.ignored = ignored
        self.lastError = lastError
        self.retryInMilliseconds = retryInMilliseconds
        self.relay = relay
        self.accounts = accounts
        self.retention = retention
        self.syncthing = syncthing
    }

    enum CodingKeys: String, CodingKey {
        case state, account, node, store, sharedFolder = "shared_folder", startedAt = "started_at", lastSync = "last_sync"
        case pendingTransactions = "pending_transactions", pendingSegments = "pending_segments", peers, quarantined, rejected
        case ignoredFiles = "ignored_files", ignored, lastError = "last_error", retryInMilliseconds = "retry_in_ms"
        case relay, accounts, retention, syncthing, refused, schema
    }

    /// At most this many ignored files are listed; ``ignoredFiles`` counts them all.
    public static let ignoredListLimit = 50
}

/// The schema this node runs, and the parts of other nodes' changes written under a newer one that it
/// keeps until its app registers that schema (`docs/schema-evolution.md`).
public struct SchemaReport: Codable, Sendable, Hashable {
    /// The version this node's store is registered with.
    public var version: Int
    /// The newest version a peer's applied segment was written under, when newer than ``version``: an
    /// update of the app is available.
    public var newestPeerVersion: Int?
    /// Transactions of other nodes kept in part, for a schema this node does not run yet.
    public var keptTransactions: Int
    /// Kept parts that a version this node has reached still does not declare: its app's definition of
    /// that version differs from the writer's.
    public var undeclared: [String]

    public init(version: Int, newestPeerVersion: Int? = nil, keptTransactions: Int, undeclared: [String] = []) {
        self.version = version
        self.newestPeerVersion = newestPeerVersion
        self.keptTransactions = keptTransactions
        self.undeclared = undeclared
    }

    enum CodingKeys: String, CodingKey {
        case version, newestPeerVersion = "newest_peer_version", keptTransactions = "kept_transactions", undeclared
    }
}

/// A file in the shared folder that was not taken as a segment, and why.
public struct IgnoredEntry: Codable, Sendable, Hashable {
    public var path: String
    public var reason: String

    public init(
        path: String, reason: String
    ) {
        self.path = path
        self.reason = reason
    }
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

    public init(
        round: Int, startedAt: Int64, finishedAt: Int64, ok: Bool, published: Int, appliedSegments: Int, appliedTransactions: Int, error: String? = nil
    ) {
        self.round = round
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.ok = ok
        self.published = published
        self.appliedSegments = appliedSegments
        self.appliedTransactions = appliedTransactions
        self.error = error
    }

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
    /// The schema version of the last segment applied from that node: the app version it writes with
    /// (absent before any was applied, and from syncd before mixed-version fleets).
    public var schemaVersion: Int? = nil

    public init(
        node: String, appliedSequence: UInt64, availableSequence: UInt64, lag: UInt64, waitingFor: UInt64? = nil, waitingReason: String? = nil, lastAppliedAt: Int64? = nil
    ) {
        self.node = node
        self.appliedSequence = appliedSequence
        self.availableSequence = availableSequence
        self.lag = lag
        self.waitingFor = waitingFor
        self.waitingReason = waitingReason
        self.lastAppliedAt = lastAppliedAt
    }

    enum CodingKeys: String, CodingKey {
        case node, appliedSequence = "applied_seq", availableSequence = "available_seq", lag, waitingFor = "waiting_for"
        case waitingReason = "waiting_reason", lastAppliedAt = "last_applied_at", schemaVersion = "schema_version"
    }
}

public struct QuarantineEntry: Codable, Sendable, Hashable {
    public var node: String
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var reason: String
    public var location: String

    public init(
        node: String, firstSequence: UInt64, lastSequence: UInt64, reason: String, location: String
    ) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.reason = reason
        self.location = location
    }

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

    public init(
        summary: SyncSummary, published: [String], applied: [String], waiting: [String: UInt64], waitingReasons: [String: String]? = nil, rejected: [String], quarantined: [String]
    ) {
        self.summary = summary
        self.published = published
        self.applied = applied
        self.waiting = waiting
        self.waitingReasons = waitingReasons
        self.rejected = rejected
        self.quarantined = quarantined
    }

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

    public init(
        token: Int64, timestamp: String, time: String? = nil, author: String? = nil, context: String? = nil, origin: String, changes: Int
    ) {
        self.token = token
        self.timestamp = timestamp
        self.time = time
        self.author = author
        self.context = context
        self.origin = origin
        self.changes = changes
    }
}

/// Something `syncctl watch` shows as it happens.
public struct DaemonEvent: Codable, Sendable {
    public enum Kind: String, Codable, Sendable {
        case syncStarted = "sync_started", syncFinished = "sync_finished", syncFailed = "sync_failed"
        case applied, published, quarantined, stopping
        /// Refusal events, sent only to `watch` clients that ask for them (`refusal_events`): a segment was
        /// refused (it fails verification or does not fit this node's schema), or the operator dropped one.
        case refused, dropped
        /// Account events, sent only to `watch` clients that ask for them (`account_events`).
        case storesWillChange = "stores_will_change", switchProgress = "switch_progress", storesDidChange = "stores_did_change"
        /// Schema events, sent only to `watch` clients that ask for them (`schema_events`): a peer writes
        /// with a newer schema than this node's app (an update is available); once per peer and version.
        case newerSchema = "newer_schema"

        /// The request field a client sets to receive this kind, or nil for kinds every client gets.
        public var optIn: OptIn? {
            switch self {
            case .refused, .dropped: return .refusal
            case .storesWillChange, .switchProgress, .storesDidChange: return .account
            case .newerSchema: return .schema
            default: return nil
            }
        }
    }

    /// Groups of event kinds that older clients do not know, sent only to clients that ask for them.
    public enum OptIn: Sendable, Hashable {
        case account, refusal, schema
    }

    public var kind: Kind
    public var at: Int64
    public var message: String

    public init(
        kind: Kind, at: Int64, message: String
    ) {
        self.kind = kind
        self.at = at
        self.message = message
    }
}

/// What a reload did: whether the new configuration applies, and which keys wait for a restart.
public struct ReloadResult: Codable, Sendable {
    public var ok: Bool
    public var message: String
    /// Keys whose new values apply only after a restart.
    public var needsRestart: [String]

    public init(
        ok: Bool, message: String, needsRestart: [String]
    ) {
        self.ok = ok
        self.message = message
        self.needsRestart = needsRestart
    }

    enum CodingKeys: String, CodingKey { case ok, message, needsRestart = "needs_restart" }
}

/// Accounts on this node: the active store, a switch in progress, and the stores kept after a switch.
public struct AccountReport: Codable, Sendable, Equatable {
    /// The active account; nil while the local store is active (logged out).
    public var active: String?
    /// The path of the active store: the file apps open.
    public var store: String
    public var switching: SwitchProgress?
    /// Stores kept after a switch because their local changes are not all shipped, or a process holds
    /// them; each with its `reason`.
    public var retained: [AccountStore]
    /// Every store on this node: the active one, the local store, the retained ones.
    public var stores: [AccountStore]

    public init(active: String?, store: String, switching: SwitchProgress?, retained: [AccountStore], stores: [AccountStore]) {
        self.active = active
        self.store = store
        self.switching = switching
        self.retained = retained
        self.stores = stores
    }
}

/// A switch in progress: from which account to which, the step it is at, and how far a rebuild is.
public struct SwitchProgress: Codable, Sendable, Equatable {
    /// nil: the local store.
    public var from: String?
    public var to: String?
    /// `will_change`, `exporting`, `retiring`, `building`, `swapping`, `did_change` (docs/accounts.md).
    public var step: String
    public var startedAt: Int64
    /// While building: transactions and segments applied to the new store so far.
    public var appliedTransactions: Int
    public var appliedSegments: Int
    /// While building: how many transactions the new account's logs hold (what "done" is).
    public var availableTransactions: Int?
    /// Why the switch waits or retries, when it does.
    public var waiting: String?

    public init(
        from: String?, to: String?, step: String, startedAt: Int64, appliedTransactions: Int, appliedSegments: Int, availableTransactions: Int? = nil,
        waiting: String? = nil
    ) {
        self.from = from
        self.to = to
        self.step = step
        self.startedAt = startedAt
        self.appliedTransactions = appliedTransactions
        self.appliedSegments = appliedSegments
        self.availableTransactions = availableTransactions
        self.waiting = waiting
    }

    enum CodingKeys: String, CodingKey {
        case from, to, step, startedAt = "started_at", appliedTransactions = "applied_transactions", appliedSegments = "applied_segments"
        case availableTransactions = "available_transactions", waiting
    }
}

public struct AccountStore: Codable, Sendable, Equatable {
    /// nil: the local store.
    public var account: String?
    public var path: String
    /// `active`, `local` or `retained`.
    public var role: String
    /// For a retained store: why it is kept.
    public var reason: String?

    public init(account: String?, path: String, role: String, reason: String? = nil) {
        self.account = account
        self.path = path
        self.role = role
        self.reason = reason
    }
}

/// A segment this node refused: it holds its own node's stream until it is released (tried again) or
/// dropped (`syncctl quarantine`).
public struct RefusedEntry: Codable, Sendable, Hashable {
    public var node: String
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    /// `NODE/FIRST-LAST`, as `syncctl quarantine release|drop` takes it.
    public var segment: String
    public var reason: String
    public var location: String
    /// When it was refused (milliseconds since 1970).
    public var at: Int64

    public init(node: String, firstSequence: UInt64, lastSequence: UInt64, segment: String, reason: String, location: String, at: Int64) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.segment = segment
        self.reason = reason
        self.location = location
        self.at = at
    }

    enum CodingKeys: String, CodingKey {
        case node, firstSequence = "first_seq", lastSequence = "last_seq", segment, reason, location, at
    }
}

/// A refused segment the operator dropped: its transactions are never applied on this node.
public struct DroppedEntry: Codable, Sendable, Hashable {
    public var node: String
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var segment: String
    /// Why it had been refused.
    public var reason: String
    public var at: Int64

    public init(node: String, firstSequence: UInt64, lastSequence: UInt64, segment: String, reason: String, at: Int64) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.segment = segment
        self.reason = reason
        self.at = at
    }

    enum CodingKeys: String, CodingKey {
        case node, firstSequence = "first_seq", lastSequence = "last_seq", segment, reason, at
    }
}

/// What `syncctl devices list` shows: a sealed account's account key, this node's signing key, and the
/// signing key each other node's objects were verified with (`docs/security.md`).
public struct DeviceReport: Codable, Sendable, Hashable {
    public struct Device: Codable, Sendable, Hashable {
        public var node: String
        /// The signing key's fingerprint (the first 8 bytes of its SHA-256, in groups of four hex digits).
        public var fingerprint: String
        /// The last sequence of the node's newest segment verified here (0: none yet, only other objects).
        public var verifiedThrough: UInt64

        public init(node: String, fingerprint: String, verifiedThrough: UInt64) {
            self.node = node
            self.fingerprint = fingerprint
            self.verifiedThrough = verifiedThrough
        }

        enum CodingKeys: String, CodingKey {
            case node, fingerprint, verifiedThrough = "verified_through"
        }
    }

    public var account: String
    public var sealed: Bool
    /// The account key's fingerprint (its key id), the same on every device that holds the key.
    public var accountKey: String?
    /// This node, with its own signing key.
    public var this: Device?
    /// Every other node whose objects this node has opened, with the key they are signed with.
    public var others: [Device]
    /// The key epoch this node seals under, and the version of the roster it holds (0: none yet).
    public var epoch: UInt32?
    public var rosterVersion: UInt64?
    /// The roster's members (before any roster: this node and the nodes verified under the account key).
    public var members: [Device]
    /// Devices that published their card and are neither members nor revoked: approve them by fingerprint.
    public var waiting: [Device]
    /// Revoked devices, with the last sequence still taken from each (`verified_through`).
    public var revoked: [Device]
    /// This device holds no key yet and waits for a member to approve it.
    public var awaitingApproval: Bool?
    /// A newer roster leaves this device out: it was revoked.
    public var revokedHere: Bool?
    /// For `devices_approve` and `devices_revoke`: what was done.
    public var message: String?

    public init(
        account: String, sealed: Bool, accountKey: String? = nil, this: Device? = nil, others: [Device] = [], epoch: UInt32? = nil,
        rosterVersion: UInt64? = nil, members: [Device] = [], waiting: [Device] = [], revoked: [Device] = [], awaitingApproval: Bool? = nil,
        revokedHere: Bool? = nil, message: String? = nil
    ) {
        self.account = account
        self.sealed = sealed
        self.accountKey = accountKey
        self.this = this
        self.others = others
        self.epoch = epoch
        self.rosterVersion = rosterVersion
        self.members = members
        self.waiting = waiting
        self.revoked = revoked
        self.awaitingApproval = awaitingApproval
        self.revokedHere = revokedHere
        self.message = message
    }

    enum CodingKeys: String, CodingKey {
        case account, sealed, accountKey = "account_key", this, others, epoch, rosterVersion = "roster_version", members, waiting, revoked
        case awaitingApproval = "awaiting_approval", revokedHere = "revoked_here", message
    }
}

/// What `syncctl quarantine` shows and acts on.
public struct QuarantineReport: Codable, Sendable, Hashable {
    public var refused: [RefusedEntry]
    /// The same node and sequences with different content (reported, never applied).
    public var divergent: [QuarantineEntry]
    public var dropped: [DroppedEntry]
    /// For `release` and `drop`: what was done.
    public var message: String?

    public init(refused: [RefusedEntry], divergent: [QuarantineEntry], dropped: [DroppedEntry], message: String? = nil) {
        self.refused = refused
        self.divergent = divergent
        self.dropped = dropped
        self.message = message
    }
}
