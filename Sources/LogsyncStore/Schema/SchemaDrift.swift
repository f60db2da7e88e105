import LogsyncCore
import LogsyncSQLite

/// Changes another program made to the synced tables behind logsync's back: a column renamed, dropped,
/// retyped or added with `ALTER TABLE`, a table renamed or rebuilt, a unique index created or dropped, a
/// capture trigger dropped. Each would make nodes differ silently (a renamed column's values no longer
/// reach the merge; an added one never reaches other nodes; a foreign unique index lets `REPLACE` delete
/// rows no trigger sees), so a store with drift neither opens nor syncs until it is put back.
///
/// Checked when the store opens (before any migration) and, while it is open, at the start of every sync
/// transaction whose schema cookie (`PRAGMA schema_version`, which every DDL statement bumps) differs
/// from the last one checked.
struct SchemaDrift {
    let connection: Connection
    let schema: Schema
    let catalog: Catalog
    /// The tables must be `STRICT` (stores of ``SchemaSQL/strictTablesFormat`` and later).
    var requiresStrict = true

    /// Each problem found, as a sentence that names the table, the column or index, and what to do.
    func problems(checkingTriggers: Bool) throws -> [String] {
        var problems: [String] = []
        for info in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
            problems += try tableProblems(info)
        }
        if checkingTriggers { problems += try triggerProblems() }
        return problems
    }

    /// Throws ``StoreError/Code/schemaDrift`` listing every problem, if there is any.
    func check(checkingTriggers: Bool) throws {
        let found = try problems(checkingTriggers: checkingTriggers)
        guard !found.isEmpty else { return }
        throw StoreError(
            .schemaDrift,
            "the synced tables were changed outside logsync, so syncing this store stopped: " + found.joined(separator: "; "),
            path: connection.path)
    }

    /// A column as the table must declare it.
    private struct ColumnShape: Equatable {
        var type: String
        var notNull: Bool
        var primaryKey: Bool
    }

    private func expectedColumns(_ info: Catalog.EntityInfo) -> [String: ColumnShape] {
        var columns: [String: ColumnShape] = [
            info.primaryKey.name: ColumnShape(type: SchemaSQL.columnType(info.primaryKey.type), notNull: true, primaryKey: true)
        ]
        for attribute in info.entity.attributes {
            columns[attribute.name] = ColumnShape(type: SchemaSQL.columnType(attribute.type), notNull: !attribute.optional, primaryKey: false)
        }
        for relationship in info.entity.relationships {
            let keyType = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
            columns[relationship.name] = ColumnShape(type: SchemaSQL.columnType(keyType), notNull: false, primaryKey: false)
        }
        return columns
    }

    private func tableProblems(_ info: Catalog.EntityInfo) throws -> [String] {
        let table = info.entity.name
        let quoted = SchemaSQL.quote(table)
        guard try connection.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(table)]) != nil else {
            return ["table \(quoted) is missing (renamed or dropped by another program): rename it back or restore it from a backup"]
        }
        var problems: [String] = []
        if requiresStrict, try connection.scalar("SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?", [.text(table)]) == .integer(0) {
            problems.append(
                "table \(quoted) is no longer STRICT (rebuilt by another program), so it would take values of the wrong type: "
                    + "restore the table's definition")
        }
        var found: [String: ColumnShape] = [:]
        var order: [String] = []
        for row in try connection.rows("SELECT name, type, \"notnull\", pk FROM pragma_table_xinfo(?)", [.text(table)]) {
            guard case .text(let name) = row[0] else { continue }
            let type = row[1].textBytes.map { String(decoding: $0, as: UTF8.self).uppercased() } ?? ""
            found[name] = ColumnShape(type: type, notNull: row[2] != .integer(0), primaryKey: row[3] != .integer(0))
            order.append(name)
        }
        let expected = expectedColumns(info)
        let missing = info.columns.filter { found[$0] == nil } + (found[info.primaryKey.name] == nil ? [info.primaryKey.name] : [])
        let extra = order.filter { expected[$0] == nil }
        for name in missing {
            var problem = "column \(quoted).\(SchemaSQL.quote(name)) is missing (renamed or dropped by another program)"
            if extra.count == 1, missing.count == 1 {
                problem += "; if it was renamed to \(SchemaSQL.quote(extra[0])), rename it back: "
                    + "ALTER TABLE \(quoted) RENAME COLUMN \(SchemaSQL.quote(extra[0])) TO \(SchemaSQL.quote(name))"
            } else {
                problem += "; rename it back or restore the table"
            }
            problems.append(problem)
        }
        for name in extra {
            problems.append(
                "column \(quoted).\(SchemaSQL.quote(name)) was added by another program and is not in the schema, so its values would "
                    + "never reach other nodes: drop it (ALTER TABLE \(quoted) DROP COLUMN \(SchemaSQL.quote(name))); to sync such a "
                    + "column, declare it as an attribute in a new schema version and let logsync add it on every node")
        }
        for (name, shape) in expected.sorted(by: { $0.key < $1.key }) {
            guard let actual = found[name], actual != shape else { continue }
            problems.append(
                "column \(quoted).\(SchemaSQL.quote(name)) is declared \(describe(shape)) by the schema but \(describe(actual)) in the file "
                    + "(the table was rebuilt by another program): restore the table's definition")
        }
        problems += try indexProblems(info)
        return problems
    }

    private func describe(_ shape: ColumnShape) -> String {
        (shape.type.isEmpty ? "without a type" : shape.type) + (shape.primaryKey ? " PRIMARY KEY" : "") + (shape.notNull ? " NOT NULL" : "")
    }

    /// Unique indexes decide what `REPLACE` deletes: only the schema's own may exist.
    private func indexProblems(_ info: Catalog.EntityInfo) throws -> [String] {
        let quoted = SchemaSQL.quote(info.entity.name)
        var wanted = Set(info.entity.uniqueKeys.map { SchemaSQL.uniqueIndexName(entityID: info.id, columns: $0) })
        var problems: [String] = []
        for row in try connection.rows("SELECT name, \"unique\", origin FROM pragma_index_list(?)", [.text(info.entity.name)]) {
            guard case .text(let name) = row[0], row[1] == .integer(1), row[2] != .text("pk") else { continue }
            if wanted.remove(name) == nil {
                problems.append(
                    "unique index \(SchemaSQL.quote(name)) on \(quoted) was created by another program: a REPLACE that collides on it "
                        + "would delete rows that no node is told about; declare the unique key in the schema or DROP INDEX \(SchemaSQL.quote(name))")
            }
        }
        for name in wanted.sorted() {
            problems.append(
                "unique index \(SchemaSQL.quote(name)) on \(quoted) is missing (dropped by another program): reopen the store to recreate it")
        }
        return problems
    }

    /// Whether every trigger logsync installs is in place exactly as this build generates it.
    func triggersMatch() throws -> Bool { try triggerProblems().isEmpty }

    /// The capture triggers must be exactly the ones this build generates.
    private func triggerProblems() throws -> [String] {
        var wanted: [String: String] = [:]
        for info in catalog.byID.values {
            for statement in SchemaSQL.triggers(for: info, catalog: catalog) {
                if let name = SchemaSQL.triggerName(in: statement) { wanted[name] = statement }
            }
        }
        var problems: [String] = []
        for row in try connection.rows(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_ls\\_t%' ESCAPE '\\'")
        {
            guard case .text(let name) = row[0] else { continue }
            guard let expected = wanted.removeValue(forKey: name) else { continue }
            if row[1] != .text(expected) {
                problems.append("logsync's trigger \(SchemaSQL.quote(name)) was changed by another program: reopen the store to restore it")
            }
        }
        for name in wanted.keys.sorted() {
            problems.append(
                "logsync's trigger \(SchemaSQL.quote(name)) was dropped by another program, so writes since were not recorded in history: "
                    + "reopen the store to restore it")
        }
        return problems
    }
}
