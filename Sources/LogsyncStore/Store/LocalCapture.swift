import LogsyncCore
import LogsyncSQLite

/// History of the writes an app makes through ``WriteTransaction``'s helpers (`insert`, `update`,
/// `delete`, and so every context's save), recorded by the library itself with the writer connection's
/// triggers off, as the merge records its own (`MergeCapture.swift`).
///
/// A helper knows every change it makes, so the trigger program SQLite would set up per row, and the
/// statement journal it opens for a statement that fires triggers, buy nothing: an insert appends its key
/// to a packed history row (kind ``SchemaSQL/packedInsertsKind``, one per run of inserts of one entity);
/// an update reads the row's values before it and records the columns whose values changed, compared by
/// SQLite as the update trigger compares them (`IS NOT`, after the column's type is applied); a delete
/// records its tombstone and moves the row's live state as the delete trigger does. What is recorded is
/// what the triggers would have recorded (`LocalCaptureTests`).
///
/// The triggers stay on — and the helpers write through them — when a synced table has a trigger of the
/// app's own (``CaptureTriggers``), and for the delete of a row other entities may refer to: its delete
/// rules (cascade, nullify, deny) are triggers. Raw SQL in a write body (`execute`, a `rows` that writes)
/// turns them on first and keeps them on to the end of that write, since only the triggers see what it
/// changes; packed inserts before it are recorded first, so history keeps the order of the writes. Foreign
/// writers are captured by their own connections' triggers, which this connection's switch does not touch.
final class LocalCapture {
    private let connection: Connection
    private let triggers: CaptureTriggers
    private let statements: MergeStatements
    /// This write's decision, taken at its first helper call: nil before it; true when its helpers record
    /// history themselves. False for the rest of a write once its raw SQL turned the triggers on.
    private var direct: Bool?
    /// Keys in the open run of packed inserts (`MergeStatements.packedInserts`); a run is closed at
    /// ``largestRun`` keys so that no single log row grows with the size of one transaction.
    private var packedCount = 0
    static let largestRun = 4_096

    private struct Key: Hashable {
        enum Kind: UInt8 { case insert, insertWithKey, select, update }
        let entity: Int64
        let mask: Int64
        let kind: Kind
    }
    /// Statements by entity and column set: prepared once, found by a small key instead of by their SQL.
    private var prepared: [Key: Statement] = [:]
    /// Column values of the helper call under way, by bit; reused so that a call allocates nothing.
    private var columns: [(bit: Int, value: DatabaseValue)] = []

    init(connection: Connection, triggers: CaptureTriggers, statements: MergeStatements) {
        self.connection = connection
        self.triggers = triggers
        self.statements = statements
    }

    private func writer(_ catalog: Catalog) -> MergeWriter {
        MergeWriter(connection: connection, catalog: catalog, statements: statements, capturesHistory: true)
    }

    // MARK: - One write

    /// Before a write body runs.
    func begin() {
        direct = nil
        statements.packedInserts = nil
    }

    /// After the body, before its commit marker: the inserts still packed are recorded.
    func finish(_ catalog: Catalog) throws {
        try recordPackedInserts(catalog)
    }

    /// Whether this write's helpers record history themselves; decided at the first call.
    private func recordsDirectly() throws -> Bool {
        if let direct { return direct }
        let decided = try triggers.turnOffUnlessForeign()
        direct = decided
        return decided
    }

    /// Before raw SQL of the body: a statement that may write runs with triggers on, after the inserts
    /// packed so far are recorded. So does a savepoint's `ROLLBACK TO`, which must take the inserts it
    /// undoes out of history with them (SQLite counts transaction control as read-only).
    func beforeRawSQL(_ statement: Statement, catalog: Catalog) throws {
        if statement.isReadOnly {
            if Self.controlsTransaction(statement.sql) { try recordPackedInserts(catalog) }
            return
        }
        try recordPackedInserts(catalog)
        try triggers.turnOn()
        direct = false
    }

    /// Whether `sql` is `SAVEPOINT`, `RELEASE`, `ROLLBACK`, `BEGIN`, `COMMIT` or `END`.
    static func controlsTransaction(_ sql: String) -> Bool {
        let word = sql.drop { $0.isWhitespace }.prefix { $0.isLetter }.uppercased()
        return ["SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT", "END"].contains(word)
    }

    private func recordPackedInserts(_ catalog: Catalog) throws {
        guard statements.packedInserts != nil else { return }
        try writer(catalog).recordPackedInserts()
    }

    // MARK: - Helpers

    /// Inserts a row given as column values by name (the key by its name too).
    func insert(_ info: Catalog.EntityInfo, _ values: [String: DatabaseValue], catalog: Catalog, path: String) throws {
        let direct = try recordsDirectly()
        var key: DatabaseValue?
        let mask = try collect(values, of: info, key: &key, path: path)
        let statement = try statement(.init(entity: info.id, mask: mask, kind: key == nil ? .insert : .insertWithKey)) {
            info.sql.insert(columns: (key == nil ? [] : [info.primaryKey.name]) + info.columnNames(inMask: mask))
        }
        let offset: Int32 = key == nil ? 1 : 2
        if let key { try statement.bind(key, at: 1) }
        for (index, column) in columns.enumerated() { try statement.bind(column.value, at: offset + Int32(index)) }
        try statement.run()
        guard direct, let key else { return }
        // The open run continues while it is this entity's and not full; recording any other change closed it.
        if let open = statements.packedInserts, open.entity === info, packedCount < Self.largestRun {
            packedCount += 1
        } else {
            try recordPackedInserts(catalog)
            packedCount = 1
        }
        try writer(catalog).recordInsert(of: key, info: info)
    }

    /// Sets columns of the row with `key`; false when there is no such row.
    func update(
        _ info: Catalog.EntityInfo, key: DatabaseValue, _ values: [String: DatabaseValue], catalog: Catalog, path: String
    ) throws -> Bool {
        let direct = try recordsDirectly()
        var ignored: DatabaseValue?
        let mask = try collect(values, of: info, key: &ignored, path: path, keyAllowed: false)
        var before: [DatabaseValue] = []
        if direct {
            // The row's values before the update, to tell which columns it changes.
            let select = try statement(.init(entity: info.id, mask: mask, kind: .select)) {
                "SELECT \(info.columnNames(inMask: mask).map(SchemaSQL.quote).joined(separator: ", ")) FROM "
                    + "\(SchemaSQL.quote(info.entity.name)) WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?"
            }
            try select.bind(key, at: 1)
            guard try select.step() else { return false }
            before = (0..<columns.count).map { select.value(at: $0) }
            select.reset()
        }
        // With triggers off the update returns its changed-column mask, comparing in SQLite the stored new
        // values with the old ones bound as they were read: the update trigger's own `OLD.c IS NOT NEW.c`.
        // Parameters: the new values, the key, then the old values (explicitly numbered after them).
        let update = try statement(.init(entity: info.id, mask: mask, kind: .update)) {
            let count = columns.count
            let changed = columns.enumerated().map { index, column in
                "((\(SchemaSQL.quote(info.columns[column.bit])) IS NOT ?\(count + 2 + index)) << \(column.bit))"
            }
            return info.sql.update(columns: info.columnNames(inMask: mask)) + " RETURNING " + changed.joined(separator: " | ")
        }
        let count = Int32(columns.count)
        for (index, column) in columns.enumerated() { try update.bind(column.value, at: Int32(index) + 1) }
        try update.bind(key, at: count + 1)
        for (index, value) in before.enumerated() { try update.bind(value, at: count + 2 + Int32(index)) }
        guard try update.step() else { return false }
        let changed = update.int64(at: 0)
        update.reset()
        if direct, changed != 0 { try writer(catalog).recordUpdate(of: key, info: info, mask: changed) }
        return true
    }

    /// Deletes the row with `key`; false when there is no such row. A row other entities may refer to is
    /// deleted with triggers on, so that their delete rules apply.
    func delete(_ info: Catalog.EntityInfo, key: DatabaseValue, catalog: Catalog) throws -> Bool {
        let rows = try statements.rows(of: info)
        let direct = try !info.isReferenced && recordsDirectly()
        if !direct {
            try recordPackedInserts(catalog)
            try triggers.turnOn()
            self.direct = false
            try rows.delete.bind(key, at: 1)
            try rows.delete.run()
            return connection.changes > 0
        }
        // Before the row goes, what the delete trigger records after it: the history row with the
        // tombstone, the row's live state moved; then notes of collisions naming the row.
        try writer(catalog).recordDelete(of: key, info: info)
        try rows.delete.bind(key, at: 1)
        try rows.delete.run()
        guard connection.changes > 0 else { return false }
        let notes = try statements.deleteNotes()
        try notes.bind(info.id, at: 1)
        try notes.bind(key, at: 2)
        try notes.run()
        return true
    }

    // MARK: - Statements

    /// Sorts a helper's values into ``columns`` in bit order and returns their mask; the key, when given by
    /// name, goes to `key`.
    private func collect(
        _ values: [String: DatabaseValue], of info: Catalog.EntityInfo, key: inout DatabaseValue?, path: String,
        keyAllowed: Bool = true
    ) throws -> Int64 {
        columns.removeAll(keepingCapacity: true)
        var mask: Int64 = 0
        for (name, value) in values {
            if let bit = info.bit(of: name) {
                mask |= Int64(1) << Int64(bit)
                columns.append((bit, value))
            } else if keyAllowed, name == info.primaryKey.name {
                key = value
            } else {
                throw StoreError(.unknownColumn, "'\(name)' is not a column of '\(info.entity.name)'", path: path)
            }
        }
        columns.sort { $0.bit < $1.bit }
        return mask
    }

    private func statement(_ key: Key, sql: () -> String) throws -> Statement {
        if let statement = prepared[key] { return statement }
        let statement = try connection.prepare(sql())
        prepared[key] = statement
        return statement
    }
}
