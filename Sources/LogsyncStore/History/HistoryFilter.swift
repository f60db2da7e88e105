import LogsyncCore

/// Which history transactions to fetch. Empty sets are "anything"; nil means no filter on that field.
public struct HistoryFilter: Sendable {
    /// Keep transactions whose author is one of these. Foreign writes have no author and never match.
    public var authors: Set<String>?
    public var origins: Set<Origin>?
    /// Keep transactions that touch one of these entities, with only those entities' changes.
    public var entities: Set<String>?

    public init(authors: Set<String>? = nil, origins: Set<Origin>? = nil, entities: Set<String>? = nil) {
        self.authors = authors
        self.origins = origins
        self.entities = entities
    }

    func admits(_ transaction: inout HistoryTransaction) -> Bool {
        if let authors, !(transaction.author.map(authors.contains) ?? false) { return false }
        if let origins, !origins.contains(transaction.origin) { return false }
        if let entities {
            transaction.changes.removeAll { !entities.contains($0.entity) }
            if transaction.changes.isEmpty { return false }
        }
        return true
    }
}
