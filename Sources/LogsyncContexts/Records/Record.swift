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
    public static var entityName: String { String(describing: Self.self) }

    /// The identity of this record's row.
    public var objectID: ObjectID { ObjectID(entity: Self.entityName, id: id) }
}

/// The identity of a row across contexts, processes and nodes: its entity and primary key.
public struct ObjectID: Sendable, Hashable, Codable, CustomStringConvertible {
    public var entity: String
    public var id: UUID

    public init(entity: String, id: UUID) {
        self.entity = entity
        self.id = id
    }

    public var description: String { "\(entity)/\(id.uuidString.lowercased())" }
}

/// A relationship column: the primary key of a row of `Destination`, or, as an optional, none.
///
/// Navigate it with ``Context/object(_:)``; the inverse direction is a fetch filtered on the column.
public struct Reference<Destination: Record>: Sendable, Hashable, Codable {
    public var id: UUID

    public init(_ id: UUID) { self.id = id }
    public init(_ record: Destination) { self.id = record.id }

    public var objectID: ObjectID { ObjectID(entity: Destination.entityName, id: id) }

    public init(from decoder: any Decoder) throws {
        id = try decoder.singleValueContainer().decode(UUID.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(id)
    }
}
