/// The declared shape of the synced part of a store: versioned entities (tables) with their attributes,
/// relationships and unique keys.
///
/// A schema is declared in code (or loaded from JSON with ``Schema/init(json:)``) and registered with a
/// store, which creates or additively migrates the tables and installs history capture on each.
///
/// ```swift
/// let schema = Schema(version: 1, entities: [
///     Entity("Folder", attributes: [Attribute("name", .text, optional: false, default: "")]),
///     Entity("Note",
///            attributes: [Attribute("title", .text, preservedOnDelete: true), Attribute("body", .text)],
///            relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade)]),
/// ])
/// ```
public struct Schema: Sendable, Hashable, Codable {
    /// Increases whenever the declaration changes; registration migrates additively from older versions.
    public var version: Int
    public var entities: [Entity]

    public init(version: Int, entities: [Entity]) {
        self.version = version
        self.entities = entities
    }

    public func entity(named name: String) -> Entity? {
        entities.first { $0.name == name }
    }

    /// The entity whose changes travel in the log under `logName` (``Entity/logName``).
    public func entity(logName: String) -> Entity? {
        entities.first { $0.logName == logName }
    }
}

/// A synced table.
public struct Entity: Sendable, Hashable, Codable {
    public var name: String
    /// The globally unique key. Only ``AttributeType/uuid`` and ``AttributeType/uuidBlob`` are accepted:
    /// integer row ids collide across devices.
    public var primaryKey: PrimaryKey?
    public var attributes: [Attribute]
    public var relationships: [Relationship]
    /// Each unique key is a list of attribute or relationship names whose combined values are unique.
    public var uniqueKeys: [[String]]
    /// The names in the log (``Attribute/logName``) of attributes an earlier release deprecated and this
    /// one removed: a store drops their columns when it registers this schema, and changes to them in
    /// segments and baselines of any release are ignored. A contracted name is never declared again
    /// (`docs/schema-evolution.md`, "Removing an attribute").
    public var contracted: [String]
    /// The name the entity was first declared with, when a later release renamed it (as Core Data's
    /// `renamingIdentifier`): its changes travel in the log under this name, so that nodes on releases
    /// before and after the rename write into one table. It stays the same through every later rename.
    public var renamingIdentifier: String?

    public init(
        _ name: String,
        primaryKey: PrimaryKey? = PrimaryKey("id", .uuid),
        attributes: [Attribute] = [],
        relationships: [Relationship] = [],
        uniqueKeys: [[String]] = [],
        contracted: [String] = [],
        renamingIdentifier: String? = nil
    ) {
        self.name = name
        self.primaryKey = primaryKey
        self.attributes = attributes
        self.relationships = relationships
        self.uniqueKeys = uniqueKeys
        self.contracted = contracted
        self.renamingIdentifier = renamingIdentifier
    }

    /// The name changes to this entity's rows carry in segments and baselines.
    public var logName: String { renamingIdentifier ?? name }

    private enum CodingKeys: String, CodingKey { case name, primaryKey, attributes, relationships, uniqueKeys, contracted, renamingIdentifier }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        primaryKey = try container.decodeIfPresent(PrimaryKey.self, forKey: .primaryKey)
        attributes = try container.decode([Attribute].self, forKey: .attributes)
        relationships = try container.decode([Relationship].self, forKey: .relationships)
        uniqueKeys = try container.decode([[String]].self, forKey: .uniqueKeys)
        contracted = try container.decodeIfPresent([String].self, forKey: .contracted) ?? []
        renamingIdentifier = try container.decodeIfPresent(String.self, forKey: .renamingIdentifier)
    }

    /// Written only when there is something to say, so that a store registered before these fields existed
    /// encodes its schema as it always has.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encodeIfPresent(primaryKey, forKey: .primaryKey)
        try container.encode(attributes, forKey: .attributes)
        try container.encode(relationships, forKey: .relationships)
        try container.encode(uniqueKeys, forKey: .uniqueKeys)
        if !contracted.isEmpty { try container.encode(contracted, forKey: .contracted) }
        try container.encodeIfPresent(renamingIdentifier, forKey: .renamingIdentifier)
    }

    /// The names of the non-key columns in declaration order: attributes first, then relationships.
    /// A column's position in this list is its bit in a change's changed-columns mask.
    public var columnNames: [String] {
        attributes.map(\.name) + relationships.map(\.name)
    }
}

public struct PrimaryKey: Sendable, Hashable, Codable {
    public var name: String
    public var type: AttributeType

    public init(_ name: String, _ type: AttributeType) {
        self.name = name
        self.type = type
    }
}

public struct Attribute: Sendable, Hashable, Codable {
    public var name: String
    public var type: AttributeType
    public var optional: Bool
    /// Used for rows that predate the attribute and for inserts that omit it. Required for a
    /// non-optional attribute added by a migration.
    public var defaultValue: DefaultValue?
    /// Deleting a row keeps this attribute's last value in the delete's tombstone.
    public var preservedOnDelete: Bool
    /// The name the attribute was first declared with, when a later release renamed it (as Core Data's
    /// `renamingIdentifier`): changes travel in the log under this name, so that nodes on releases before
    /// and after the rename write into one column (`docs/schema-evolution.md`). It stays the same through
    /// every later rename.
    public var renamingIdentifier: String?
    /// The app no longer uses this attribute, and a later release will remove it (list it in
    /// ``Entity/contracted``): its column stays in the store and its changes in the log, so that nodes on
    /// earlier releases keep reading and writing it, but contexts neither show nor write it. It must be
    /// optional or have a default, since rows this release inserts leave it out.
    public var deprecated: Bool
    /// The attribute this one replaces in place, with a new type (`docs/schema-evolution.md`, "Changing a
    /// type"): a store converts its values when it registers this schema, and changes that nodes on earlier
    /// releases write to it are converted into this one, at their clock, wherever they come from.
    public var convertedFrom: Conversion?

    public init(
        _ name: String,
        _ type: AttributeType,
        optional: Bool = true,
        default defaultValue: DefaultValue? = nil,
        preservedOnDelete: Bool = false,
        renamingIdentifier: String? = nil,
        deprecated: Bool = false,
        convertedFrom: Conversion? = nil
    ) {
        self.name = name
        self.type = type
        self.optional = optional
        self.defaultValue = defaultValue
        self.preservedOnDelete = preservedOnDelete
        self.renamingIdentifier = renamingIdentifier
        self.deprecated = deprecated
        self.convertedFrom = convertedFrom
    }

    private enum CodingKeys: String, CodingKey {
        case name, type, optional, defaultValue, preservedOnDelete, renamingIdentifier, deprecated, convertedFrom
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        type = try container.decode(AttributeType.self, forKey: .type)
        optional = try container.decode(Bool.self, forKey: .optional)
        defaultValue = try container.decodeIfPresent(DefaultValue.self, forKey: .defaultValue)
        preservedOnDelete = try container.decode(Bool.self, forKey: .preservedOnDelete)
        renamingIdentifier = try container.decodeIfPresent(String.self, forKey: .renamingIdentifier)
        deprecated = try container.decodeIfPresent(Bool.self, forKey: .deprecated) ?? false
        convertedFrom = try container.decodeIfPresent(Conversion.self, forKey: .convertedFrom)
    }

    /// As the synthesized form, with `deprecated` only when set: stores registered before it existed
    /// encode their schema as they always have.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(optional, forKey: .optional)
        try container.encodeIfPresent(defaultValue, forKey: .defaultValue)
        try container.encode(preservedOnDelete, forKey: .preservedOnDelete)
        try container.encodeIfPresent(renamingIdentifier, forKey: .renamingIdentifier)
        if deprecated { try container.encode(deprecated, forKey: .deprecated) }
        try container.encodeIfPresent(convertedFrom, forKey: .convertedFrom)
    }

    /// The name changes to this attribute carry in segments and baselines.
    public var logName: String { renamingIdentifier ?? name }
}

/// What an attribute declared with ``Attribute/convertedFrom`` replaces: the attribute of the same entity
/// with this name in the log (``Attribute/logName``), and the type it had.
public struct Conversion: Sendable, Hashable, Codable {
    public var attribute: String
    public var type: AttributeType

    public init(from attribute: String, _ type: AttributeType) {
        self.attribute = attribute
        self.type = type
    }
}

/// A literal default for an attribute, as it appears in the table definition.
public enum DefaultValue: Sendable, Hashable, Codable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral
{
    case integer(Int64)
    case real(Double)
    case text(String)

    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .real(value)
        } else {
            self = .text(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .integer(let value): try container.encode(value)
        case .real(let value): try container.encode(value)
        case .text(let value): try container.encode(value)
        }
    }
}

/// The storage type of an attribute.
public enum AttributeType: String, Sendable, Hashable, Codable, CaseIterable {
    case text
    case integer
    case real
    case blob
    /// Stored as INTEGER 0 or 1.
    case bool
    /// Stored as REAL seconds since 1970-01-01 UTC.
    case date
    /// A UUID as 36-character lowercase text.
    case uuid
    /// A UUID as a 16-byte blob.
    case uuidBlob

    /// Whether this type can serve as a globally unique primary key.
    public var isGlobalKey: Bool { self == .uuid || self == .uuidBlob }
}

/// A reference column from one entity to another, with what happens when the referenced row is deleted.
public struct Relationship: Sendable, Hashable, Codable {
    /// The column name in the source entity; it holds the destination's primary key or NULL.
    public var name: String
    public var destination: String
    public var deleteRule: DeleteRule

    public init(_ name: String, to destination: String, deleteRule: DeleteRule = .nullify) {
        self.name = name
        self.destination = destination
        self.deleteRule = deleteRule
    }
}

/// What deleting a referenced row does to the rows that reference it. The store enforces the rule with
/// triggers, so it holds for every writer, including processes that do not use logsync.
public enum DeleteRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// Set the referencing column to NULL.
    case nullify
    /// Delete the referencing rows too.
    case cascade
    /// Refuse the delete while references exist.
    case deny
}
