import LogsyncCore
import LogsyncRelayProtocol

/// One segment as the relay keeps it: whose, which range, when it arrived in its account's mailbox, and
/// its bytes, never interpreted.
public struct StoredSegment: Sendable, Hashable {
    /// Its position in the account's mailbox: 1, 2, 3, … in the order pushes were acknowledged.
    public var arrival: UInt64
    public var node: NodeID
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var bytes: [UInt8]

    public init(arrival: UInt64, node: NodeID, firstSequence: UInt64, lastSequence: UInt64, bytes: [UInt8]) {
        self.arrival = arrival
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.bytes = bytes
    }
}

/// A push to store: the route's account, node and range, and the bytes (already checked against them).
public struct SegmentPush: Sendable {
    public var account: String
    public var node: NodeID
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var bytes: [UInt8]
    /// The account's quota when the account sets none.
    public var defaultQuotaBytes: Int64

    public init(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64, bytes: [UInt8], defaultQuotaBytes: Int64) {
        self.account = account
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.bytes = bytes
        self.defaultQuotaBytes = defaultQuotaBytes
    }
}

public enum PushOutcome: Sendable, Hashable {
    /// Stored durably now, at this arrival.
    case stored(arrival: UInt64)
    /// Stored before with the same bytes: nothing changed.
    case duplicate(arrival: UInt64)
}

/// Segments after a cursor, in arrival order.
public struct PullPage: Sendable {
    public var segments: [StoredSegment]
    /// Where the next pull starts: the last arrival returned, or the cursor asked for when none was.
    public var cursor: UInt64
    /// Whether more segments wait after `cursor` (the page hit its count or byte limit).
    public var more: Bool

    public init(segments: [StoredSegment], cursor: UInt64, more: Bool) {
        self.segments = segments
        self.cursor = cursor
        self.more = more
    }
}

/// The per-account, per-node ordered segment mailboxes. Implementations acknowledge a push only once it
/// is durable, and make the order of arrivals in an account the order of those acknowledgements. Every
/// method may wait on a network database (PostgreSQL); the SQLite storage answers without suspending.
public protocol MailboxStorage: Sendable {
    /// Stores a segment durably, or says it was there already. Throws ``RelayError/Code/conflict`` for a
    /// name stored with other bytes or a range that overlaps a stored one, and
    /// ``RelayError/Code/quotaExceeded`` when the account would go over its quota; nothing is stored then.
    func push(_ push: SegmentPush) async throws(RelayError) -> PushOutcome

    /// The account's segments that arrived after `cursor`, oldest first: at most `limit` of them and, past
    /// the first, at most `maximumBytes` in all.
    func pull(account: String, after cursor: UInt64, limit: Int, maximumBytes: Int) async throws(RelayError) -> PullPage

    /// One stored segment's bytes, or nil.
    func segment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) async throws(RelayError) -> [UInt8]?

    /// The account's latest arrival (0 when its mailbox is empty).
    func latestArrival(account: String) async throws(RelayError) -> UInt64

    /// The nodes that pushed to the account, with what they hold.
    func nodes(account: String) async throws(RelayError) -> [NodeSummary]

    /// Whether the storage can serve requests now (for the readiness route).
    func isReady() async -> Bool

    /// Which history the mailboxes hold: the database's id and epoch, carried by every pull answer.
    var identity: RelayIdentity { get }
}

/// Who a token speaks for.
public struct Credential: Sendable, Hashable {
    public var tokenID: String
    public var account: String
    /// The only node it may push as, when it is bound to one.
    public var node: NodeID?

    public init(tokenID: String, account: String, node: NodeID?) {
        self.tokenID = tokenID
        self.account = account
        self.node = node
    }
}

public struct AccountInfo: Sendable, Codable, Hashable {
    public var name: String
    public var createdAt: String
    public var segments: Int
    public var usedBytes: Int64
    /// nil: the relay's default quota applies.
    public var quotaBytes: Int64?

    public init(name: String, createdAt: String, segments: Int, usedBytes: Int64, quotaBytes: Int64?) {
        self.name = name
        self.createdAt = createdAt
        self.segments = segments
        self.usedBytes = usedBytes
        self.quotaBytes = quotaBytes
    }
}

/// A token as listed: everything but the secret, which the relay does not keep.
public struct TokenInfo: Sendable, Codable, Hashable {
    public var id: String
    public var account: String
    public var node: String?
    public var createdAt: String

    public init(id: String, account: String, node: String?, createdAt: String) {
        self.id = id
        self.account = account
        self.node = node
        self.createdAt = createdAt
    }
}

/// Accounts and their tokens. Secrets are never stored: only their SHA-256.
public protocol CredentialStorage: Sendable {
    func createAccount(_ name: String, quotaBytes: Int64?) async throws(RelayError)
    func accounts() async throws(RelayError) -> [AccountInfo]
    /// Deletes an account with its segments and tokens.
    func deleteAccount(_ name: String) async throws(RelayError)
    /// A new token; the secret is in the returned text only, shown once.
    func issueToken(account: String, node: NodeID?) async throws(RelayError) -> (info: TokenInfo, token: String)
    func revokeToken(id: String) async throws(RelayError)
    func tokens(account: String?) async throws(RelayError) -> [TokenInfo]
    /// Who a bearer token speaks for, or nil for a token that is unknown, revoked or malformed.
    func authenticate(_ bearer: String) async throws(RelayError) -> Credential?
}

/// A storage's own figures for `/metrics` (commits, a connection pool's use, wake-up lag).
public protocol StorageGauges: Sendable {
    func gauges() async -> [(name: String, help: String, value: Double)]
}
