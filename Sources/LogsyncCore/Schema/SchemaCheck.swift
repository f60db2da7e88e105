/// Whether moving an app from one schema to the next is safe while devices run both
/// (`logsync schema check OLD.json NEW.json`, `docs/schema-evolution.md`): what the new release adds, and
/// every change a store refuses to migrate, each with why and which sequence of releases does it instead.
///
/// The unsafe findings are what `SchemaRegistration` refuses when a store opens with the new schema: it
/// runs this check and throws the first (one set of rules, which `SchemaCheckTests` drives through a real
/// store case by case). The notes are what only a mixed fleet shows: a delete rule or a unique key that
/// nodes of the two releases enforce differently.
package struct SchemaCheck: Sendable {
    package enum Severity: String, Sendable {
        /// Allowed, and worth knowing while both releases run.
        case note
        /// A store refuses to migrate: the release cannot ship as it is.
        case unsafe
    }

    package struct Finding: Sendable, Hashable, CustomStringConvertible {
        package var severity: Severity
        /// `Entity` or `Entity.column`, or `version`.
        package var location: String
        /// What changed and why it matters.
        package var reason: String
        /// What to release instead (unsafe findings), or what to expect (notes).
        package var advice: String
        /// Unsafe while devices run both releases, but a store that skips from one to the other migrates:
        /// contracting an attribute that the old release did not deprecate.
        package var onlyForFleets = false

        package var description: String { "\(severity == .unsafe ? "unsafe" : "note"): \(location): \(reason). \(advice)" }
    }

    package let old: Schema
    package let new: Schema
    /// Unsafe findings first, then notes, each in schema order.
    package private(set) var findings: [Finding] = []
    /// What the new release adds: entities and columns, as `Entity` and `Entity.column`.
    package private(set) var added: [String] = []

    package var isSafe: Bool { !findings.contains { $0.severity == .unsafe } }

    package init(from old: Schema, to new: Schema) {
        self.old = old
        self.new = new
        var unsafe: [Finding] = [], notes: [Finding] = []
        func refuse(_ location: String, _ reason: String, _ advice: String, onlyForFleets: Bool = false) {
            unsafe.append(Finding(severity: .unsafe, location: location, reason: reason, advice: advice, onlyForFleets: onlyForFleets))
        }
        func note(_ location: String, _ reason: String, _ advice: String) { notes.append(Finding(severity: .note, location: location, reason: reason, advice: advice)) }

        if old != new, new.version <= old.version {
            refuse(
                "version", "the definition changed but the version went from \(old.version) to \(new.version)",
                "Give the new release version \(old.version + 1): versions tell nodes which schema wrote a change")
        }
        let keep = "Keep it in the schema and stop using it in the app; logsync removes only attributes, by deprecation and then contraction (docs/schema-evolution.md)"
        func removeAttribute(_ attribute: Attribute) -> String {
            "Remove it in two releases: keep it declared with deprecated: true (contexts stop showing it, nodes on older releases keep it), then list '\(attribute.logName)' in the entity's contracted once every active node runs the deprecating release"
        }
        // Entities are the same when their names in the log are (a rename keeps the log's name).
        for entity in old.entities where new.entity(logName: entity.logName) == nil {
            if let renamed = Self.renamedEntity(entity, in: new, old: old) {
                refuse(
                    entity.name, "entity '\(entity.name)' was removed, and '\(renamed)' is new with the same key and columns: if it is the new name, this is a rename without its identifier",
                    "Declare '\(renamed)' with renamingIdentifier '\(entity.logName)': its changes keep travelling under that name, and nodes before and after the rename write into one table")
            } else {
                refuse(entity.name, "entity '\(entity.name)' was removed", keep)
            }
        }
        for entity in new.entities {
            guard let before = old.entity(logName: entity.logName) else {
                added.append(entity.name)
                continue
            }
            if before.name != entity.name {
                note(
                    before.name, "entity '\(before.name)' is renamed '\(entity.name)'",
                    "Its changes keep the log's name '\(entity.logName)': nodes on either release write into the same table")
            }
            if entity.primaryKey != before.primaryKey {
                refuse(
                    entity.name, "the primary key of '\(entity.name)' changed",
                    "Keys cannot change once rows exist: add a new entity with the new key and have the app copy the rows into it")
            }
            // Columns are the same when their names in the log are (a rename keeps the log's name).
            let newNames = Set(entity.columnNames)
            let oldNames = Set(before.attributes.map(\.logName) + before.relationships.map(\.name))
            for name in before.contracted where !entity.contracted.contains(name) {
                refuse(
                    "\(entity.name).contracted", "'\(name)' is no longer listed as contracted",
                    "A contracted attribute stays listed in every later release: nodes on this one would refuse what older segments carry under it")
            }
            for attribute in before.attributes {
                let location = "\(entity.name).\(attribute.name)"
                if let converted = entity.attributes.first(where: { $0.convertedFrom?.attribute == attribute.logName }) {
                    if converted.convertedFrom?.type != attribute.type {
                        refuse(
                            location, "'\(converted.name)' converts from '\(attribute.name)' as \(converted.convertedFrom!.type.rawValue), but it is \(attribute.type.rawValue)",
                            "Declare convertedFrom with type \(attribute.type.rawValue)")
                    } else {
                        note(
                            location, "'\(attribute.name)' is converted in place into '\(converted.name)' (\(attribute.type.rawValue) to \(converted.type.rawValue))",
                            "Stores convert its values when they open; what nodes on version \(old.version) write to it is converted on arrival; they keep what this release writes to '\(converted.name)' until they upgrade")
                    }
                    continue
                }
                if entity.contracted.contains(attribute.logName) {
                    if attribute.deprecated {
                        note(
                            location, "'\(attribute.name)' is contracted: stores drop its column, and its changes in the log are ignored from now on",
                            "Release this only once every active node runs version \(old.version) or later (`syncctl status` lists each peer's version; the relay's /metrics the oldest per account): what a node on an earlier release still writes to it is ignored")
                    } else {
                        refuse(
                            location, "'\(attribute.name)' is contracted, but version \(old.version) still uses it",
                            "Deprecate it first: declare it with deprecated: true in one release, and contract it in a later one, once every active node runs that release",
                            onlyForFleets: true)
                    }
                    continue
                }
                guard let current = entity.attributes.first(where: { $0.logName == attribute.logName }) else {
                    let candidates = entity.attributes.filter { !oldNames.contains($0.logName) && $0.type == attribute.type }
                    if let renamed = candidates.first, candidates.count == 1 {
                        refuse(
                            location, "attribute '\(attribute.name)' of '\(entity.name)' was removed, and '\(renamed.name)' is new and of the same type: if it is the new name, this is a rename without its identifier",
                            "Declare '\(renamed.name)' with renamingIdentifier '\(attribute.logName)': changes keep travelling under that name, and nodes before and after the rename write into one column. If it is not, \(removeAttribute(attribute).prefix(1).lowercased())\(removeAttribute(attribute).dropFirst())")
                    } else {
                        refuse(location, "attribute '\(attribute.name)' of '\(entity.name)' was removed", removeAttribute(attribute))
                    }
                    continue
                }
                if current.deprecated, !attribute.deprecated {
                    note(
                        location, "'\(current.name)' is deprecated",
                        "Contexts no longer show or write it; its column and its changes stay, for nodes on earlier releases. List it in '\(entity.name)'s contracted in a later release, once every active node runs this one")
                }
                if current.name != attribute.name {
                    note(
                        location, "'\(attribute.name)' is renamed '\(current.name)'",
                        "Its changes keep the log's name '\(attribute.logName)': nodes on either release write into the same column")
                }
                if current.type != attribute.type {
                    refuse(
                        location, "the type of '\(attribute.name)' changed from \(attribute.type.rawValue) to \(current.type.rawValue)",
                        "Declare the new type under a new name that converts from it in place: Attribute(\"\(attribute.name)_\(current.type.rawValue)\", .\(current.type.rawValue), convertedFrom: Conversion(from: \"\(attribute.logName)\", .\(attribute.type.rawValue))), if logsync converts \(attribute.type.rawValue) to \(current.type.rawValue); otherwise add a new attribute, have the app fill it, deprecate '\(attribute.name)' and contract it later")
                }
                if current.optional != attribute.optional {
                    refuse(
                        location, current.optional ? "'\(attribute.name)' became optional" : "'\(attribute.name)' became required",
                        "Optionality cannot change: nodes on the old release would write what the new one refuses, or the other way round; add a new attribute")
                }
                if current.defaultValue != attribute.defaultValue {
                    refuse(
                        location, "the default of '\(attribute.name)' changed",
                        "A default cannot change once rows exist: add a new attribute with the new default")
                }
            }
            // A conversion is declared in the release that replaces its source, and in every later one as it was.
            for attribute in entity.attributes {
                let location = "\(entity.name).\(attribute.name)"
                if let earlier = before.attributes.first(where: { $0.logName == attribute.logName }) {
                    if earlier.convertedFrom != attribute.convertedFrom {
                        refuse(
                            location, earlier.convertedFrom == nil
                                ? "'\(attribute.name)' already exists and now declares a conversion"
                                : "the conversion of '\(attribute.name)' changed or was dropped",
                            "A conversion replaces its source with a new attribute in one release, and stays declared as it is in every later one: declare a new attribute for a new conversion")
                    }
                    continue
                }
                guard let conversion = attribute.convertedFrom else { continue }
                guard let source = before.attributes.first(where: { $0.logName == conversion.attribute }) else {
                    refuse(
                        location, "'\(attribute.name)' converts from '\(conversion.attribute)', which version \(old.version) does not declare",
                        "Convert from an attribute the previous release declares, by its name in the log")
                    continue
                }
                if let earlier = source.convertedFrom {
                    refuse(
                        location, "'\(attribute.name)' converts from '\(source.name)', which itself converts from '\(earlier.attribute)'",
                        "Conversions do not chain: add a new attribute, have the app fill it from '\(source.name)', deprecate '\(source.name)' and contract it with '\(earlier.attribute)'")
                }
                if source.name != conversion.attribute, entity.attributes.contains(where: { $0.name == source.name }) {
                    refuse(
                        location, "'\(source.name)', which '\(attribute.name)' replaces, is declared again as a new attribute",
                        "Give the new attribute another name: the store drops the replaced column only after adding the new ones")
                }
            }
            for attribute in before.attributes where attribute.convertedFrom != nil && entity.contracted.contains(attribute.logName) {
                let source = attribute.convertedFrom!.attribute
                if !entity.contracted.contains(source) {
                    refuse(
                        "\(entity.name).\(attribute.name)", "'\(attribute.name)' is contracted, but '\(source)', which it converts from, is not",
                        "List '\(source)' in contracted too: older segments still carry it")
                }
            }
            for relationship in before.relationships {
                let location = "\(entity.name).\(relationship.name)"
                guard let current = entity.relationships.first(where: { $0.name == relationship.name }) else {
                    refuse(location, "relationship '\(relationship.name)' was removed", keep)
                    continue
                }
                // A destination that was renamed is the same entity.
                if new.entity(named: current.destination)?.logName != old.entity(named: relationship.destination)?.logName {
                    refuse(
                        location, "relationship '\(relationship.name)' now points to '\(current.destination)' instead of '\(relationship.destination)'",
                        "Add a new relationship to '\(current.destination)' and keep '\(relationship.name)'")
                } else if current.deleteRule != relationship.deleteRule {
                    note(
                        location, "the delete rule of '\(relationship.name)' changed from \(relationship.deleteRule.rawValue) to \(current.deleteRule.rawValue)",
                        "Nodes apply the rule of the release they run until all are upgraded: a delete made on an old node follows the old rule")
                }
            }
            for attribute in entity.attributes where !oldNames.contains(attribute.logName) {
                let location = "\(entity.name).\(attribute.name)"
                if !attribute.optional && attribute.defaultValue == nil {
                    refuse(
                        location, "new attribute '\(attribute.name)' of '\(entity.name)' is required and has no default",
                        "A new required attribute needs a default value for existing rows: give it one, or make it optional")
                    continue
                }
                added.append(location)
            }
            for relationship in entity.relationships where !oldNames.contains(relationship.name) { added.append("\(entity.name).\(relationship.name)") }
            if newNames.count > Schema.maximumColumnsPerEntity {
                refuse(entity.name, "'\(entity.name)' would have \(newNames.count) columns", "At most \(Schema.maximumColumnsPerEntity); split the entity")
            }
            // Keys compared in the log's names, so that a renamed column's key is the same key.
            func logNames(_ key: [String], of entity: Entity) -> [String] {
                key.map { column in entity.attributes.first { $0.name == column }?.logName ?? column }.sorted()
            }
            let oldKeys = Set(before.uniqueKeys.map { logNames($0, of: before) })
            for key in entity.uniqueKeys where !oldKeys.contains(logNames(key, of: entity)) {
                note(
                    entity.name, "a new unique key (\(key.joined(separator: ", ")))",
                    "Rows written before it may collide: the merge keeps one of each colliding group on every node, and nodes on the old release do not enforce it")
            }
        }
        if unsafe.isEmpty, !added.isEmpty {
            note(
                "version", "nodes on version \(old.version) apply what they declare of changes written under \(new.version) and keep the rest",
                "They merge it when they are upgraded; nothing waits meanwhile")
        }
        findings = unsafe + notes
    }

    /// A new entity with exactly the removed one's key and columns: most likely the same one renamed.
    private static func renamedEntity(_ entity: Entity, in new: Schema, old: Schema) -> String? {
        let candidates = new.entities.filter {
            old.entity(logName: $0.logName) == nil && $0.primaryKey == entity.primaryKey && Set($0.columnNames) == Set(entity.columnNames)
        }
        return candidates.count == 1 ? candidates[0].name : nil
    }

    /// The report `logsync schema check` prints.
    package var report: String {
        var lines = ["\(isSafe ? "safe" : "unsafe"): version \(old.version) to \(new.version)"]
        if !added.isEmpty { lines.append("adds: \(added.joined(separator: ", "))") }
        lines += findings.map(\.description)
        return lines.joined(separator: "\n")
    }
}
