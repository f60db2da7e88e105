/// The merged knowledge of a set of log transactions: one ``RowState`` per row ever seen.
///
/// Applying the same transactions in any order, with duplicates, gives the same state; ``project(_:)``
/// turns a state into the visible tables. Together they are the reference the store's apply engine must
/// match, and the definition of the merge rules in `docs/merge.md`.
package struct MergeState: Sendable, Hashable {
    package private(set) var rows: [RowKey: RowState] = [:]

    package init() {}

    /// Merges every change of a transaction committed on `node`.
    package mutating func apply(_ transaction: LogTransaction, from node: NodeID) {
        let clock = Clock(transaction.timestamp, node)
        for change in transaction.changes {
            rows[RowKey(change.entity, change.primaryKey), default: RowState()].merge(change, at: clock)
        }
    }

    package subscript(key: RowKey) -> RowState? { rows[key] }

    /// The visible tables under `schema`'s delete rules and unique keys.
    package func project(_ schema: Schema) -> Projection {
        MergeProjector(schema: schema, rows: rows).evaluate().projection
    }
}

/// Visible rows per entity, keyed by primary key, with every non-key column.
package struct Projection: Sendable, Hashable {
    package var tables: [String: [DatabaseValue: [String: DatabaseValue]]]

    package init(tables: [String: [DatabaseValue: [String: DatabaseValue]]] = [:]) {
        self.tables = tables
    }

    package func row(_ entity: String, _ key: DatabaseValue) -> [String: DatabaseValue]? {
        tables[entity]?[key]
    }
}

/// Computes a ``Projection``. The rules, in order:
///
/// 1. A row exists when its causal length is odd.
/// 2. **Cascade**: a row is hidden when a cascade relationship refers to a row whose effective delete
///    clock is later than the reference's clock — the reference was set before the referenced row was
///    deleted. The effective delete clock of a row is the later of its own latest delete and one inherited
///    through its own cascade references, so cascades chain. A re-inserted row does not bring back rows
///    its earlier delete cascaded to.
/// 3. **Unique keys**: among visible rows whose unique-key columns are all non-NULL and equal, the row with
///    the lowest primary key stays visible; the others are hidden and become aliases of it. Keys are
///    processed in declaration order.
/// 4. **References**: a reference to an alias is re-pointed to its survivor. A reference to a row that is
///    known but not visible is NULL (nullify and deny; for cascade, only references set after the delete
///    get here, since earlier ones hide their row). A reference to a row never seen is kept: its insert may
///    still be on its way.
/// 5. Columns without a register take the attribute's default, else NULL.
///
/// The store evaluates it on the neighbourhood of the rows a transaction changed; rows whose state is not
/// in `rows` count as never seen.
package struct MergeProjector {
    let schema: Schema
    let rows: [RowKey: RowState]

    package init(schema: Schema, rows: [RowKey: RowState]) {
        self.schema = schema
        self.rows = rows
    }

    private final class Memo {
        var effectiveDelete: [RowKey: Clock?] = [:]
        var visiting: Set<RowKey> = []
    }

    /// The visible tables, and for each hidden unique-key loser the primary key of its survivor.
    package func evaluate() -> (projection: Projection, aliases: [RowKey: DatabaseValue]) {
        let memo = Memo()
        var visible: [String: [DatabaseValue]] = [:]
        for (key, state) in rows where state.exists {
            guard let entity = schema.entity(named: key.entity), !isCascaded(key, state, entity, memo) else { continue }
            visible[key.entity, default: []].append(key.primaryKey)
        }

        var alias: [RowKey: DatabaseValue] = [:]
        for entity in schema.entities {
            var keys = (visible[entity.name] ?? []).sorted { $0.sortsBefore($1) }
            for uniqueKey in entity.uniqueKeys {
                var survivors: [[DatabaseValue]: DatabaseValue] = [:]
                var kept: [DatabaseValue] = []
                for key in keys {
                    let columns = rows[RowKey(entity.name, key)]?.columns ?? [:]
                    let values = uniqueKey.map { columns[$0]?.value ?? .null }
                    if values.contains(.null) {
                        kept.append(key)
                    } else if let survivor = survivors[values] {
                        alias[RowKey(entity.name, key)] = survivor
                    } else {
                        survivors[values] = key
                        kept.append(key)
                    }
                }
                keys = kept
            }
            visible[entity.name] = keys
        }

        let visibleSet = Set(visible.flatMap { entity, keys in keys.map { RowKey(entity, $0) } })
        var tables: [String: [DatabaseValue: [String: DatabaseValue]]] = [:]
        for entity in schema.entities {
            var table: [DatabaseValue: [String: DatabaseValue]] = [:]
            for key in visible[entity.name] ?? [] {
                let columns = rows[RowKey(entity.name, key)]?.columns ?? [:]
                var values: [String: DatabaseValue] = [:]
                for attribute in entity.attributes {
                    values[attribute.name] = columns[attribute.name]?.value ?? attribute.defaultValue.map(DatabaseValue.init) ?? .null
                }
                for relationship in entity.relationships {
                    let raw = columns[relationship.name]?.value ?? .null
                    values[relationship.name] = resolveReference(raw, to: relationship.destination, alias: alias, visible: visibleSet)
                }
                table[key] = values
            }
            tables[entity.name] = table
        }
        return (Projection(tables: tables), alias)
    }

    private func resolveReference(
        _ raw: DatabaseValue, to destination: String, alias: [RowKey: DatabaseValue], visible: Set<RowKey>
    ) -> DatabaseValue {
        guard !raw.isNull else { return .null }
        var target = RowKey(destination, raw)
        var hops = 0
        while let survivor = alias[target], hops < 64 {
            target = RowKey(destination, survivor)
            hops += 1
        }
        if visible.contains(target) || rows[target] == nil { return target.primaryKey }
        return .null
    }

    private func isCascaded(_ key: RowKey, _ state: RowState, _ entity: Entity, _ memo: Memo) -> Bool {
        cascadeDelete(key, state, entity, memo) != nil
    }

    /// The latest delete clock inherited through cascade references set before it, or nil.
    private func cascadeDelete(_ key: RowKey, _ state: RowState, _ entity: Entity, _ memo: Memo) -> Clock? {
        var result: Clock?
        for relationship in entity.relationships where relationship.deleteRule == .cascade {
            guard let register = state.columns[relationship.name], !register.value.isNull else { continue }
            let parent = RowKey(relationship.destination, register.value)
            if let deleted = effectiveDelete(parent, memo), deleted > register.clock, result.map({ deleted > $0 }) ?? true {
                result = deleted
            }
        }
        return result
    }

    /// A row's own latest delete or an inherited cascade delete, whichever is later.
    private func effectiveDelete(_ key: RowKey, _ memo: Memo) -> Clock? {
        if let known = memo.effectiveDelete[key] { return known }
        guard let state = rows[key], let entity = schema.entity(named: key.entity), !memo.visiting.contains(key) else {
            return nil
        }
        memo.visiting.insert(key)
        var result = state.deletedAt
        if let inherited = cascadeDelete(key, state, entity, memo), result.map({ inherited > $0 }) ?? true {
            result = inherited
        }
        memo.visiting.remove(key)
        memo.effectiveDelete[key] = result
        return result
    }
}

extension DatabaseValue {
    /// The value a column takes from its declared default.
    package init(_ value: DefaultValue) {
        switch value {
        case .integer(let v): self = .integer(v)
        case .real(let v): self = .real(v)
        case .text(let v): self = .text(v)
        }
    }
}
