import LogsyncCore

/// A node's progress record to store in place of its last one (already checked against the route).
public struct ProgressPut: Sendable {
    public var account: String
    public var node: NodeID
    public var bytes: [UInt8]
    /// The account's quota when the account sets none.
    public var defaultQuotaBytes: Int64

    public init(account: String, node: NodeID, bytes: [UInt8], defaultQuotaBytes: Int64) {
        self.account = account
        self.node = node
        self.bytes = bytes
        self.defaultQuotaBytes = defaultQuotaBytes
    }
}

/// A baseline upload whose chunks are all stored: what makes it a baseline.
public struct BaselineFinish: Sendable {
    public var account: String
    public var node: NodeID
    /// The baseline's file name (`<count>-<digest>.lsbase`).
    public var name: String
    public var upload: Int64
    public var chunks: Int
    public var size: Int64
    /// SHA-256 of all its bytes: the same name with the same digest is the same baseline.
    public var digest: [UInt8]
    public var defaultQuotaBytes: Int64

    public init(account: String, node: NodeID, name: String, upload: Int64, chunks: Int, size: Int64, digest: [UInt8], defaultQuotaBytes: Int64) {
        self.account = account
        self.node = node
        self.name = name
        self.upload = upload
        self.chunks = chunks
        self.size = size
        self.digest = digest
        self.defaultQuotaBytes = defaultQuotaBytes
    }
}

/// A stored baseline as listed, and where its chunks are.
public struct StoredBaseline: Sendable, Hashable {
    public var node: NodeID
    public var name: String
    public var size: Int64
    /// Its chunks are `0..<chunks` under `blob`.
    public var blob: Int64
    public var chunks: Int

    public init(node: NodeID, name: String, size: Int64, blob: Int64, chunks: Int) {
        self.node = node
        self.name = name
        self.size = size
        self.blob = blob
        self.chunks = chunks
    }
}

/// The storage of bounded growth (docs/retention.md): progress records, baselines, and deleting a node's
/// own segments and baselines. Writes are durable when they return, like pushes, and count against the
/// account's quota (deletions free it).
public protocol RetentionStorage: Sendable {
    /// Replaces a node's progress record. Throws ``RelayError/Code/quotaExceeded`` past the quota.
    func putProgress(_ put: ProgressPut) async throws(RelayError)

    /// Every node's progress record in the account, by node.
    func progressRecords(account: String) async throws(RelayError) -> [(node: NodeID, bytes: [UInt8])]

    /// Deletes one of a node's segments; false when it was not there. Other segments keep their arrivals.
    func deleteSegment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) async throws(RelayError) -> Bool

    /// The account's usage and quota (nil: the default applies), or nil when there is no such account.
    func usage(account: String) async throws(RelayError) -> (used: Int64, quota: Int64?)?

    /// Starts a baseline upload; its chunks go to ``appendBaselineChunk(upload:index:bytes:)`` in order.
    func beginBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Int64
    func appendBaselineChunk(upload: Int64, index: Int, bytes: [UInt8]) async throws(RelayError)
    /// Makes the upload a stored baseline: true when stored now, false when the same bytes were stored
    /// under its name before. Throws ``RelayError/Code/conflict`` for other bytes under a stored name.
    func finishBaseline(_ finish: BaselineFinish) async throws(RelayError) -> Bool
    /// Drops an upload that will not finish, with its chunks.
    func abandonBaseline(upload: Int64) async

    /// The account's baselines, by node and name.
    func baselines(account: String) async throws(RelayError) -> [StoredBaseline]
    func baseline(account: String, node: NodeID, name: String) async throws(RelayError) -> StoredBaseline?
    /// One chunk of a stored baseline, or nil when it is gone (deleted meanwhile).
    func baselineChunk(blob: Int64, index: Int) async throws(RelayError) -> [UInt8]?
    /// Deletes a node's baseline; false when it was not there.
    func deleteBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Bool
}
