import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
    // MARK: - Batch operations

    /// Inserts `records` straight into the store in one history transaction with this context's name and
    /// `author`, without going through the context's unsaved changes (like `NSBatchInsertRequest`). The
    /// context then merges it like any other transaction when it merges automatically.
    @discardableResult
    public func batchInsert<R: Record>(_ records: [R], author: String? = nil) throws -> HistoryToken? {
        let coder = try model.coder(for: R.self)
        let rows = try records.map { try coder.encode($0) }
        let token = try batchWrite(author: author, what: "insert \(rows.count) \(coder.entity.name) record(s)") { transaction in
            for row in rows { try transaction.insert(coder.entity.name, row) }
        }
        try mergeIfAutomatic()
        return token
    }

    /// Deletes every record of a type that matches `filter` straight in the store, in one history
    /// transaction with this context's name and `author` (like `NSBatchDeleteRequest`); delete rules
    /// apply. Returns how many were deleted. The context merges it like any other transaction when it
    /// merges automatically.
    @discardableResult
    public func batchDelete<R: Record>(_ type: R.Type, where filter: Filter = .all, author: String? = nil) throws -> Int {
        let columns = try model.columns(of: R.entityName)
        let (expression, arguments) = try ResolvedFilter(filter, entity: columns).sql
        var deleted = 0
        try batchWrite(author: author, what: "delete \(R.entityName) records") { transaction in
            let count = try transaction.rows("SELECT count(*) FROM \(SQLIdentifier.quoted(columns.name)) WHERE \(expression)", arguments)
            if case .integer(let value)? = count.first?.first { deleted = Int(value) }
            try transaction.execute("DELETE FROM \(SQLIdentifier.quoted(columns.name)) WHERE \(expression)", arguments)
        }
        try mergeIfAutomatic()
        return deleted
    }

    @discardableResult
    func batchWrite(author: String?, what: String, _ body: (WriteTransaction) throws -> Void) throws -> HistoryToken? {
        try state.withLock { try checkOpen($0) }
        do {
            return try store.recordedWrite(author: author, context: name, body).token
        } catch {
            throw ContextError(.saveFailed, "context '\(name)' could not \(what)", cause: error)
        }
    }

    func mergeIfAutomatic() throws {
        let automatic = state.withLock { $0.automaticallyMergesChanges && $0.snapshot == nil }
        if automatic { try mergeChanges() } else { refreshObservers() }
    }
}
