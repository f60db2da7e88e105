import LogsyncCore

/// One history transaction as a container's ``Container/changes()`` stream reports it: the analogue of
/// Core Data's remote change notification with its persistent history transaction.
public struct StoreChange: Sendable, Hashable {
    public var token: HistoryToken
    public var timestamp: HLCTimestamp
    public var author: String?
    public var contextName: String?
    public var origin: Origin
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
    public var objectID: ObjectID
    public var kind: ChangeKind
    /// For inserts every column; for updates the columns whose value changed; empty for deletes.
    public var changedColumns: [String]
}
