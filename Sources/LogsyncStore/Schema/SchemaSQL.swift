import LogsyncCore
import LogsyncSQLite

/// The SQL that logsync installs in a store: its own bookkeeping tables, the synced tables, and the
/// triggers that capture history and enforce delete rules.
///
/// Capture uses triggers, not SQLite's pre-update hook or session extension, because only triggers see
/// writes from processes that do not load logsync (the `sqlite3` shell, a Python script). See
/// `docs/history.md`.
enum SchemaSQL {
    /// Bumped when logsync's own tables change shape; `SchemaRegistration` migrates older stores.
    ///
    /// - 1: `_ls_row` keyed by (entity, pk), `WITHOUT ROWID`.
    /// - 2: `_ls_row` is a rowid table with a unique index on (entity, pk) (``rowStates``).
    /// - 3: states of rows an import inserted live in `_ls_live`, by the table row's rowid; delete triggers
    ///   move them to `_ls_row` (``rowStates``).
    /// - 4: rows deleted by `REPLACE` are recorded through `_ls_displaced` (``displacementTriggers(for:catalog:)``);
    ///   tombstones keep every value exactly; row states and history may hold text that is not valid UTF-8;
    ///   `_ls_alias_value` finds hidden unique-key losers by value (entities with two or more unique keys).
    /// - 5: a row state whose registers share one clock stores it once, and one with a register per column
    ///   leaves out the column bits (``RowStateCoding``). Nothing is rewritten: format-4 states read the same.
    /// - 6: synced tables are `STRICT`, with `CHECK` constraints for the types SQLite has no storage class
    ///   for (bool, UUID text, UUID blob, and UUID keys): older stores' tables are rebuilt once when they
    ///   open (``SchemaRegistration``), rowids kept.
    /// - 7: `_ls_kept` holds the parts of other nodes' transactions written under a newer schema that this
    ///   store does not declare yet (``SyncLedger/applyKeptChanges(limits:)``); older builds would ignore them.
    ///   `_ls_peer_schema` the newest schema version each node writes with (segment headers, progress records).
    static let formatVersion: Int64 = 7
    /// The first format whose synced tables are `STRICT`.
    static let strictTablesFormat: Int64 = 6

    /// The kind of an `_ls_log` row holding a run of inserts of one entity, their keys packed in `pk`: written
    /// only by the merge with triggers off (`MergeCapture.swift`), read as one insert per key.
    static let packedInsertsKind: Int64 = 4

    /// The history log: change rows (kind 1–3) appended by triggers, closed by a commit marker (kind 0)
    /// that carries the transaction's clock, author, context and origin. A marker's `seq` is the token.
    static let bookkeeping = """
        CREATE TABLE IF NOT EXISTS _ls_meta(key TEXT PRIMARY KEY NOT NULL, value);
        CREATE TABLE IF NOT EXISTS _ls_entity(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            columns TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS _ls_log(
            seq INTEGER PRIMARY KEY,
            kind INTEGER NOT NULL,
            entity INTEGER,
            pk,
            cols INTEGER,
            tomb TEXT,
            hlc INTEGER,
            author TEXT,
            context TEXT,
            origin TEXT
        );
        CREATE TABLE IF NOT EXISTS _ls_state(id INTEGER PRIMARY KEY CHECK (id = 1), merging INTEGER NOT NULL);
        INSERT OR IGNORE INTO _ls_state(id, merging) VALUES (1, 0);
        CREATE TABLE IF NOT EXISTS _ls_node(idx INTEGER PRIMARY KEY, node TEXT NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS _ls_ref(
            target_entity INTEGER NOT NULL,
            target NOT NULL,
            entity INTEGER NOT NULL,
            pk NOT NULL,
            PRIMARY KEY (target_entity, target, entity, pk)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS _ls_alias(
            entity INTEGER NOT NULL,
            pk NOT NULL,
            survivor NOT NULL,
            PRIMARY KEY (entity, pk)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS _ls_alias_survivor ON _ls_alias(entity, survivor);
        CREATE TABLE IF NOT EXISTS _ls_alias_value(
            entity INTEGER NOT NULL,
            key INTEGER NOT NULL,
            vals BLOB NOT NULL,
            pk NOT NULL,
            PRIMARY KEY (entity, key, vals, pk)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS _ls_alias_value_pk ON _ls_alias_value(entity, pk);
        CREATE TABLE IF NOT EXISTS _ls_outbox(
            first_seq INTEGER PRIMARY KEY,
            last_seq INTEGER NOT NULL,
            bytes BLOB NOT NULL,
            shipped INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE IF NOT EXISTS _ls_cursor(
            node TEXT PRIMARY KEY NOT NULL,
            last_seq INTEGER NOT NULL,
            last_hlc INTEGER NOT NULL,
            applied_at INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS _ls_segment(
            node TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            checksum INTEGER NOT NULL,
            PRIMARY KEY (node, first_seq)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS _ls_displaced(
            entity INTEGER NOT NULL,
            newpk NOT NULL,
            pk NOT NULL,
            rid INTEGER NOT NULL,
            tomb TEXT,
            PRIMARY KEY (entity, newpk, pk)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS _ls_displaced_pk ON _ls_displaced(entity, pk);
        CREATE TABLE IF NOT EXISTS _ls_quarantine(
            id INTEGER PRIMARY KEY,
            node TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            reason TEXT NOT NULL,
            location TEXT NOT NULL,
            at INTEGER NOT NULL,
            UNIQUE (node, first_seq, last_seq, location)
        );
        CREATE TABLE IF NOT EXISTS _ls_refused(
            node TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            checksum INTEGER NOT NULL,
            reason TEXT NOT NULL,
            location TEXT NOT NULL,
            at INTEGER NOT NULL,
            PRIMARY KEY (node, first_seq, last_seq)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS _ls_kept(
            node TEXT NOT NULL,
            seq INTEGER NOT NULL,
            schema_version INTEGER NOT NULL,
            looked_at INTEGER NOT NULL,
            segment BLOB NOT NULL,
            UNIQUE (node, seq)
        );
        CREATE INDEX IF NOT EXISTS _ls_kept_looked_at ON _ls_kept(looked_at);
        CREATE TABLE IF NOT EXISTS _ls_peer_schema(node TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS _ls_dropped(
            node TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            checksum INTEGER NOT NULL,
            reason TEXT NOT NULL,
            at INTEGER NOT NULL,
            PRIMARY KEY (node, first_seq, last_seq)
        ) WITHOUT ROWID;
        """

    /// The merge's row states (`docs/merge.md`), one per row ever seen, each in one of two tables.
    ///
    /// `_ls_live` holds the states of rows an import inserted (most rows a node ever receives), for as long
    /// as the row stays in the table, updated in place when it changes, keyed by the rowid of the row in its
    /// synced table. The table's own primary-key index finds them: storing such a state appends to
    /// `_ls_live` instead of adding a second random entry to a key index, which took about a third of an
    /// import (`docs/BENCHMARKS-history.md`, replay). A live state also records its key, and counts only
    /// while the row at that rowid has that key.
    ///
    /// `_ls_row` holds every other state (deleted, hidden, or first written locally), found by
    /// (entity, pk) through `_ls_row_key`. A live state moves there when its row leaves the table (the
    /// delete trigger moves it), never back.
    ///
    /// A rowid changes without a delete when another program replaces a row (`INSERT OR REPLACE` without
    /// `recursive_triggers`), sets a rowid, or runs `VACUUM`; the live state is then an orphan, which a
    /// sync transaction moves to `_ls_row` once it sees the schema cookie change (`VACUUM` bumps it)
    /// and whenever an import needs its rowid (`LiveStates.swift`).
    ///
    /// `_ls_row` is not keyed by (entity, pk) itself: keys are random (UUIDs), so in a table clustered on
    /// them every new state lands on a different page, and every import batch rewrote about one 4 KiB page
    /// per new row in the WAL, for states of 100–200 bytes. With a rowid, new states are appended to the
    /// end of the table, and only the index, whose entries are a third the size, takes random inserts.
    static let rowStates = """
        CREATE TABLE IF NOT EXISTS _ls_row(
            id INTEGER PRIMARY KEY,
            entity INTEGER NOT NULL,
            pk NOT NULL,
            cl INTEGER NOT NULL,
            state BLOB NOT NULL
        );
        CREATE UNIQUE INDEX IF NOT EXISTS _ls_row_key ON _ls_row(entity, pk);
        CREATE TABLE IF NOT EXISTS _ls_live(
            id INTEGER PRIMARY KEY,
            pk NOT NULL,
            cl INTEGER NOT NULL,
            state BLOB NOT NULL
        );
        """

    /// A state's key in `_ls_live`: the entity id in the high bits, the row's rowid in the low
    /// ``liveRowIDBits`` bits (a plain rowid table, so appends fill pages; a `WITHOUT ROWID` table keyed on
    /// (entity, rowid) splits them half full and cost twice as much per state). Rows whose rowid does not
    /// fit (set by hand above 2^40) keep their states in `_ls_row`.
    static let liveRowIDBits: Int64 = 40

    /// The `_ls_live` key of the row at `rowID` of entity `entityID`, nil when it has none.
    static func liveID(entity entityID: Int64, rowID: Int64) -> Int64? {
        guard rowID > 0, rowID < (1 << liveRowIDBits), entityID >= 0, entityID < (1 << (62 - liveRowIDBits)) else { return nil }
        return entityID << liveRowIDBits | rowID
    }

    /// SQL that holds for the `_ls_live` keys of entity `entity` (an SQL expression), in column `id`.
    static func liveRange(entity: String, id: String = "id") -> String {
        "\(id) BETWEEN \(entity) << \(liveRowIDBits) AND ((\(entity) + 1) << \(liveRowIDBits)) - 1"
    }

    /// SQL for the `_ls_live` key of the row whose rowid is `rowID` (an SQL expression) in entity
    /// `entity` (an SQL expression): NULL when it has none.
    static func liveID(entity: String, rowID: String) -> String {
        "(CASE WHEN \(rowID) BETWEEN 1 AND \((1 << liveRowIDBits) - 1) THEN (\(entity) << \(liveRowIDBits)) | \(rowID) END)"
    }

    /// Delete-rule triggers stand aside while the merge writes the projection: the merge applies the same
    /// rules itself, order-independently (see `docs/merge.md`). The flag is only ever set inside the
    /// merge's own uncommitted transaction, so every other writer sees 0.
    static let unlessMerging = "(SELECT merging FROM _ls_state WHERE id = 1) = 0"

    static func quote(_ identifier: String) -> String { SQLIdentifier.quoted(identifier) }

    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    static func columnType(_ type: AttributeType) -> String {
        switch type {
        case .text, .uuid: return "TEXT"
        case .integer, .bool: return "INTEGER"
        case .real, .date: return "REAL"
        case .blob, .uuidBlob: return "BLOB"
        }
    }

    /// A CHECK that keeps keys globally unique in shape, whoever writes the row.
    static func keyCheck(_ key: PrimaryKey) -> String {
        let column = quote(key.name)
        switch key.type {
        case .uuidBlob: return "CHECK (typeof(\(column)) = 'blob' AND length(\(column)) = 16)"
        default: return "CHECK (\(uuidShape(column)))"
        }
    }

    /// A UUID as 36 bytes of text, hex digits of either case in groups 8-4-4-4-12: the same test as the
    /// merge's (`ChangeRules`), so that a key or reference one node stores is one every node accepts.
    /// `GLOB` stops at a NUL character; the byte length does not.
    static func uuidShape(_ column: String) -> String {
        let hex = "[0-9a-fA-F]"
        let pattern = [8, 4, 4, 4, 12].map { String(repeating: hex, count: $0) }.joined(separator: "-")
        return "typeof(\(column)) = 'text' AND length(CAST(\(column) AS BLOB)) = 36 AND \(column) GLOB '\(pattern)'"
    }

    /// The CHECK a column of `type` needs beyond its `STRICT` storage class, if any: bool is 0 or 1, a
    /// UUID has its shape. NULL passes (NOT NULL says whether it may be NULL).
    static func valueCheck(_ column: String, _ type: AttributeType) -> String? {
        switch type {
        case .bool: return "CHECK (\(column) IN (0, 1))"
        case .uuid: return "CHECK (\(column) IS NULL OR (\(uuidShape(column))))"
        case .uuidBlob: return "CHECK (\(column) IS NULL OR length(\(column)) = 16)"
        case .text, .integer, .real, .blob, .date: return nil
        }
    }

    static func columnDefinition(_ attribute: Attribute) -> String {
        var sql = "\(quote(attribute.name)) \(columnType(attribute.type))"
        if !attribute.optional { sql += " NOT NULL" }
        if let check = valueCheck(quote(attribute.name), attribute.type) { sql += " " + check }
        if let value = attribute.defaultValue {
            switch value {
            case .integer(let v): sql += " DEFAULT \(v)"
            case .real(let v): sql += " DEFAULT \(v)"
            case .text(let v): sql += " DEFAULT \(literal(v))"
            }
        }
        return sql
    }

    static func relationshipDefinition(_ relationship: Relationship, in schema: Schema) -> String {
        let type = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
        let column = quote(relationship.name)
        return "\(column) \(columnType(type))" + (valueCheck(column, type).map { " " + $0 } ?? "")
    }

    /// A synced table: `STRICT`, so that no writer stores a value of another storage class than the
    /// declared type's (SQLite converts what converts losslessly: an integer date becomes REAL, the text
    /// `'1'` in an INTEGER column 1), with the CHECKs of ``valueCheck(_:_:)`` and ``keyCheck(_:)``.
    static func createTable(_ entity: Entity, in schema: Schema, named name: String? = nil) -> String {
        let key = entity.primaryKey!
        var columns = ["\(quote(key.name)) \(columnType(key.type)) PRIMARY KEY NOT NULL \(keyCheck(key))"]
        columns += entity.attributes.map(columnDefinition)
        columns += entity.relationships.map { relationshipDefinition($0, in: schema) }
        return "CREATE TABLE \(quote(name ?? entity.name)) (\n  " + columns.joined(separator: ",\n  ") + "\n) STRICT"
    }

    /// Every trigger (and the reference indexes they use) logsync installs for an entity, in order. The
    /// displacement triggers come after the capture triggers: SQLite runs the triggers of one event newest
    /// first, so a replaced row's delete is recorded before the insert that replaced it.
    static func triggers(for info: Catalog.EntityInfo, catalog: Catalog) -> [String] {
        captureTriggers(for: info) + deleteRuleTriggers(for: info, catalog: catalog) + displacementTriggers(for: info, catalog: catalog)
    }

    /// The name a generated `CREATE TRIGGER "name" …` statement creates; nil for other statements.
    static func triggerName(in statement: String) -> String? {
        let prefix = "CREATE TRIGGER \""
        guard statement.hasPrefix(prefix) else { return nil }
        return statement.dropFirst(prefix.count).split(separator: "\"", maxSplits: 1).first.map(String.init)
    }

    /// Names of everything logsync generates for an entity start with `_ls_` and carry the entity's
    /// numeric id, so they never collide with each other or with the user's own objects.
    static func triggerPrefix(_ entityID: Int64) -> String { "_ls_t\(entityID)_" }

    /// History capture for one entity: insert, update (changed columns only), delete (with tombstone), a
    /// guard against changing the primary key, which would break the row's identity across devices, and
    /// the move of a row's live state when another program changes its rowid (`UPDATE … SET rowid`): the
    /// state is found by rowid, so it would be left behind as an orphan that an import takes for a key it
    /// has never seen (`docs/merge.md`).
    static func captureTriggers(for info: Catalog.EntityInfo) -> [String] {
        let table = quote(info.entity.name)
        let key = quote(info.primaryKey.name)
        let live = liveID(entity: "\(info.id)", rowID: "OLD.rowid")
        let prefix = triggerPrefix(info.id)
        let changedMask: String =
            info.columns.isEmpty
            ? "0"
            : info.columns.enumerated().map { bit, name in
                let test = "(OLD.\(quote(name)) IS NOT NEW.\(quote(name)))"
                return bit == 0 ? test : "(\(test) << \(bit))"
            }.joined(separator: " | ")
        let tombstone = tombstone(of: info.entity, row: "OLD")
        return [
            """
            CREATE TRIGGER "\(prefix)insert" AFTER INSERT ON \(table) BEGIN
              INSERT INTO _ls_log(kind, entity, pk, cols) VALUES (1, \(info.id), NEW.\(key), \(info.allColumnsMask));
            END
            """,
            """
            CREATE TRIGGER "\(prefix)update" AFTER UPDATE ON \(table) BEGIN
              INSERT INTO _ls_log(kind, entity, pk, cols)
                SELECT 2, \(info.id), NEW.\(key), m FROM (SELECT \(changedMask) AS m) WHERE m != 0;
            END
            """,
            """
            CREATE TRIGGER "\(prefix)delete" AFTER DELETE ON \(table) BEGIN
              INSERT INTO _ls_log(kind, entity, pk, cols, tomb) VALUES (3, \(info.id), OLD.\(key), 0, \(tombstone));
              \(moveLiveState(entity: "\(info.id)", id: live, key: "OLD.\(key)"));
              DELETE FROM _ls_live WHERE id = \(live) AND pk = OLD.\(key);
              DELETE FROM _ls_displaced WHERE entity = \(info.id) AND pk = OLD.\(key);
            END
            """,
            """
            CREATE TRIGGER "\(prefix)rowid" AFTER UPDATE OF rowid, oid, _rowid_ ON \(table)
              WHEN NEW.rowid IS NOT OLD.rowid BEGIN
              \(moveLiveState(entity: "\(info.id)", id: live, key: "OLD.\(key)"));
              DELETE FROM _ls_live WHERE id = \(live) AND pk = OLD.\(key);
            END
            """,
            """
            CREATE TRIGGER "\(prefix)key" BEFORE UPDATE OF \(key) ON \(table)
              WHEN OLD.\(key) IS NOT NEW.\(key) BEGIN
              SELECT RAISE(ABORT, \(literal("logsync: the primary key of \(info.entity.name) cannot change; delete the row and insert a new one")));
            END
            """,
        ]
    }

    /// The tombstone a delete records in history: the attributes preserved on delete, as a JSON object,
    /// read from the row named `row` (`OLD` in a trigger, the table itself before a delete), or NULL.
    ///
    /// Each value is exact whatever it holds (`HistoryReader.decodeTombstone` reads it back): NULL stays
    /// null, other values are a pair of their storage class and a text form that cannot lose anything —
    /// `["i", "-9223372036854775808"]`, `["r", "0.30000000000000004"]` (17 significant digits),
    /// `["t", "<hex of the bytes>"]` (text with NULs, or not valid UTF-8, survives), `["b", "<hex>"]`.
    static func tombstone(of entity: Entity, row: String) -> String {
        let preserved = entity.attributes.filter(\.preservedOnDelete)
        guard !preserved.isEmpty else { return "NULL" }
        return "json_object("
            + preserved.map { attribute in
                "\(literal(attribute.name)), \(tombstoneValue("\(row).\(quote(attribute.name))"))"
            }.joined(separator: ", ") + ")"
    }

    /// One value of a tombstone, as described at ``tombstone(of:row:)``.
    static func tombstoneValue(_ value: String) -> String {
        "CASE typeof(\(value)) WHEN 'null' THEN NULL WHEN 'integer' THEN json_array('i', CAST(\(value) AS TEXT)) "
            + "WHEN 'real' THEN json_array('r', printf('%!.17g', \(value))) WHEN 'text' THEN json_array('t', hex(\(value))) "
            + "ELSE json_array('b', hex(\(value))) END"
    }

    /// Moves a deleted row's state from `_ls_live` (key `id`, holding primary key `key`; SQL expressions)
    /// to `_ls_row`, unless `_ls_row` already has one. The caller deletes it from `_ls_live`.
    static func moveLiveState(entity: String, id: String, key: String) -> String {
        "INSERT OR IGNORE INTO _ls_row(entity, pk, cl, state) SELECT \(entity), pk, cl, state FROM _ls_live WHERE id = \(id) AND pk = \(key)"
    }

    /// Rows that `REPLACE` conflict resolution deletes — on the primary key, a unique key or the rowid, in
    /// an `INSERT` or an `UPDATE`, from any connection — recorded as deletes, with their tombstones, their
    /// live states moved and the delete rules of rows referring to them applied, exactly as the delete
    /// trigger and the rule triggers would for an explicit delete. SQLite fires delete triggers for such
    /// rows only on connections that turned `recursive_triggers` on, so without these a foreign writer's
    /// `INSERT OR REPLACE` would remove a row no history records (`docs/history.md`, "Implicit deletes").
    ///
    /// - A `BEFORE` trigger probes the key, each unique key and an explicit rowid for a collision, before
    ///   SQLite resolves it, and has the colliding rows noted in `_ls_displaced` (keyed by the incoming key).
    /// - An `AFTER` trigger of the same event fires only if the row was written — so a collision was
    ///   resolved by `REPLACE`, not `IGNORE`, an upsert, `FAIL` or `ABORT` — and, when there are notes for
    ///   the row, has the noted rows that are gone recorded. With `recursive_triggers` on, the delete
    ///   trigger has already recorded them and removed their notes, so nothing is recorded twice.
    /// - A note left by a statement that did not replace (an ignored insert, an upsert) is harmless: the row
    ///   it names still exists, or its delete removed the note; sync transactions clear them all.
    ///
    /// Two things keep their cost off the write path (`docs/BENCHMARKS-history.md`, capture). SQLite sets up a
    /// trigger's whole program for every row it fires on, even when its `WHEN` is false, so each per-row
    /// trigger only inserts one row into a view of the entity's own (`_ls_v<id>`), whose `INSTEAD OF`
    /// trigger does the work. And their `WHEN` starts with `NEW.<key> IS NOT NULL`, which logsync's own
    /// connections — they turn `recursive_triggers` on, so their `REPLACE`s fire the delete trigger — compile
    /// to NULL (``isDisplacementTrigger(_:)``).
    static func displacementTriggers(for info: Catalog.EntityInfo, catalog: Catalog) -> [String] {
        let table = quote(info.entity.name)
        let key = quote(info.primaryKey.name)
        let prefix = triggerPrefix(info.id)
        let view = quote(displacementView(info.id))
        let uniqueColumns = displacementColumns(info)
        // Collisions of the incoming values (`NEW` here, the view's row in the job) with a row `T`.
        let keyProbes = info.entity.uniqueKeys.map { columns in
            "EXISTS (SELECT 1 FROM \(table) T WHERE " + columns.map { "T.\(quote($0)) = NEW.\(quote($0))" }.joined(separator: " AND ")
        }
        let insertProbes = ["EXISTS (SELECT 1 FROM \(table) T WHERE T.\(key) = NEW.\(key))"] + keyProbes.map { $0 + ")" }
            + ["(NEW.rowid <> -1 AND EXISTS (SELECT 1 FROM \(table) T WHERE T.rowid = NEW.rowid AND T.\(key) IS NOT NEW.\(key)))"]
        let updateProbes = keyProbes.map { $0 + " AND T.\(key) IS NOT NEW.\(key))" }
            + ["(NEW.rowid IS NOT OLD.rowid AND EXISTS (SELECT 1 FROM \(table) T WHERE T.rowid = NEW.rowid AND T.\(key) IS NOT NEW.\(key)))"]
        let updatedColumns = (uniqueColumns.map(quote) + ["rowid", "oid", "_rowid_"]).joined(separator: ", ")
        let columns = (["_ls_step", "_ls_newpk", "_ls_newrowid", "_ls_oldrowid"] + uniqueColumns.map(quote)).joined(separator: ", ")
        func job(_ step: Int, oldRowid: String = "NULL") -> String {
            let values = ["\(step)", "NEW.\(key)", "NEW.rowid", oldRowid] + uniqueColumns.map { "NEW.\(quote($0))" }
            return "INSERT INTO \(view)(\(columns)) VALUES (\(values.joined(separator: ", ")));"
        }
        let noted = "EXISTS (SELECT 1 FROM _ls_displaced d WHERE d.entity = \(info.id) AND d.newpk = NEW.\(key))"
        return [
            """
            CREATE TRIGGER "\(prefix)displace_insert" BEFORE INSERT ON \(table)
              WHEN NEW.\(key) IS NOT NULL AND (\(insertProbes.joined(separator: " OR "))) BEGIN
              \(job(DisplacementStep.noteInsert))
            END
            """,
            """
            CREATE TRIGGER "\(prefix)displace_update" BEFORE UPDATE OF \(updatedColumns) ON \(table)
              WHEN NEW.\(key) IS NOT NULL AND (\(updateProbes.joined(separator: " OR "))) BEGIN
              \(job(DisplacementStep.noteUpdate, oldRowid: "OLD.rowid"))
            END
            """,
            """
            CREATE TRIGGER "\(prefix)displaced_insert" AFTER INSERT ON \(table) WHEN NEW.\(key) IS NOT NULL AND \(noted) BEGIN
              \(job(DisplacementStep.recordInsert))
            END
            """,
            """
            CREATE TRIGGER "\(prefix)displaced_update" AFTER UPDATE OF \(updatedColumns) ON \(table) WHEN NEW.\(key) IS NOT NULL AND \(noted) BEGIN
              \(job(DisplacementStep.recordUpdate))
            END
            """,
            displacementJob(info, catalog: catalog),
        ]
    }

    /// The view whose `INSTEAD OF` trigger does an entity's displacement work: rows inserted into it are
    /// requests (a step, the incoming key, rowids and unique-key values), never stored.
    static func displacementView(_ entityID: Int64) -> String { "_ls_v\(entityID)" }

    /// The unique-key columns of an entity, in the order the view lists them.
    static func displacementColumns(_ info: Catalog.EntityInfo) -> [String] {
        Array(Set(info.entity.uniqueKeys.flatMap { $0 })).sorted()
    }

    /// `CREATE VIEW` for ``displacementView(_:)``: one row of NULLs that nothing reads.
    static func createDisplacementView(_ info: Catalog.EntityInfo) -> String {
        let columns = ["_ls_step", "_ls_newpk", "_ls_newrowid", "_ls_oldrowid"] + displacementColumns(info).map(quote)
        return "CREATE VIEW \(quote(displacementView(info.id))) AS SELECT " + columns.map { "NULL AS \($0)" }.joined(separator: ", ")
            + " WHERE 0"
    }

    /// Whether `trigger` is one of the per-row displacement triggers: logsync's connections compile the
    /// column reads in them to NULL (`Connection`), which their `WHEN` clause turns into a no-op.
    static func isDisplacementTrigger(_ trigger: String) -> Bool {
        trigger.hasPrefix("_ls_t") && (trigger.hasSuffix("_displace_insert") || trigger.hasSuffix("_displace_update")
            || trigger.hasSuffix("_displaced_insert") || trigger.hasSuffix("_displaced_update"))
    }

    /// What a row inserted into a displacement view asks for.
    enum DisplacementStep {
        /// Note the rows an insert's values collide with.
        static let noteInsert = 1
        /// Note the rows an update's new values collide with.
        static let noteUpdate = 2
        /// Record the noted rows of an insert that are gone.
        static let recordInsert = 3
        /// Record the noted rows of an update that are gone.
        static let recordUpdate = 4
    }

    /// The `INSTEAD OF` trigger of an entity's displacement view: notes the rows the incoming values collide
    /// with (steps 1 and 2), or records those of them that are gone (steps 3 and 4) as the rule triggers and
    /// the delete trigger would have — the delete rules first, then the delete.
    private static func displacementJob(_ info: Catalog.EntityInfo, catalog: Catalog) -> String {
        let table = quote(info.entity.name)
        let key = quote(info.primaryKey.name)
        let step = "NEW._ls_step"
        let newKey = "NEW._ls_newpk"
        func collisions(excludingSelf: Bool) -> [String] {
            info.entity.uniqueKeys.map { columns in
                columns.map { "T.\(quote($0)) = NEW.\(quote($0))" }.joined(separator: " AND ")
                    + (excludingSelf ? " AND T.\(key) IS NOT \(newKey)" : "")
            }
        }
        let rowid = "T.rowid = NEW._ls_newrowid AND T.\(key) IS NOT \(newKey)"
        let insertCollisions = ["T.\(key) = \(newKey)"] + collisions(excludingSelf: false) + ["NEW._ls_newrowid <> -1 AND \(rowid)"]
        let updateCollisions = collisions(excludingSelf: true) + ["NEW._ls_newrowid IS NOT NEW._ls_oldrowid AND \(rowid)"]
        func note(_ kind: Int, _ conditions: [String]) -> [String] {
            [
                "DELETE FROM _ls_displaced WHERE \(step) = \(kind) AND entity = \(info.id) AND newpk = \(newKey)",
                "INSERT OR REPLACE INTO _ls_displaced(entity, newpk, pk, rid, tomb) "
                    + "SELECT \(info.id), \(newKey), T.\(key), T.rowid, \(tombstone(of: info.entity, row: "T")) FROM \(table) T "
                    + "WHERE \(step) = \(kind) AND (\(conditions.map { "(\($0))" }.joined(separator: " OR ")))",
            ]
        }
        // An insert's own key may have been the collision (the row it replaced had the same key), so for an
        // insert a note with its own key counts as gone.
        let recording = "\(step) IN (\(DisplacementStep.recordInsert), \(DisplacementStep.recordUpdate))"
        let noted = "d.entity = \(info.id) AND d.newpk = \(newKey)"
        let gone =
            "(\(step) = \(DisplacementStep.recordInsert) AND d.pk = \(newKey) OR NOT EXISTS (SELECT 1 FROM \(table) T WHERE T.\(key) = d.pk))"
        let replaced = "SELECT d.pk FROM _ls_displaced d WHERE \(noted) AND \(gone)"
        let liveKey = liveID(entity: "\(info.id)", rowID: "d.rid")
        var statements = note(DisplacementStep.noteInsert, insertCollisions) + note(DisplacementStep.noteUpdate, updateCollisions)
        for child in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
            for relationship in child.entity.relationships where relationship.destination == info.entity.name {
                let childTable = quote(child.entity.name)
                let column = quote(relationship.name)
                switch relationship.deleteRule {
                case .deny:
                    let message =
                        "logsync: cannot replace this \(info.entity.name): \(child.entity.name).\(relationship.name) "
                        + "still references the row it would delete (delete rule deny)"
                    statements.append(
                        "SELECT RAISE(ABORT, \(literal(message))) WHERE \(recording) "
                            + "AND EXISTS (SELECT 1 FROM \(childTable) WHERE \(column) IN (\(replaced)))")
                case .cascade:
                    statements.append("DELETE FROM \(childTable) WHERE \(recording) AND \(column) IN (\(replaced))")
                case .nullify:
                    statements.append("UPDATE \(childTable) SET \(column) = NULL WHERE \(recording) AND \(column) IN (\(replaced))")
                }
            }
        }
        statements += [
            "INSERT INTO _ls_log(kind, entity, pk, cols, tomb) SELECT 3, \(info.id), d.pk, 0, d.tomb FROM _ls_displaced d "
                + "WHERE \(recording) AND \(noted) AND \(gone) ORDER BY d.pk",
            "INSERT OR IGNORE INTO _ls_row(entity, pk, cl, state) SELECT \(info.id), l.pk, l.cl, l.state "
                + "FROM _ls_displaced d JOIN _ls_live l ON l.id = \(liveKey) AND l.pk = d.pk WHERE \(recording) AND \(noted) AND \(gone)",
            "DELETE FROM _ls_live WHERE \(recording) AND id IN (SELECT \(liveKey) FROM _ls_displaced d WHERE \(noted) AND \(gone)) "
                + "AND pk IN (\(replaced))",
            "DELETE FROM _ls_displaced WHERE \(recording) AND entity = \(info.id) AND (newpk = \(newKey) "
                + "OR NOT EXISTS (SELECT 1 FROM \(table) T WHERE T.\(key) = _ls_displaced.pk))",
        ]
        return "CREATE TRIGGER \"\(triggerPrefix(info.id))job\" INSTEAD OF INSERT ON \(quote(displacementView(info.id))) BEGIN\n"
            + statements.map { "  \($0);\n" }.joined() + "END"
    }

    /// Delete rules, enforced by triggers on the destination table so they hold for foreign writers too
    /// (SQLite's own foreign keys are off unless each connection turns them on).
    static func deleteRuleTriggers(for info: Catalog.EntityInfo, catalog: Catalog) -> [String] {
        var statements: [String] = []
        for relationship in info.entity.relationships {
            guard let destination = catalog.byName[relationship.destination],
                let bit = info.columns.firstIndex(of: relationship.name)
            else { continue }
            let name = "\(triggerPrefix(info.id))rule\(bit)"
            let child = quote(info.entity.name)
            let column = quote(relationship.name)
            let parent = quote(destination.entity.name)
            let parentKey = "OLD.\(quote(destination.primaryKey.name))"
            statements.append(
                "CREATE INDEX IF NOT EXISTS \"_ls_ref\(info.id)_\(bit)\" ON \(child)(\(column))")
            switch relationship.deleteRule {
            case .cascade:
                statements.append(
                    """
                    CREATE TRIGGER "\(name)" AFTER DELETE ON \(parent) WHEN \(unlessMerging) BEGIN
                      DELETE FROM \(child) WHERE \(column) = \(parentKey);
                    END
                    """)
            case .nullify:
                statements.append(
                    """
                    CREATE TRIGGER "\(name)" AFTER DELETE ON \(parent) WHEN \(unlessMerging) BEGIN
                      UPDATE \(child) SET \(column) = NULL WHERE \(column) = \(parentKey);
                    END
                    """)
            case .deny:
                let message =
                    "logsync: cannot delete this \(destination.entity.name): \(info.entity.name).\(relationship.name) "
                    + "still references it (delete rule deny)"
                statements.append(
                    """
                    CREATE TRIGGER "\(name)" BEFORE DELETE ON \(parent)
                      WHEN \(unlessMerging) AND EXISTS (SELECT 1 FROM \(child) WHERE \(column) = \(parentKey)) BEGIN
                      SELECT RAISE(ABORT, \(literal(message)));
                    END
                    """)
            }
        }
        return statements
    }

    static func uniqueIndexName(entityID: Int64, columns: [String]) -> String {
        "_ls_uq\(entityID)_" + columns.joined(separator: "_")
    }

    static func createUniqueIndex(_ entity: Entity, entityID: Int64, columns: [String]) -> String {
        "CREATE UNIQUE INDEX IF NOT EXISTS \(quote(uniqueIndexName(entityID: entityID, columns: columns))) ON "
            + "\(quote(entity.name))(\(columns.map(quote).joined(separator: ", ")))"
    }
}
