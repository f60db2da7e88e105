import Foundation
import LogsyncCore
import LogsyncSQLite

/// Creates or additively migrates the synced tables for a schema, inside one transaction: either every
/// table, column, trigger and index is in place and the schema version recorded, or nothing changed.
struct SchemaRegistration {
    let connection: Connection
    let schema: Schema

    /// Runs inside the caller's write transaction.
    func run() throws -> Catalog {
        try connection.execute(SchemaSQL.bookkeeping)
        let format = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'format'")
        if let format, format > SchemaSQL.formatVersion {
            throw StoreError(
                .incompatibleFormat,
                "this store was written by a newer logsync (store format \(format), this build reads up to \(SchemaSQL.formatVersion)); upgrade logsync",
                path: connection.path)
        }
        if let format, format < 2 {
            try migrateRowStatesToRowid()
        }
        try connection.execute(SchemaSQL.rowStates)
        // Format 3 adds `_ls_live`, and delete triggers that move its states (installed again below); format 4
        // `_ls_displaced` (created with the bookkeeping tables), exact tombstones and text that is not UTF-8,
        // which older builds would misread; format 5 compact row states, which older builds refuse to read.
        let reinstallsTriggers = (format ?? SchemaSQL.formatVersion) < 3
        if let format, format < SchemaSQL.formatVersion {
            try connection.execute("UPDATE _ls_meta SET value = ? WHERE key = 'format'", [.integer(SchemaSQL.formatVersion)])
        }
        try connection.execute(
            "INSERT OR IGNORE INTO _ls_meta(key, value) VALUES ('format', ?), ('node', ?)",
            [.integer(SchemaSQL.formatVersion), .text(UUID().uuidString.lowercased())])

        let encoded = try Self.encode(schema)
        let stored = try storedSchema()
        if let stored, stored.version > schema.version {
            throw StoreError(
                .schema,
                "the store has schema version \(stored.version), newer than the declared version \(schema.version); "
                    + "open it with the newer app or declare version \(stored.version) or later",
                path: connection.path,
                cause: SchemaError(.versionConflict, at: "version", "declared \(schema.version) < stored \(stored.version)"))
        }
        if let stored {
            // Before anything is migrated: the tables must still be what the stored schema made them.
            try SchemaDrift(connection: connection, schema: stored, catalog: try catalog(for: stored), requiresStrict: (format ?? 0) >= SchemaSQL.strictTablesFormat)
                .check(checkingTriggers: false)
        }
        if let stored, stored.version == schema.version {
            guard try Self.encode(stored) == encoded else {
                throw StoreError(
                    .schema,
                    "schema version \(schema.version) is already registered with a different definition; "
                        + "bump the version to migrate",
                    path: connection.path,
                    cause: SchemaError(.versionConflict, at: "version", "same version, different definition"))
            }
            let catalog = try catalog(for: schema)
            // Triggers another build generated (or another program changed) are replaced by this build's.
            let triggersMatch = try SchemaDrift(connection: connection, schema: schema, catalog: catalog).triggersMatch()
            if reinstallsTriggers || !triggersMatch {
                try installTriggers(catalog)
            }
            if let format, format < 4 { try AliasValues.rebuild(connection: connection, catalog: catalog) }
            if let format, format < SchemaSQL.strictTablesFormat {
                try rebuildStrict(catalog)
                try installTriggers(catalog)
            }
            return catalog
        }
        if let format, format < SchemaSQL.strictTablesFormat, let stored {
            // The tables as the stored schema made them become STRICT first; the migration then adds
            // columns to STRICT tables.
            try rebuildStrict(try catalog(for: stored))
        }
        try migrate(from: stored)
        try connection.execute(
            "INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('schema_version', ?), ('schema', ?)",
            [.integer(Int64(schema.version)), .text(encoded)])
        let catalog = try catalog(for: schema)
        try installTriggers(catalog)
        try moveLiveStates(of: catalog)
        try AliasValues.rebuild(connection: connection, catalog: catalog)
        return catalog
    }

    /// Format 5 → 6: every synced table is rebuilt `STRICT` with its CHECKs (``SchemaSQL/createTable(_:in:named:)``),
    /// rows copied with their rowids (which `_ls_live` keys states by), the app's own indexes and
    /// triggers on the table created again, logsync's triggers dropped first (the caller installs them
    /// again). A row the new table refuses (a blob title, `'yes'` in a bool, a key that is not a UUID)
    /// stops the open with an error that names the table and the rule, and changes nothing: in the same
    /// transaction as the rest of registration.
    private func rebuildStrict(_ catalog: Catalog) throws {
        try dropGenerated()
        // Renaming the new table must not rewrite or check other objects (the app's views may name the table).
        try connection.execute("PRAGMA legacy_alter_table = ON")
        defer { try? connection.execute("PRAGMA legacy_alter_table = OFF") }
        for info in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
            let table = info.entity.name
            let quoted = SchemaSQL.quote(table)
            let own = try connection.rows(
                "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL AND name NOT LIKE '\\_ls\\_%' ESCAPE '\\'",
                [.text(table)]
            ).compactMap { row -> String? in
                if case .text(let sql) = row[0] { return sql }
                return nil
            }
            let columns = ([info.primaryKey.name] + info.columns).map(SchemaSQL.quote).joined(separator: ", ")
            let temporary = "_ls_strict_\(info.id)"
            try connection.execute("DROP TABLE IF EXISTS \(SchemaSQL.quote(temporary))")
            try connection.execute(SchemaSQL.createTable(info.entity, in: catalog.schema, named: temporary))
            do {
                try connection.execute(
                    "INSERT INTO \(SchemaSQL.quote(temporary))(rowid, \(columns)) SELECT rowid, \(columns) FROM \(quoted) ORDER BY rowid")
            } catch {
                let detail = (Store.mapped(error, path: connection.path, doing: "copying \(quoted)")?.message) ?? "\(error)"
                throw StoreError(
                    .schema,
                    "this logsync keeps synced tables STRICT, with the declared types checked for every writer, but \(quoted) holds a value "
                        + "its declared type does not allow (\(detail)); another program stored it. Find the row with sqlite3 (for example "
                        + "SELECT rowid, * FROM \(quoted) WHERE typeof(<column>) NOT IN ('<type>', 'null')), correct or delete it, "
                        + "and open the store again; nothing was changed",
                    path: connection.path, cause: error)
            }
            try connection.execute("DROP TABLE \(quoted)")
            try connection.execute("ALTER TABLE \(SchemaSQL.quote(temporary)) RENAME TO \(quoted)")
            for statement in own { try connection.execute(statement) }
        }
    }

    /// Drops logsync's generated triggers, views and unique indexes, which name the tables' columns; the
    /// caller installs them again (``installTriggers(_:)``).
    private func dropGenerated() throws {
        for row in try connection.rows(
            "SELECT type, name FROM sqlite_master WHERE (type = 'trigger' AND name LIKE '\\_ls\\_t%' ESCAPE '\\') "
                + "OR (type = 'view' AND name LIKE '\\_ls\\_v%' ESCAPE '\\') OR (type = 'index' AND name LIKE '\\_ls\\_uq%' ESCAPE '\\')")
        {
            guard case .text(let type) = row[0], case .text(let name) = row[1] else { continue }
            let kind = type == "view" ? "VIEW" : type == "index" ? "INDEX" : "TRIGGER"
            try connection.execute("DROP \(kind) IF EXISTS \(SchemaSQL.quote(name))")
        }
    }

    /// Only rows of isolated entities keep their states in `_ls_live` (the merge inserts the others through
    /// the general projection): an entity that gained a relationship or a unique key moves them to `_ls_row`.
    private func moveLiveStates(of catalog: Catalog) throws {
        let range = SchemaSQL.liveRange(entity: "?1")
        for info in catalog.byID.values where !info.isIsolated {
            try connection.execute(
                "INSERT OR IGNORE INTO _ls_row(entity, pk, cl, state) SELECT ?1, pk, cl, state FROM _ls_live WHERE \(range)",
                [.integer(info.id)])
            try connection.execute("DELETE FROM _ls_live WHERE \(range)", [.integer(info.id)])
        }
    }

    /// Format 1 → 2: `_ls_row` becomes a rowid table with a unique index on (entity, pk)
    /// (``SchemaSQL/rowStates`` says why). The states are copied unchanged, in key order; like the rest of
    /// registration this runs in the opening transaction, so a crash leaves either format, never a mix.
    private func migrateRowStatesToRowid() throws {
        try connection.execute(
            """
            ALTER TABLE _ls_row RENAME TO _ls_row_v1;
            \(SchemaSQL.rowStates)
            INSERT INTO _ls_row(entity, pk, cl, state) SELECT entity, pk, cl, state FROM _ls_row_v1 ORDER BY entity, pk;
            DROP TABLE _ls_row_v1;
            UPDATE _ls_meta SET value = 2 WHERE key = 'format';
            """)
    }

    private func storedSchema() throws -> Schema? {
        guard case .text(let json)? = try connection.scalar("SELECT value FROM _ls_meta WHERE key = 'schema'") else {
            return nil
        }
        return try JSONDecoder().decode(Schema.self, from: Data(json.utf8))
    }

    static func encode(_ schema: Schema) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(schema), as: UTF8.self)
    }

    /// The registered entities (`_ls_entity`), described by `schema`.
    private func catalog(for schema: Schema) throws -> Catalog {
        let rows = try connection.rows("SELECT id, name, columns FROM _ls_entity ORDER BY id")
        var registered: [(id: Int64, name: String, columns: [String])] = []
        for row in rows {
            guard case .integer(let id) = row[0], case .text(let name) = row[1], case .text(let columns) = row[2] else {
                continue
            }
            let names = try JSONDecoder().decode([String].self, from: Data(columns.utf8))
            registered.append((id, name, names))
        }
        return Catalog(schema: schema, registered: registered)
    }

    private func migrate(from stored: Schema?) throws {
        // What a store cannot migrate is what `logsync schema check` calls unsafe: one set of rules.
        // A store may skip a release: contracting what it never saw deprecated is unsafe only for a fleet.
        if let stored, let refusal = SchemaCheck(from: stored, to: schema).findings.first(where: { $0.severity == .unsafe && !$0.onlyForFleets }) {
            throw notAdditive(refusal.location, "\(refusal.reason); \(refusal.advice)")
        }
        try renameTables(from: stored)
        for entity in schema.entities {
            // The same entity is the one with the same name in the log: a rename keeps it.
            if var old = stored?.entity(logName: entity.logName) {
                old.name = entity.name
                try extend(entity, from: old)
            } else {
                try create(entity)
            }
        }
    }

    /// Renames the tables of entities the schema renamed (``Entity/renamingIdentifier``), and their
    /// `_ls_entity` rows, which keep their ids: history, row states and references stay theirs. Through
    /// temporary names, so that renames that take each other's names never meet a name in use; logsync's
    /// triggers and views, which name the tables, are dropped first and installed again after. SQLite
    /// rewrites the app's own views and triggers that name a renamed table.
    private func renameTables(from stored: Schema?) throws {
        let renamed = schema.entities.compactMap { entity -> (from: String, to: String)? in
            guard let old = stored?.entity(logName: entity.logName), old.name != entity.name else { return nil }
            return (old.name, entity.name)
        }
        guard !renamed.isEmpty else { return }
        try dropGenerated()
        func renameTable(_ from: String, _ to: String) throws {
            do {
                try connection.execute("ALTER TABLE \(SchemaSQL.quote(from)) RENAME TO \(SchemaSQL.quote(to))")
            } catch {
                throw StoreError(
                    .schema,
                    "the schema renames entity '\(from)' to '\(to)', but the table cannot be renamed (\(error.message)); a table of that name "
                        + "that logsync does not manage, or a view of the app's own, may be in the way; nothing was changed",
                    path: connection.path, cause: error)
            }
            try connection.execute("UPDATE _ls_entity SET name = ? WHERE name = ?", [.text(to), .text(from)])
        }
        for (index, rename) in renamed.enumerated() { try renameTable(rename.from, "_ls_renaming_table_\(index)") }
        for (index, rename) in renamed.enumerated() { try renameTable("_ls_renaming_table_\(index)", rename.to) }
    }

    private func create(_ entity: Entity) throws {
        let exists = try connection.scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", [.text(entity.name)])
        guard exists == nil else {
            throw StoreError(
                .schema,
                "a table named '\(entity.name)' already exists in the store but is not managed by logsync; "
                    + "rename the entity or move the table's data into a logsync store",
                path: connection.path)
        }
        try connection.execute(SchemaSQL.createTable(entity, in: schema))
        try connection.execute(
            "INSERT INTO _ls_entity(name, columns) VALUES (?, ?)",
            [.text(entity.name), .text(try Self.encodeColumns(entity.columnNames))])
    }

    /// Renames and adds the columns of an existing entity, the change `migrate(from:)` has checked.
    private func extend(_ entity: Entity, from old: Entity) throws {
        // The same attribute is the one with the same name in the log: a rename keeps it.
        let renamed = old.attributes.compactMap { attribute -> (from: String, to: String)? in
            guard let current = entity.attributes.first(where: { $0.logName == attribute.logName }), current.name != attribute.name else { return nil }
            return (attribute.name, current.name)
        }
        // A renamed column keeps its place, and so its bit in history and row states; SQLite renames it in the
        // table's indexes too, and the triggers are generated again after the migration.
        // Through temporary names first, so that renames that take each other's names (a to b, b to c; a
        // swap) never meet a name still in use.
        let (id, registeredColumns) = try registered(entity)
        var columns = registeredColumns
        // Contracted attributes go first, under the names the stored schema gave them.
        let contracted = old.attributes.filter { entity.contracted.contains($0.logName) }.map(\.name)
        if !contracted.isEmpty {
            try dropGenerated()
            columns = try Contraction(connection: connection, entityID: id, entity: old, columns: columns).run(removing: contracted)
        }
        let table = SchemaSQL.quote(entity.name)
        for (index, rename) in renamed.enumerated() {
            try connection.execute("ALTER TABLE \(table) RENAME COLUMN \(SchemaSQL.quote(rename.from)) TO \(SchemaSQL.quote("_ls_renaming_\(index)"))")
        }
        for (index, rename) in renamed.enumerated() {
            try connection.execute("ALTER TABLE \(table) RENAME COLUMN \(SchemaSQL.quote("_ls_renaming_\(index)")) TO \(SchemaSQL.quote(rename.to))")
        }
        columns = columns.map { name in renamed.first { $0.from == name }?.to ?? name }
        let oldColumns = Set(old.columnNames.filter { !contracted.contains($0) }.map { name in renamed.first { $0.from == name }?.to ?? name })
        var added: [String] = []
        for attribute in entity.attributes where !oldColumns.contains(attribute.name) {
            try connection.execute("ALTER TABLE \(SchemaSQL.quote(entity.name)) ADD COLUMN \(SchemaSQL.columnDefinition(attribute))")
            added.append(attribute.name)
        }
        for relationship in entity.relationships where !oldColumns.contains(relationship.name) {
            try connection.execute(
                "ALTER TABLE \(SchemaSQL.quote(entity.name)) ADD COLUMN \(SchemaSQL.relationshipDefinition(relationship, in: schema))")
            added.append(relationship.name)
        }
        guard !added.isEmpty || !renamed.isEmpty || !contracted.isEmpty else { return }
        columns += added
        guard columns.count <= Schema.maximumColumnsPerEntity else {
            throw notAdditive(entity.name, "'\(entity.name)' would have \(columns.count) columns; at most \(Schema.maximumColumnsPerEntity)")
        }
        try connection.execute(
            "UPDATE _ls_entity SET columns = ? WHERE name = ?", [.text(try Self.encodeColumns(columns)), .text(entity.name)])
        try convert(entity, id: id, from: old, added: added, columns: columns)
    }

    /// Attributes converted in place (``Attribute/convertedFrom``): the new columns, just added, take the
    /// sources' values and registers, converted (``TypeChange``), and the sources are contracted.
    private func convert(_ entity: Entity, id: Int64, from old: Entity, added: [String], columns: [String]) throws {
        let conversions = entity.attributes.compactMap { attribute -> (source: Attribute, target: Attribute)? in
            guard let conversion = attribute.convertedFrom, added.contains(attribute.name),
                let source = old.attributes.first(where: { $0.logName == conversion.attribute })
            else { return nil }
            return (source, attribute)
        }
        guard !conversions.isEmpty else { return }
        try dropGenerated()
        var both = entity
        both.attributes += conversions.map(\.source)
        let info = Catalog.EntityInfo.alone(both, id: id, columns: columns)
        try TypeChange(connection: connection, entityID: id, info: info, conversions: conversions).run()
        let remaining = try Contraction(connection: connection, entityID: id, entity: both, columns: columns)
            .run(removing: conversions.map(\.source.name))
        try connection.execute(
            "UPDATE _ls_entity SET columns = ? WHERE name = ?", [.text(try Self.encodeColumns(remaining)), .text(entity.name)])
    }

    /// `entity`'s id and columns in bit order, as `_ls_entity` registers them.
    private func registered(_ entity: Entity) throws -> (id: Int64, columns: [String]) {
        let rows = try connection.rows("SELECT id, columns FROM _ls_entity WHERE name = ?", [.text(entity.name)])
        guard let row = rows.first, case .integer(let id) = row[0], case .text(let json) = row[1] else {
            throw notAdditive(entity.name, "'\(entity.name)' is in the stored schema but not registered")
        }
        return (id, try JSONDecoder().decode([String].self, from: Data(json.utf8)))
    }

    /// Replaces every generated trigger and unique index with the ones the catalog calls for.
    private func installTriggers(_ catalog: Catalog) throws {
        let generated = try connection.rows(
            "SELECT type, name FROM sqlite_master WHERE (type = 'trigger' AND name LIKE '\\_ls\\_t%' ESCAPE '\\') "
                + "OR (type = 'view' AND name LIKE '\\_ls\\_v%' ESCAPE '\\') "
                + "OR (type = 'index' AND name LIKE '\\_ls\\_uq%' ESCAPE '\\')")
        var wantedIndexes: [String: String] = [:]
        for info in catalog.byID.values {
            for columns in info.entity.uniqueKeys {
                let name = SchemaSQL.uniqueIndexName(entityID: info.id, columns: columns)
                wantedIndexes[name] = SchemaSQL.createUniqueIndex(info.entity, entityID: info.id, columns: columns)
            }
        }
        for row in generated {
            guard case .text(let type) = row[0], case .text(let name) = row[1] else { continue }
            if type == "trigger" {
                try connection.execute("DROP TRIGGER IF EXISTS \(SchemaSQL.quote(name))")
            } else if type == "view" {
                try connection.execute("DROP VIEW \(SchemaSQL.quote(name))")
            } else if wantedIndexes[name] == nil {
                try connection.execute("DROP INDEX \(SchemaSQL.quote(name))")
            }
        }
        for info in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
            try connection.execute(SchemaSQL.createDisplacementView(info))
            for statement in SchemaSQL.triggers(for: info, catalog: catalog) {
                try connection.execute(statement)
            }
        }
        for statement in wantedIndexes.values.sorted() {
            try connection.execute(statement)
        }
    }

    private func notAdditive(_ location: String, _ message: String) -> StoreError {
        StoreError(.schema, message, path: connection.path, cause: SchemaError(.notAdditive, at: location, message))
    }

    static func encodeColumns(_ columns: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(columns), as: UTF8.self)
    }
}
