import LogsyncCore

/// One history transaction as a container's ``Container/changes()`` stream reports it: the analogue of
/// Core Data's remote change notification with its persistent history transaction.
public struct StoreChange: Sendable, Hashable {
    /// The transaction's history token; ``Store/history(after:filter:limit:)`` reads on from here.
    public var token: HistoryToken
    /// The transaction's hybrid logical clock value.
    public var timestamp: HLCTimestamp
    /// Who wrote it (the `author` of a save); nil for foreign writers, and when none was given.
    public var author: String?
    /// The name of the context (or `Store.write` caller) that wrote it; nil for foreign writers.
    public var contextName: String?
    /// Where it was committed: on this node (``Origin/local``), or on the node it was imported from.
    public var origin: Origin
    /// The objects it changed. Rows whose key is not a UUID are left out.
    public var changes: [ObjectChange]

    init(_ transaction: HistoryTransaction) {
        token = transaction.token
        timestamp = transaction.timestamp
        author = transaction.author
        contextName = transaction.contextName
        origin = transaction.origin
        changes = transaction.changes.compactMap { change in
            RowCoder.uuid(from: change.primaryKey).map { id in
                ObjectChange(
                    objectID: ObjectID(entity: change.entity, id: id), kind: change.kind, changedColumns: change.changedColumns)
            }
        }
    }

    /// The ids of objects changed in this way, of one entity or of all.
    public func objectIDs(_ kind: ChangeKind, entity: String? = nil) -> [ObjectID] {
        changes.filter { $0.kind == kind && (entity == nil || $0.objectID.entity == entity) }.map(\.objectID)
    }
}

/// One object's change within a ``StoreChange``.
public struct ObjectChange: Sendable, Hashable {
    /// The object changed.
    public var objectID: ObjectID
    /// Whether it was inserted, updated or deleted.
    public var kind: ChangeKind
    /// For inserts every column; for updates the columns whose value changed; empty for deletes.
    public var changedColumns: [String]
}
