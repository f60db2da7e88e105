import Foundation

/// A plain Swift value stored as a row of a synced entity: no managed objects, no conversion code.
///
/// A record is a `Codable` struct whose stored properties are named like the entity's columns: its
/// `id` is the primary key, attributes map by name, and a relationship is a ``Reference`` (or an
/// optional one) to the destination's record type.
///
/// ```swift
/// struct Note: Record {
///     var id = UUID()
///     var title: String?
///     var body: String?
///     var pinned = false
///     var folder: Reference<Folder>?
/// }
/// ```
///
/// The entity is named after the type unless ``entityName`` says otherwise. Properties of types that
/// `Codable` can express as a single value map to the column's declared type: `String`, integers,
/// `Double`/`Float`, `Bool`, `Date` (seconds since 1970), `UUID`, `Data` and `[UInt8]` (blobs), and
/// optionals of those (a missing value is NULL).
public protocol Record: Codable, Sendable {
    /// The entity this type is stored in; the type's name by default.
    static var entityName: String { get }
    /// The primary key: the entity's `uuid` or `uuidBlob` key column.
    var id: UUID { get }
}

extension Record {
    /// The type's name: `Note` for `struct Note: Record`.
    public static var entityName: String { String(describing: Self.self) }

    /// The identity of this record's row.
    public var objectID: ObjectID { ObjectID(entity: Self.entityName, id: id) }
}

/// The identity of a row across contexts, processes and nodes: its entity and primary key.
public struct ObjectID: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The entity's name.
    public var entity: String
    /// The primary key.
    public var id: UUID

    /// The identity of the row of `entity` whose key is `id`.
    public init(entity: String, id: UUID) {
        self.entity = entity
        self.id = id
    }

    /// `Entity/uuid`, as in `Note/6b1e2f80-2c4d-4e5f-8a9b-0c1d2e3f4a5b`.
    public var description: String { "\(entity)/\(id.uuidString.lowercased())" }
}

/// A relationship column: the primary key of a row of `Destination`, or, as an optional, none.
///
/// Navigate it with ``Context/object(_:)``; the inverse direction is a fetch filtered on the column.
public struct Reference<Destination: Record>: Sendable, Hashable, Codable {
    /// The destination's primary key.
    public var id: UUID

    /// A reference to the `Destination` record whose key is `id` (it need not exist yet).
    public init(_ id: UUID) { self.id = id }
    /// A reference to `record`.
    public init(_ record: Destination) { self.id = record.id }

    /// The identity of the destination's row.
    public var objectID: ObjectID { ObjectID(entity: Destination.entityName, id: id) }

    /// Decodes the key alone, as the relationship column holds it.
    public init(from decoder: any Decoder) throws {
        id = try decoder.singleValueContainer().decode(UUID.self)
    }

    /// Encodes the key alone, as the relationship column holds it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(id)
    }
}
