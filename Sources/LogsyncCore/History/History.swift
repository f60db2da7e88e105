/// A position in a store's history: the token of the last history transaction included.
///
/// Tokens increase with every committed transaction and survive reopening the store. `0` is "before
/// everything".
public struct HistoryToken: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var rawValue: Int64

    public init(_ rawValue: Int64) { self.rawValue = rawValue }

    public static let zero = HistoryToken(0)
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}

/// Where a history transaction was first committed.
public enum Origin: Sendable, Hashable, CustomStringConvertible {
    /// On this node: through logsync or by another process writing the file directly.
    case local
    /// Imported from another node, identified by its node id.
    case remote(String)
    /// Written by logsync's merge to keep the synced tables equal to the merged state (a unique-key loser
    /// reappearing after its survivor was deleted, say). Never exported.
    case merge

    /// How the origin is stored in the history log's `origin` column (NULL for local).
    public static let mergeStorageValue = "~merge"

    public init(storageValue: String?) {
        switch storageValue {
        case nil: self = .local
        case Self.mergeStorageValue?: self = .merge
        case let node?: self = .remote(node)
        }
    }

    public var description: String {
        switch self {
        case .local: return "local"
        case .remote(let node): return node
        case .merge: return "merge"
        }
    }
}

/// One committed transaction on synced tables, as recorded in the store's history.
public struct HistoryTransaction: Sendable, Hashable {
    public var token: HistoryToken
    public var timestamp: HLCTimestamp
    /// Who wrote it, as set by the caller; nil for writes by processes that do not use logsync.
    public var author: String?
    /// The name of the context (or tool) that saved it; nil for foreign writes.
    public var contextName: String?
    public var origin: Origin
    public var changes: [HistoryChange]

    public init(
        token: HistoryToken, timestamp: HLCTimestamp, author: String?, contextName: String?, origin: Origin,
        changes: [HistoryChange]
    ) {
        self.token = token
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.origin = origin
        self.changes = changes
    }
}

public enum ChangeKind: Int, Sendable, Hashable, Codable, CustomStringConvertible {
    case insert = 1
    case update = 2
    case delete = 3

    public var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .delete: return "delete"
        }
    }
}

/// One row's change within a history transaction.
public struct HistoryChange: Sendable, Hashable {
    public var entity: String
    public var primaryKey: DatabaseValue
    public var kind: ChangeKind
    /// For inserts every column; for updates only the columns whose value changed; empty for deletes.
    public var changedColumns: [String]
    /// For deletes, the last values of the attributes declared ``Attribute/preservedOnDelete``.
    public var tombstone: [String: DatabaseValue]?

    public init(
        entity: String, primaryKey: DatabaseValue, kind: ChangeKind, changedColumns: [String],
        tombstone: [String: DatabaseValue]? = nil
    ) {
        self.entity = entity
        self.primaryKey = primaryKey
        self.kind = kind
        self.changedColumns = changedColumns
        self.tombstone = tombstone
    }
}
