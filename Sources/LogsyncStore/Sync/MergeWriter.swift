import LogsyncCore

/// Keeps a store's synced tables equal to the projection of its merged row states (`docs/merge.md`),
/// incrementally: runs inside a write transaction, on the writer connection.
///
/// Every row's ``RowState`` lives in `_ls_row`. `_ls_ref` indexes raw references (including those of
/// hidden rows) so the rows that depend on a changed row can be found; `_ls_alias` records unique-key
/// losers and their survivors.
struct MergeWriter {
    let connection: Connection
    let catalog: Catalog

    // MARK: - Row states

    func loadState(_ key: RowKey, nodes: NodeTable) throws -> RowState? {
        guard let info = catalog.byName[key.entity] else { return nil }
        guard let row = try connection.rows("SELECT cl, state FROM _ls_row WHERE entity = ? AND pk = ?", [.integer(info.id), key.primaryKey]).first,
            case .integer(let cl) = row[0], case .blob(let bytes) = row[1]
        else { return nil }
        return try RowStateCoding.decode(bytes, causalLength: UInt64(cl), info: info, nodes: nodes)
    }

    /// Stores `state` and updates the reference index for the references that changed.
    func saveState(_ state: RowState, for key: RowKey, previous: RowState?, nodes: inout NodeTable) throws {
        guard let info = catalog.byName[key.entity] else { return }
        let bytes = try RowStateCoding.encode(state, info: info, nodes: &nodes, connection: connection)
        try connection.execute(
            "INSERT OR REPLACE INTO _ls_row(entity, pk, cl, state) VALUES (?, ?, ?, ?)",
            [.integer(info.id), key.primaryKey, .integer(Int64(state.causalLength)), .blob(bytes)])
        for relationship in info.entity.relationships {
            let old = previous?.columns[relationship.name]?.value ?? .null
            let new = state.columns[relationship.name]?.value ?? .null
            guard old != new, let target = catalog.byName[relationship.destination] else { continue }
            if !old.isNull {
                try connection.execute(
                    "DELETE FROM _ls_ref WHERE target_entity = ? AND target = ? AND entity = ? AND pk = ?",
                    [.integer(target.id), old, .integer(info.id), key.primaryKey])
            }
            if !new.isNull {
                try connection.execute(
                    "INSERT OR IGNORE INTO _ls_ref(target_entity, target, entity, pk) VALUES (?, ?, ?, ?)",
                    [.integer(target.id), new, .integer(info.id), key.primaryKey])
            }
        }
    }

    /// Whether a state change can alter other rows' projection: existence, deletes, references or
    /// unique-key columns changed.
    func isStructural(_ key: RowKey, from old: RowState?, to new: RowState) -> Bool {
        guard let old else { return true }
        if old.causalLength != new.causalLength || old.deletedAt != new.deletedAt { return true }
        guard let entity = catalog.byName[key.entity]?.entity else { return false }
        let watched = entity.relationships.map(\.name) + entity.uniqueKeys.flatMap { $0 }
        return watched.contains { old.columns[$0] != new.columns[$0] }
    }

    // MARK: - Projection

    /// Re-projects `changed` rows, and the rows that depend on those of them that changed structurally,
    /// writing only the differences to the synced tables. The caller has set the merging flag, so
    /// delete-rule triggers stand aside.
    ///
    /// `known` holds states the caller has just loaded or written, so they are not read again.
    func refresh(changed: [RowKey: Bool], known: [RowKey: RowState] = [:], new: Set<RowKey> = [], nodes: NodeTable) throws {
        guard !changed.isEmpty else { return }
        // Rows of isolated entities project from their own state: write them directly, and pass on only
        // what depends on them (rows referring to them, after a structural change).
        var remaining: [RowKey: Bool] = [:]
        for (key, structural) in changed {
            guard let info = catalog.byName[key.entity], info.isIsolated, let state = try known[key] ?? loadState(key, nodes: nodes) else {
                remaining[key] = structural
                continue
            }
            try writeIsolated(key, info: info, state: state, isNew: new.contains(key))
            if structural, catalog.referenced.contains(key.entity) {
                for child in try children(of: key, info: info) where remaining[child] == nil { remaining[child] = true }
            }
        }
        guard !remaining.isEmpty else { return }
        let affected = try dependents(of: remaining, known: known, nodes: nodes)
        let states = try neighbourhood(of: affected, known: known, nodes: nodes)
        let (projection, aliases) = MergeProjector(schema: catalog.schema, rows: states).evaluate()

        var deletes: [(Catalog.EntityInfo, DatabaseValue)] = []
        var updates: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue], [String: DatabaseValue])] = []
        var inserts: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue])] = []
        for key in affected.sorted() {
            guard let info = catalog.byName[key.entity] else { continue }
            let desired = projection.row(key.entity, key.primaryKey)
            let actual = try baseRow(info, key.primaryKey)
            switch (actual, desired) {
            case (.some, nil): deletes.append((info, key.primaryKey))
            case (nil, .some(let values)): inserts.append((info, key.primaryKey, values))
            case (.some(let current), .some(let values)) where current != values:
                updates.append((info, key.primaryKey, current, values))
            default: break
            }
            guard !info.entity.uniqueKeys.isEmpty else { continue }
            try connection.execute("DELETE FROM _ls_alias WHERE entity = ? AND pk = ?", [.integer(info.id), key.primaryKey])
            if let survivor = aliases[key] {
                try connection.execute(
                    "INSERT INTO _ls_alias(entity, pk, survivor) VALUES (?, ?, ?)", [.integer(info.id), key.primaryKey, survivor])
            }
        }
        for (info, key) in deletes {
            try connection.execute(info.sql.delete, [key])
        }
        var deferred: [(Catalog.EntityInfo, DatabaseValue, [String: DatabaseValue])] = []
        for (info, key, current, values) in updates {
            let changedColumns = info.columns.filter { current[$0] != values[$0] }
            let sql =
                "UPDATE \(SchemaSQL.quote(info.entity.name)) SET "
                + changedColumns.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: ", ")
                + " WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?"
            do {
                try connection.execute(sql, changedColumns.map { values[$0] ?? .null } + [key])
            } catch {
                guard error.isConstraint else { throw error }
                // Two rows trading unique values: take this one out and put it back after the others.
                try connection.execute(info.sql.delete, [key])
                deferred.append((info, key, values))
            }
        }
        for (info, key, values) in inserts + deferred {
            try connection.execute(info.sql.insert, [key] + info.columns.map { values[$0] ?? .null })
        }
    }

    /// Writes the projection of a row that depends on nothing but its own state: present with its
    /// registers (or defaults) while its causal length is odd, absent otherwise. A row never seen before is
    /// not in the table (local history is always folded before a merge), so it is not looked up.
    private func writeIsolated(_ key: RowKey, info: Catalog.EntityInfo, state: RowState, isNew: Bool) throws {
        let actual = isNew ? nil : try baseRow(info, key.primaryKey)
        guard state.exists else {
            if actual != nil { try connection.execute(info.sql.delete, [key.primaryKey]) }
            return
        }
        // Isolated entities have no relationships: their columns are exactly their attributes.
        let desired = info.columns.map { name in
            state.columns[name]?.value ?? info.entity.attributes.first { $0.name == name }?.defaultValue.map(DatabaseValue.init) ?? .null
        }
        if let actual {
            let changed = zip(info.columns, desired).filter { actual[$0.0] != $0.1 }
            guard !changed.isEmpty else { return }
            try connection.execute(
                "UPDATE \(SchemaSQL.quote(info.entity.name)) SET " + changed.map { "\(SchemaSQL.quote($0.0)) = ?" }.joined(separator: ", ")
                    + " WHERE \(SchemaSQL.quote(info.primaryKey.name)) = ?",
                changed.map(\.1) + [key.primaryKey])
        } else {
            try connection.execute(info.sql.insert, [key.primaryKey] + desired)
        }
    }

    private func children(of key: RowKey, info: Catalog.EntityInfo) throws -> [RowKey] {
        try connection.rows("SELECT entity, pk FROM _ls_ref WHERE target_entity = ? AND target = ?", [.integer(info.id), key.primaryKey]).compactMap { row in
            guard case .integer(let entityID) = row[0], let child = catalog.byID[entityID] else { return nil }
            return RowKey(child.entity.name, row[1])
        }
    }

    /// The changed rows plus, for structural changes, every row whose projection can depend on them:
    /// rows referring to them (transitively), their unique-key losers and survivors, and rows sharing
    /// their unique-key values.
    private func dependents(of changed: [RowKey: Bool], known: [RowKey: RowState], nodes: NodeTable) throws -> Set<RowKey> {
        var result = Set(changed.keys)
        var frontier = changed.filter(\.value).map(\.key)
        while let key = frontier.popLast() {
            guard let info = catalog.byName[key.entity] else { continue }
            var found = catalog.referenced.contains(key.entity) ? try children(of: key, info: info) : []
            if !info.entity.uniqueKeys.isEmpty {
                found += try aliasPeers(of: key, info: info, state: try known[key] ?? loadState(key, nodes: nodes))
            }
            for peer in found where result.insert(peer).inserted {
                frontier.append(peer)
            }
        }
        return result
    }

    /// Rows that compete with `key` on a unique key: its survivor if it lost, its losers if it won, and the
    /// visible rows holding its unique values, both as the table shows them and as its state says.
    private func aliasPeers(of key: RowKey, info: Catalog.EntityInfo, state: RowState?) throws -> [RowKey] {
        guard !info.entity.uniqueKeys.isEmpty else { return [] }
        var peers: [RowKey] = []
        for row in try connection.rows(
            "SELECT pk FROM _ls_alias WHERE entity = ? AND survivor = ? UNION SELECT survivor FROM _ls_alias WHERE entity = ? AND pk = ?",
            [.integer(info.id), key.primaryKey, .integer(info.id), key.primaryKey])
        {
            peers.append(RowKey(key.entity, row[0]))
        }
        let visible = try baseRow(info, key.primaryKey)
        for uniqueKey in info.entity.uniqueKeys {
            var candidates: [[DatabaseValue]] = []
            if let visible { candidates.append(uniqueKey.map { visible[$0] ?? .null }) }
            if let state { candidates.append(uniqueKey.map { state.columns[$0]?.value ?? .null }) }
            for values in Set(candidates) {
                peers += try visibleRows(info, matching: uniqueKey, values: values).map { RowKey(key.entity, $0) }
            }
        }
        return peers
    }

    /// Loads the states needed to project `keys`: the rows themselves, every row they refer to (for
    /// visibility and inherited deletes, transitively), and unique-key competitors.
    private func neighbourhood(of keys: Set<RowKey>, known: [RowKey: RowState], nodes: NodeTable) throws -> [RowKey: RowState] {
        var states: [RowKey: RowState] = [:]
        var queue = Array(keys)
        var seen = keys
        func enqueue(_ key: RowKey) {
            if seen.insert(key).inserted { queue.append(key) }
        }
        while let key = queue.popLast() {
            guard let info = catalog.byName[key.entity], let state = try known[key] ?? loadState(key, nodes: nodes) else { continue }
            states[key] = state
            for relationship in info.entity.relationships {
                if let target = state.columns[relationship.name]?.value, !target.isNull {
                    enqueue(RowKey(relationship.destination, target))
                }
            }
            for peer in try aliasPeers(of: key, info: info, state: state) { enqueue(peer) }
        }
        return states
    }

    private func visibleRows(_ info: Catalog.EntityInfo, matching columns: [String], values: [DatabaseValue]) throws -> [DatabaseValue] {
        guard !values.contains(.null) else { return [] }
        let sql =
            "SELECT \(SchemaSQL.quote(info.primaryKey.name)) FROM \(SchemaSQL.quote(info.entity.name)) WHERE "
            + columns.map { "\(SchemaSQL.quote($0)) = ?" }.joined(separator: " AND ")
        return try connection.rows(sql, values).map { $0[0] }
    }

    /// The visible row's non-key columns, or nil when it is not in the table.
    func baseRow(_ info: Catalog.EntityInfo, _ key: DatabaseValue) throws -> [String: DatabaseValue]? {
        guard let row = try connection.rows(info.sql.select, [key]).first else { return nil }
        return info.columns.isEmpty ? [:] : Dictionary(uniqueKeysWithValues: zip(info.columns, row))
    }
}
