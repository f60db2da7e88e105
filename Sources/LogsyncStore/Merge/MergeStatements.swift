import LogsyncCore
import LogsyncSQLite

/// The statements the merge runs for every row, prepared once per writer connection and held by reference.
///
/// `Connection.cached` finds a statement by its SQL text, which hashes the whole string on every call;
/// on the merge's hot path that hashing and the argument arrays cost about as much as SQLite's own work
/// for a small row. Statements here are bound parameter by parameter instead.
///
/// A statement must be finished (stepped to the end, or reset) before it is used again; every caller
/// in the merge does so before returning.
final class MergeStatements {
    /// The per-row statements of one entity (`RowSQL`), prepared. A class: the merge asks for them per
    /// row, and handing out one reference costs one count instead of seven.
    final class Entity {
        let select: Statement
        let insert: Statement
        let delete: Statement
        let deleteByRowID: Statement
        let found: Statement
        let liveState: Statement
        let deleteLiveState: Statement
        let updateLiveState: Statement
        let deleteHistory: Statement
        let deleteHistoryByRowID: Statement
        let moveLiveState: Statement

        init(connection: Connection, sql: RowSQL) throws {
            select = try connection.prepare(sql.select)
            insert = try connection.prepare(sql.insert)
            delete = try connection.prepare(sql.delete)
            deleteByRowID = try connection.prepare(sql.deleteByRowID)
            found = try connection.prepare(sql.found)
            liveState = try connection.prepare(sql.liveState)
            deleteLiveState = try connection.prepare(sql.deleteLiveState)
            updateLiveState = try connection.prepare(sql.updateLiveState)
            deleteHistory = try connection.prepare(sql.deleteHistory)
            deleteHistoryByRowID = try connection.prepare(sql.deleteHistoryByRowID)
            moveLiveState = try connection.prepare(sql.moveLiveState)
        }
    }

    private let connection: Connection
    private var loadStateStatement: Statement?
    private var saveStateStatement: Statement?
    private var insertStateStatement: Statement?
    private var insertLiveStateStatement: Statement?
    private var updateLiveStateStatement: Statement?
    private var moveLiveStateStatement: Statement?
    private var deleteLiveStateStatement: Statement?
    private var insertReferenceStatement: Statement?
    private var deleteReferenceStatement: Statement?
    private var insertHistoryStatement: Statement?
    private var deleteNotesStatement: Statement?
    private var entities: [Int64: Entity] = [:]
    private var runs: [Int64: (count: Int, rows: Statement, states: Statement, rowID: Statement)] = [:]
    private var lastEntity: (id: Int64, statements: Entity)?
    private var updates: [UpdateKey: Statement] = [:]
    private struct UpdateKey: Hashable {
        let entity: Int64
        let mask: Int64
        let byRowID: Bool
    }

    /// Reused by ``RowStateCoding/encode(_:info:nodes:connection:into:)`` so that saving a state does not
    /// allocate a new buffer per row.
    var encodeBuffer: [UInt8] = []

    /// Inserts of one entity the merge has made with triggers off and not yet recorded in history: the
    /// entity, and its keys, packed (`MergeCapture.swift`).
    var packedInserts: (entity: Catalog.EntityInfo, keys: [UInt8])?

    init(connection: Connection) {
        self.connection = connection
    }

    /// `SELECT cl, state FROM _ls_row WHERE entity = ? AND pk = ?`
    func loadState() throws -> Statement {
        try prepared(&loadStateStatement, "SELECT cl, state FROM _ls_row WHERE entity = ? AND pk = ?")
    }

    /// `INSERT INTO _ls_row(entity, pk, cl, state) VALUES (?, ?, ?, ?) ON CONFLICT(entity, pk) DO UPDATE …`
    ///
    /// An upsert, not `INSERT OR REPLACE`: a replace deletes the old row and appends a new one with a new
    /// rowid, writing two pages of `_ls_row` and two index entries where an update in place writes one page.
    func saveState() throws -> Statement {
        try prepared(
            &saveStateStatement,
            "INSERT INTO _ls_row(entity, pk, cl, state) VALUES (?, ?, ?, ?) "
                + "ON CONFLICT(entity, pk) DO UPDATE SET cl = excluded.cl, state = excluded.state")
    }

    /// `INSERT INTO _ls_row(entity, pk, cl, state) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`
    func insertState() throws -> Statement {
        try prepared(
            &insertStateStatement, "INSERT INTO _ls_row(entity, pk, cl, state) VALUES (?, ?, ?, ?) ON CONFLICT(entity, pk) DO NOTHING")
    }

    /// `INSERT INTO _ls_live(id, pk, cl, state) VALUES (?, ?, ?, ?)`
    func insertLiveState() throws -> Statement {
        try prepared(&insertLiveStateStatement, "INSERT INTO _ls_live(id, pk, cl, state) VALUES (?, ?, ?, ?)")
    }

    /// `UPDATE _ls_live SET cl = ?3, state = ?4 WHERE id = ?1 AND pk = ?2`: a live state replaced where the
    /// merge found it (``MergeWriter/writeState(_:primaryKey:info:with:first:nodes:encoded:)`` binds it).
    func updateLiveState() throws -> Statement {
        try prepared(&updateLiveStateStatement, "UPDATE _ls_live SET cl = ?3, state = ?4 WHERE id = ?1 AND pk = ?2")
    }

    /// The delete trigger's move of a deleted row's live state to `_ls_row` (``SchemaSQL/moveLiveState(entity:id:key:)``),
    /// for a state the merge found at `id` and has just replaced there: parameters (entity, id). Unlike the
    /// trigger's, it replaces a state `_ls_row` holds: the merge took that one into the state it moves.
    func moveLiveState() throws -> Statement {
        try prepared(
            &moveLiveStateStatement,
            "INSERT INTO _ls_row(entity, pk, cl, state) SELECT ?1, pk, cl, state FROM _ls_live WHERE id = ?2 "
                + "ON CONFLICT(entity, pk) DO UPDATE SET cl = excluded.cl, state = excluded.state")
    }

    /// `DELETE FROM _ls_live WHERE id = ?`
    func deleteLiveState() throws -> Statement {
        try prepared(&deleteLiveStateStatement, "DELETE FROM _ls_live WHERE id = ?")
    }

    /// `INSERT OR IGNORE INTO _ls_ref(target_entity, target, entity, pk) VALUES (?, ?, ?, ?)`
    func insertReference() throws -> Statement {
        try prepared(
            &insertReferenceStatement, "INSERT OR IGNORE INTO _ls_ref(target_entity, target, entity, pk) VALUES (?, ?, ?, ?)")
    }

    /// `DELETE FROM _ls_ref WHERE target_entity = ? AND target = ? AND entity = ? AND pk = ?`
    func deleteReference() throws -> Statement {
        try prepared(
            &deleteReferenceStatement, "DELETE FROM _ls_ref WHERE target_entity = ? AND target = ? AND entity = ? AND pk = ?")
    }

    /// `INSERT INTO _ls_log(kind, entity, pk, cols) VALUES (?, ?, ?, ?)`: the history row of an insert or
    /// update, as the capture triggers write it (`MergeCapture.swift`).
    func insertHistory() throws -> Statement {
        try prepared(&insertHistoryStatement, "INSERT INTO _ls_log(kind, entity, pk, cols) VALUES (?, ?, ?, ?)")
    }

    /// The select, insert and delete of one entity's rows, by primary key.
    func rows(of info: Catalog.EntityInfo) throws -> Entity {
        // Rows of one entity come in runs: the last one asked for is found without hashing.
        if let last = lastEntity, last.id == info.id { return last.statements }
        if let statements = entities[info.id] {
            lastEntity = (info.id, statements)
            return statements
        }
        let statements = try Entity(connection: connection, sql: info.sql)
        entities[info.id] = statements
        lastEntity = (info.id, statements)
        return statements
    }

    /// `count` rows of the entity's insert in one statement, `count` states into `_ls_live` in another,
    /// and the lookup of a row's rowid by its key (``MergeWriter/insertPreparedRun(_:of:nodes:)``).
    func insertRuns(of info: Catalog.EntityInfo, count: Int) throws -> (rows: Statement, states: Statement, rowID: Statement) {
        if let run = runs[info.id], run.count == count { return (run.rows, run.states, run.rowID) }
        let rows = try connection.prepare(info.sql.insert(rows: count))
        let states = try connection.prepare(
            "INSERT INTO _ls_live(id, pk, cl, state) VALUES " + Array(repeating: "(?, ?, ?, ?)", count: count).joined(separator: ", "))
        let rowID = try connection.prepare(info.sql.rowID)
        runs[info.id] = (count, rows, states, rowID)
        return (rows, states, rowID)
    }

    /// `DELETE FROM _ls_displaced WHERE entity = ? AND pk = ?`: what the delete trigger drops of a deleted
    /// row's collision notes (`SchemaSQL.displacementTriggers`).
    func deleteNotes() throws -> Statement {
        try prepared(&deleteNotesStatement, "DELETE FROM _ls_displaced WHERE entity = ? AND pk = ?")
    }

    /// `UPDATE t SET <the columns in mask, in bit order> = ? … WHERE <key> = ?` (or `WHERE rowid = ?`).
    func update(of info: Catalog.EntityInfo, mask: Int64, byRowID: Bool = false) throws -> Statement {
        let key = UpdateKey(entity: info.id, mask: mask, byRowID: byRowID)
        if let statement = updates[key] { return statement }
        let statement = try connection.prepare(info.sql.update(columns: info.columnNames(inMask: mask), byRowID: byRowID))
        updates[key] = statement
        return statement
    }

    private func prepared(_ slot: inout Statement?, _ sql: String) throws -> Statement {
        if let statement = slot { return statement }
        let statement = try connection.prepare(sql)
        slot = statement
        return statement
    }
}
