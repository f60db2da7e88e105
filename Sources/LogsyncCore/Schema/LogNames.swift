/// The names entities and columns have in the log, where a release renamed one (``Entity/renamingIdentifier``,
/// ``Attribute/renamingIdentifier``): segments and baselines carry the name it was first declared with,
/// the store and the app the current one. Translation happens where changes cross between the two — export, the decoding of
/// segments and baselines — so the merge and the store see only current names. A schema without renames
/// translates nothing, at the cost of one check per transaction.
///
/// Contracted attributes (``Entity/contracted``) are dropped in both directions: whatever the log still
/// carries under their names, from releases before the contraction, reaches neither the merge nor the
/// store, and nothing under them is written again.
package struct LogNames: Sendable {
    /// Per entity that renamed or contracted an attribute, keyed by the entity's name on the side
    /// translated from: log name → current name, and current name → log name. A contracted name maps to
    /// nil in both: the translation drops it.
    private let toCurrent: [String: [String: String?]]
    private let toLog: [String: [String: String?]]
    /// Renamed entities (``Entity/renamingIdentifier``): log name → current name, and the other way.
    private let entityToCurrent: [String: String]
    private let entityToLog: [String: String]
    /// Per entity's log name, attributes converted in place (``Attribute/convertedFrom``): what the log
    /// carries under the source's name becomes the attribute's value, converted, on the way in.
    private let conversions: [String: [(source: String, target: String, from: AttributeType, to: AttributeType)]]

    package init(_ schema: Schema) {
        var toCurrent: [String: [String: String?]] = [:], toLog: [String: [String: String?]] = [:]
        var entityToCurrent: [String: String] = [:], entityToLog: [String: String] = [:]
        var conversions: [String: [(source: String, target: String, from: AttributeType, to: AttributeType)]] = [:]
        for entity in schema.entities {
            if entity.logName != entity.name {
                entityToCurrent[entity.logName] = entity.name
                entityToLog[entity.name] = entity.logName
            }
            for name in entity.contracted {
                toCurrent[entity.logName, default: [:]][name] = .some(nil)
                toLog[entity.name, default: [:]][name] = .some(nil)
            }
            for attribute in entity.attributes {
                if let conversion = attribute.convertedFrom {
                    // The target in the log's names too: the translation that follows renames it.
                    conversions[entity.logName, default: []].append((conversion.attribute, attribute.logName, conversion.type, attribute.type))
                }
                guard let identifier = attribute.renamingIdentifier, identifier != attribute.name else { continue }
                toCurrent[entity.logName, default: [:]][identifier] = attribute.name
                toLog[entity.name, default: [:]][attribute.name] = identifier
            }
        }
        self.toCurrent = toCurrent
        self.toLog = toLog
        self.entityToCurrent = entityToCurrent
        self.entityToLog = entityToLog
        self.conversions = conversions
    }

    /// `transaction` with the log's names replaced by this schema's current ones, and values of converted
    /// attributes converted.
    package func current(_ transaction: LogTransaction) -> LogTransaction {
        guard !conversions.isEmpty else { return translate(transaction, toCurrent, entityToCurrent) }
        var converted = transaction
        for index in converted.changes.indices {
            guard let entity = conversions[converted.changes[index].entity] else { continue }
            for conversion in entity {
                // A change that sets the new attribute itself (no node writes both) keeps its own value.
                guard let value = converted.changes[index].values.removeValue(forKey: conversion.source) else { continue }
                if converted.changes[index].values[conversion.target] == nil {
                    converted.changes[index].values[conversion.target] = TypeConversion.convert(value, from: conversion.from, to: conversion.to)
                }
            }
        }
        return translate(converted, toCurrent, entityToCurrent)
    }

    /// `transaction` with this schema's current names replaced by the log's.
    package func log(_ transaction: LogTransaction) -> LogTransaction { translate(transaction, toLog, entityToLog) }

    /// A baseline's row with the log's names replaced by this schema's current ones, and the registers of
    /// converted attributes converted (the later of the two registers wins, as in the merge).
    package func current(_ row: BaselineRow) -> BaselineRow {
        guard let entity = conversions[row.key.entity] else { return translate(row, toCurrent, entityToCurrent) }
        var converted = row
        for conversion in entity {
            guard let register = converted.state.columns.removeValue(forKey: conversion.source) else { continue }
            if let own = converted.state.columns[conversion.target], own.clock >= register.clock { continue }
            converted.state.columns[conversion.target] = Register(
                TypeConversion.convert(register.value, from: conversion.from, to: conversion.to), register.clock)
        }
        return translate(converted, toCurrent, entityToCurrent)
    }

    /// A row of this store with its current names replaced by the log's, for a baseline.
    package func log(_ row: BaselineRow) -> BaselineRow { translate(row, toLog, entityToLog) }

    private func translate(_ row: BaselineRow, _ table: [String: [String: String?]], _ entities: [String: String]) -> BaselineRow {
        var translated = row
        if let names = table[row.key.entity] { translated.state.columns = Self.renamed(row.state.columns, names) }
        if let entity = entities[row.key.entity] { translated.key.entity = entity }
        return translated
    }

    private func translate(
        _ transaction: LogTransaction, _ table: [String: [String: String?]], _ entities: [String: String]
    ) -> LogTransaction {
        guard !table.isEmpty || !entities.isEmpty else { return transaction }
        var translated = transaction
        for index in translated.changes.indices {
            let entity = translated.changes[index].entity
            if let names = table[entity] { translated.changes[index].values = Self.renamed(translated.changes[index].values, names) }
            if let renamed = entities[entity] { translated.changes[index].entity = renamed }
        }
        return translated
    }

    /// `columns` with each name that `names` maps replaced, and each it maps to nil left out.
    private static func renamed<Value>(_ columns: [String: Value], _ names: [String: String?]) -> [String: Value] {
        var renamed: [String: Value] = [:]
        renamed.reserveCapacity(columns.count)
        for (name, value) in columns {
            switch names[name] {
            case nil: renamed[name] = value
            case .some(let current?): renamed[current] = value
            case .some(nil): continue
            }
        }
        return renamed
    }
}
