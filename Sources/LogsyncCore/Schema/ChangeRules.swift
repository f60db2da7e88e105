/// What a change from another node must be before anything of it is merged: an entity and columns this
/// node's schema declares, a key of the entity's key shape, and values of each column's declared type —
/// the same rules the store's tables enforce for local writers (`CHECK` constraints and `STRICT` types,
/// `docs/history.md`, "Declared types hold for every writer"), so that what one node could store, every
/// node accepts, and what no node could store is refused before it reaches SQL.
///
/// Built once per schema; checking is a dictionary lookup per change and per value, done on the thread
/// that decodes a segment, not the writer's.
package struct ChangeRules: Sendable {
    struct Column: Sendable {
        /// The declared type of an attribute, or the destination's key type for a relationship.
        let type: AttributeType
        let optional: Bool
    }

    struct EntityRules: Sendable {
        let keyType: AttributeType
        let columns: [String: Column]
        /// Contracted attributes' names in the log: their values are not checked, and the translation into
        /// current names (``LogNames``) drops them.
        let contracted: Set<String>
    }

    package let schemaVersion: Int
    let entities: [String: EntityRules]
    /// The log's names of renamed attributes and their current ones. Rules are in the log's names (a
    /// segment is checked and split as it was written), and what is merged is translated after
    /// (``LogNames/current(_:)``): a column that took a renamed column's former current name in a later
    /// release is then a column this schema does not declare, kept, never mistaken for the renamed one.
    package let names: LogNames

    package init(_ schema: Schema) {
        schemaVersion = schema.version
        names = LogNames(schema)
        var entities: [String: EntityRules] = [:]
        for entity in schema.entities {
            guard let key = entity.primaryKey else { continue }
            var columns: [String: Column] = [:]
            for attribute in entity.attributes {
                columns[attribute.logName] = Column(type: attribute.type, optional: attribute.optional)
                // What earlier releases write to the attribute it replaces, checked as they declared it.
                if let conversion = attribute.convertedFrom { columns[conversion.attribute] = Column(type: conversion.type, optional: true) }
            }
            for relationship in entity.relationships {
                let type = schema.entity(named: relationship.destination)?.primaryKey?.type ?? .uuid
                columns[relationship.name] = Column(type: type, optional: true)
            }
            // Keyed by the entity's name in the log, which a renamed entity's changes carry.
            entities[entity.logName] = EntityRules(keyType: key.type, columns: columns, contracted: Set(entity.contracted))
        }
        self.entities = entities
    }

    /// Why the transaction cannot be merged here (naming the change, the entity, the column and the
    /// value), or nil when every change fits the schema.
    package func problem(in transaction: LogTransaction) -> String? {
        var rules: EntityRules?
        var entityName: String?
        for (index, change) in transaction.changes.enumerated() {
            // A transaction's changes usually share an entity: compare the name before hashing it.
            if entityName != change.entity {
                entityName = change.entity
                rules = entities[change.entity]
            }
            if let problem = Self.problem(with: change, rules: rules, schemaVersion: schemaVersion) {
                return "transaction \(transaction.sequence), change \(index + 1): \(problem)"
            }
        }
        return nil
    }

    /// Why `change` cannot be merged here, or nil.
    package func problem(with change: LogChange) -> String? {
        Self.problem(with: change, rules: entities[change.entity], schemaVersion: schemaVersion)
    }

    private static func problem(with change: LogChange, rules: EntityRules?, schemaVersion: Int) -> String? {
        guard let rules else {
            return "entity '\(change.entity)' is not declared by this node's schema (version \(schemaVersion))"
        }
        if let problem = problem(change.primaryKey, as: rules.keyType, optional: false) {
            return "the key of a row of '\(change.entity)' \(problem)"
        }
        for (name, value) in change.values {
            guard let column = rules.columns[name] else {
                if rules.contracted.contains(name) { continue }
                return "'\(change.entity)' has no column '\(name)' in this node's schema (version \(schemaVersion))"
            }
            if let problem = problem(value, as: column.type, optional: column.optional) {
                return "'\(change.entity).\(name)' of row \(shortDescription(change.primaryKey)) \(problem)"
            }
        }
        return nil
    }

    /// A transaction written under a newer schema, split into what this node's schema declares and
    /// the rest (`docs/schema-evolution.md`): `understood` holds every change of a declared entity with
    /// only its declared columns (a change whose every column is new stays, with no values: it still
    /// carries its row's causal length), `kept` every change of an entity this schema does not declare
    /// and, for the others, a change with only the new columns — same row, kind and causal length — or
    /// nil when nothing is left. Since the merge is a join of states, merging `understood` now and `kept`
    /// later gives the state that merging the whole transaction would have. The declared parts are checked
    /// as ``problem(in:)`` checks them; a problem refuses the whole transaction.
    package func split(_ transaction: LogTransaction) -> (understood: LogTransaction, kept: LogTransaction?, problem: String?) {
        var understood = transaction, kept = transaction
        understood.changes = []
        kept.changes = []
        understood.changes.reserveCapacity(transaction.changes.count)
        for (index, change) in transaction.changes.enumerated() {
            guard let rules = entities[change.entity] else {
                kept.changes.append(change)
                continue
            }
            var known = change, new = change
            new.values = [:]
            for (name, value) in change.values where rules.columns[name] == nil {
                known.values[name] = nil
                if !rules.contracted.contains(name) { new.values[name] = value }
            }
            if let problem = Self.problem(with: known, rules: rules, schemaVersion: schemaVersion) {
                return (understood, nil, "transaction \(transaction.sequence), change \(index + 1): \(problem)")
            }
            understood.changes.append(known)
            if !new.values.isEmpty { kept.changes.append(new) }
        }
        return (understood, kept.changes.isEmpty ? nil : kept, nil)
    }

    /// Why `value` is not a value of `type` as the store keeps it, or nil.
    static func problem(_ value: DatabaseValue, as type: AttributeType, optional: Bool) -> String? {
        if case .null = value { return optional ? nil : "is NULL, but it is required" }
        let fits: Bool
        switch (type, value) {
        case (.text, .text), (.text, .nonUTF8Text), (.integer, .integer), (.blob, .blob): fits = true
        case (.real, .real(let number)), (.date, .real(let number)): fits = !number.isNaN
        case (.bool, .integer(let number)): fits = number == 0 || number == 1
        case (.uuid, .text(let text)): fits = CanonicalUUID.hasShape(text)
        case (.uuidBlob, .blob(let bytes)): fits = bytes.count == 16
        default: fits = false
        }
        return fits ? nil : "is \(describe(value)), not \(expectation(type))"
    }

    static func expectation(_ type: AttributeType) -> String {
        switch type {
        case .text: return "text"
        case .integer: return "an integer"
        case .real: return "a real number"
        case .date: return "a date (a real number of seconds)"
        case .blob: return "a blob"
        case .bool: return "a bool (the integer 0 or 1)"
        case .uuid: return "a UUID as 36 characters of text"
        case .uuidBlob: return "a UUID as a 16-byte blob"
        }
    }

    /// A key as a message shows it: whole when short, else described (a hostile key may be 16 MiB).
    static func shortDescription(_ key: DatabaseValue) -> String {
        if case .text(let text) = key, text.utf8.count <= 64 { return text }
        return describe(key)
    }

    static func describe(_ value: DatabaseValue) -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let number): return "the integer \(number)"
        case .real(let number): return number.isNaN ? "NaN" : "the real \(number)"
        case .text(let text): return "\(text.utf8.count) bytes of text"
        case .nonUTF8Text(let bytes): return "\(bytes.count) bytes of text that is not UTF-8"
        case .blob(let bytes): return "a \(bytes.count)-byte blob"
        }
    }
}

extension CanonicalUUID {
    /// Whether `text` is a UUID as the store's tables accept one: exactly 36 bytes, hex digits of either
    /// case in the groups 8-4-4-4-12, separated by dashes. The same test as ``SQLPattern/uuidCheck(_:)``'s
    /// `GLOB`, so that a key one node stores is a key every node accepts.
    static func hasShape(_ text: String) -> Bool {
        var count = 0
        for byte in text.utf8 {
            switch count {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
                else { return false }
            }
            count += 1
            if count > 36 { return false }
        }
        return count == 36
    }
}
