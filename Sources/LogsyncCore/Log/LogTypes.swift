/// A node's identity: a lowercase UUID string, created with its store. Ties between equal HLC timestamps
/// are broken by comparing node ids, so every node orders concurrent writes the same way.
public struct NodeID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { rawValue }
}

/// The version of a column value or a delete: who wrote it, when. Totally ordered by (timestamp, node).
public struct Clock: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var timestamp: HLCTimestamp
    public var node: NodeID

    public init(_ timestamp: HLCTimestamp, _ node: NodeID) {
        self.timestamp = timestamp
        self.node = node
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.timestamp != rhs.timestamp ? lhs.timestamp < rhs.timestamp : lhs.node < rhs.node
    }

    public var description: String { "\(timestamp)@\(node.rawValue.prefix(8))" }
}

/// One row's change as shipped between nodes.
package struct LogChange: Sendable, Hashable {
    public var entity: String
    public var primaryKey: DatabaseValue
    public var kind: ChangeKind
    /// The row's causal length after the change: odd while the row exists, even once deleted. Each
    /// delete and each re-insert increases it by one, so delete/re-insert races converge.
    public var causalLength: UInt64
    /// The largest causal length the format carries: 2^62, so that a store, which keeps it as a signed
    /// 64-bit integer, can add every later delete and re-insert to it without overflow. A decoder refuses
    /// anything above (`docs/log-format.md`, "Limits").
    package static let maximumCausalLength: UInt64 = 1 << 62
    /// The new values of the changed columns: every column for an insert, the changed ones for an update,
    /// none for a delete.
    public var values: [String: DatabaseValue]

    public init(entity: String, primaryKey: DatabaseValue, kind: ChangeKind, causalLength: UInt64, values: [String: DatabaseValue] = [:]) {
        self.entity = entity
        self.primaryKey = primaryKey
        self.kind = kind
        self.causalLength = causalLength
        self.values = values
    }
}

/// One committed local transaction as shipped: the unit that is applied exactly once on every other node.
package struct LogTransaction: Sendable, Hashable {
    /// The largest sequence the format carries: SQLite stores sequences as signed 64-bit integers, so a
    /// decoder refuses anything above (`docs/log-format.md`, "Limits").
    package static let maximumSequence = UInt64(Int64.max)

    /// Dense per-node sequence number, starting at 1.
    public var sequence: UInt64
    public var timestamp: HLCTimestamp
    public var author: String?
    public var contextName: String?
    public var changes: [LogChange]

    public init(sequence: UInt64, timestamp: HLCTimestamp, author: String?, contextName: String?, changes: [LogChange]) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.changes = changes
    }
}

/// What a segment says about itself, readable without decoding its body.
package struct SegmentHeader: Sendable, Hashable {
    /// The newest format this build reads and writes. Writers use the lowest version that can carry a
    /// segment's values (`docs/log-format.md`, "Versioning").
    public static let currentFormatVersion: UInt16 = 2

    public var formatVersion: UInt16
    public var schemaVersion: Int
    public var account: String
    public var node: NodeID
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    public var minTimestamp: HLCTimestamp
    public var maxTimestamp: HLCTimestamp
    public var transactionCount: Int

    public init(
        formatVersion: UInt16 = SegmentHeader.currentFormatVersion, schemaVersion: Int, account: String, node: NodeID,
        firstSequence: UInt64, lastSequence: UInt64, minTimestamp: HLCTimestamp, maxTimestamp: HLCTimestamp,
        transactionCount: Int
    ) {
        self.formatVersion = formatVersion
        self.schemaVersion = schemaVersion
        self.account = account
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.minTimestamp = minTimestamp
        self.maxTimestamp = maxTimestamp
        self.transactionCount = transactionCount
    }
}
