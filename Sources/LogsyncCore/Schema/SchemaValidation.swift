extension Schema {
    /// Columns per entity are limited so that a change's changed-columns set fits one 64-bit mask.
    public static let maximumColumnsPerEntity = 63

    /// Checks the whole declaration before anything touches a file, so a bad schema creates nothing.
    public func validate() throws(SchemaError) {
        guard version >= 1 else {
            throw SchemaError(.invalidVersion, at: "version", "schema version must be 1 or more, got \(version)")
        }
        var entityNames = Set<String>()
        for entity in entities {
            try Self.checkIdentifier(entity.name, at: entity.name, what: "entity name")
            guard entityNames.insert(entity.name.lowercased()).inserted else {
                throw SchemaError(.duplicateName, at: entity.name, "entity '\(entity.name)' is declared twice")
            }
            if let identifier = entity.renamingIdentifier { try Self.checkIdentifier(identifier, at: entity.name, what: "renamingIdentifier") }
        }
        // Names in the log: a renamed entity's identifier must name no other entity there.
        var logNames = Set<String>()
        for entity in entities where !logNames.insert(entity.logName.lowercased()).inserted {
            throw SchemaError(
                .duplicateName, at: entity.name,
                "'\(entity.logName)' names two entities in the log: a renamingIdentifier must be a name no other entity has")
        }
        for entity in entities {
            try validate(entity)
        }
    }

    private func validate(_ entity: Entity) throws(SchemaError) {
        guard let key = entity.primaryKey else {
            throw SchemaError(
                .missingPrimaryKey, at: entity.name,
                "entity '\(entity.name)' has no primary key; declare one of type uuid or uuidBlob")
        }
        try Self.checkIdentifier(key.name, at: "\(entity.name).\(key.name)", what: "primary key name")
        guard key.type.isGlobalKey else {
            throw SchemaError(
                .unusablePrimaryKey, at: "\(entity.name).\(key.name)",
                "primary key '\(key.name)' of '\(entity.name)' has type \(key.type.rawValue); keys must be "
                    + "globally unique across devices (integer row ids collide): use uuid (text) or uuidBlob (16 bytes)")
        }
        var columns: Set<String> = [key.name.lowercased()]
        for attribute in entity.attributes {
            let location = "\(entity.name).\(attribute.name)"
            try Self.checkIdentifier(attribute.name, at: location, what: "attribute name")
            guard columns.insert(attribute.name.lowercased()).inserted else {
                throw SchemaError(.duplicateName, at: location, "column '\(attribute.name)' is declared twice in '\(entity.name)'")
            }
            if let value = attribute.defaultValue {
                try Self.checkDefault(value, for: attribute.type, at: location)
            }
        }
        for relationship in entity.relationships {
            let location = "\(entity.name).\(relationship.name)"
            try Self.checkIdentifier(relationship.name, at: location, what: "relationship name")
            guard columns.insert(relationship.name.lowercased()).inserted else {
                throw SchemaError(.duplicateName, at: location, "column '\(relationship.name)' is declared twice in '\(entity.name)'")
            }
            guard self.entity(named: relationship.destination) != nil else {
                throw SchemaError(
                    .unknownDestination, at: location,
                    "relationship '\(relationship.name)' points to '\(relationship.destination)', which is not an entity of this schema")
            }
        }
        // Names in the log: a renamed attribute's identifier must name no other column there.
        var logNames: Set<String> = []
        for name in entity.attributes.map(\.logName) + entity.relationships.map(\.name) {
            guard logNames.insert(name.lowercased()).inserted else {
                throw SchemaError(
                    .duplicateName, at: "\(entity.name).\(name)",
                    "'\(name)' names two columns of '\(entity.name)' in the log: a renamingIdentifier must be a name no other column has")
            }
        }
        for attribute in entity.attributes {
            if let identifier = attribute.renamingIdentifier {
                try Self.checkIdentifier(identifier, at: "\(entity.name).\(attribute.name)", what: "renamingIdentifier")
            }
            if attribute.deprecated, !attribute.optional, attribute.defaultValue == nil {
                throw SchemaError(
                    .invalidDeprecation, at: "\(entity.name).\(attribute.name)",
                    "deprecated attribute '\(attribute.name)' is required and has no default, but rows inserted by an app that no longer uses it leave it out")
            }
        }
        var sources = Set<String>()
        for attribute in entity.attributes {
            guard let conversion = attribute.convertedFrom else { continue }
            let location = "\(entity.name).\(attribute.name)"
            try Self.checkIdentifier(conversion.attribute, at: location, what: "convertedFrom attribute")
            guard TypeConversion.isSupported(from: conversion.type, to: attribute.type) else {
                throw SchemaError(
                    .invalidConversion, at: location,
                    "'\(attribute.name)' converts from \(conversion.type.rawValue) to \(attribute.type.rawValue), which logsync cannot convert; add a new attribute and have the app fill it instead")
            }
            guard attribute.optional || attribute.defaultValue != nil else {
                throw SchemaError(
                    .invalidConversion, at: location, "'\(attribute.name)' converts from '\(conversion.attribute)', so it must be optional or have a default")
            }
            guard sources.insert(conversion.attribute.lowercased()).inserted else {
                throw SchemaError(.invalidConversion, at: location, "two attributes convert from '\(conversion.attribute)'")
            }
            guard !entity.contracted.contains(where: { $0.lowercased() == conversion.attribute.lowercased() }) else {
                throw SchemaError(
                    .invalidConversion, at: location,
                    "'\(attribute.name)' converts from '\(conversion.attribute)', which is also contracted: its changes are converted or dropped, not both")
            }
            guard !entity.uniqueKeys.contains(where: { $0.contains(attribute.name) }) else {
                throw SchemaError(
                    .invalidConversion, at: location,
                    "'\(attribute.name)' converts from '\(conversion.attribute)' and is in a unique key: a conversion can make distinct values equal")
            }
        }
        // A contracted or converted attribute's changes are dropped or converted wherever they come from:
        // its name in the log can name no column again, or a node would mistake what another writes.
        for name in entity.contracted + entity.attributes.compactMap(\.convertedFrom?.attribute) {
            let location = "\(entity.name).\(name)"
            try Self.checkIdentifier(name, at: location, what: "contracted attribute")
            guard !logNames.contains(name.lowercased()), !columns.contains(name.lowercased()) else {
                throw SchemaError(
                    .duplicateName, at: location,
                    "'\(name)' is contracted or converted in '\(entity.name)' and declared again: such a name is never used again, since nodes drop or convert what the log carries under it")
            }
        }
        guard entity.columnNames.count <= Self.maximumColumnsPerEntity else {
            throw SchemaError(
                .tooManyColumns, at: entity.name,
                "'\(entity.name)' declares \(entity.columnNames.count) columns; at most \(Self.maximumColumnsPerEntity) are supported")
        }
        for (index, uniqueKey) in entity.uniqueKeys.enumerated() {
            let location = "\(entity.name).uniqueKeys[\(index)]"
            guard !uniqueKey.isEmpty else {
                throw SchemaError(.unknownColumn, at: location, "a unique key needs at least one column")
            }
            for column in uniqueKey where !columns.contains(column.lowercased()) {
                throw SchemaError(.unknownColumn, at: location, "unique key names '\(column)', which is not a column of '\(entity.name)'")
            }
            for column in uniqueKey where entity.attributes.contains(where: { $0.name == column && $0.deprecated }) {
                throw SchemaError(
                    .invalidDeprecation, at: location,
                    "unique key names '\(column)', which is deprecated: an app that no longer writes it cannot keep a key on it")
            }
        }
    }

    private static func checkDefault(_ value: DefaultValue, for type: AttributeType, at location: String) throws(SchemaError) {
        let fits: Bool
        switch (value, type) {
        case (.integer, .integer), (.integer, .bool), (.integer, .real), (.integer, .date): fits = true
        case (.real, .real), (.real, .date): fits = true
        case (.text, .text), (.text, .uuid): fits = true
        default: fits = false
        }
        guard fits else {
            throw SchemaError(.invalidDefault, at: location, "default value \(value) does not fit type \(type.rawValue)")
        }
    }

    /// Names become SQL identifiers: plain ASCII, not reserved for logsync's or SQLite's own tables.
    static func checkIdentifier(_ name: String, at location: String, what: String) throws(SchemaError) {
        let scalars = Array(name.unicodeScalars)
        let valid =
            !scalars.isEmpty && scalars.count <= 64
            && scalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
            && !("0"..."9").contains(scalars[0])
        guard valid else {
            throw SchemaError(
                .invalidName, at: location,
                "\(what) '\(name)' is not a plain identifier (ASCII letters, digits and '_', not starting with a digit, at most 64)")
        }
        let lower = name.lowercased()
        guard !lower.hasPrefix("_ls_"), !lower.hasPrefix("sqlite_") else {
            throw SchemaError(.invalidName, at: location, "\(what) '\(name)' uses a reserved prefix (_ls_ or sqlite_)")
        }
    }
}
