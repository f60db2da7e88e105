import Foundation
import LogsyncCore

/// Converts between records of one type and rows of their entity.
///
/// A row is keyed by column name. The record's `id` always maps to the primary key column, whatever that
/// column is named; every other property maps to the attribute or relationship of the same name. Values
/// are converted by the column's declared type (see ``ColumnValue``); a relationship column holds its
/// destination's key, as text or as a 16-byte blob depending on the destination's key type.
///
/// Encoding writes a column for every property the record encodes, `.null` for a nil optional. A column
/// missing from an encoded row is one the record type has no property for: callers leave it untouched.
/// Decoding reads the columns the type's properties ask for and ignores any others; an optional property
/// whose column is absent or NULL decodes to nil.
struct RowCoder: Sendable {
    /// The record type's entity in the schema.
    let entity: Entity
    /// The primary key column, which holds the record's `id`.
    let keyColumn: String
    /// The column of each property name (`id` for the key), with its declared type and the description
    /// errors use; a relationship column is declared as its destination's key.
    private let columns: [String: (name: String, type: AttributeType, declaration: String)]

    init<R: Record>(_ type: R.Type, schema: Schema) throws(ContextError) {
        let typeName = String(describing: R.self)
        guard let entity = schema.entity(named: R.entityName) else {
            let declared = schema.entities.isEmpty ? "none" : schema.entities.map(\.name).joined(separator: ", ")
            throw ContextError(
                .unknownEntity,
                "\(typeName) is stored in entity \(R.entityName), which the schema does not declare "
                    + "(declared entities: \(declared))",
                entity: R.entityName)
        }
        guard let key = entity.primaryKey, key.type.isGlobalKey else {
            throw ContextError(
                .unknownEntity,
                "\(typeName) cannot be stored in entity \(entity.name): it has no uuid or uuidBlob primary key "
                    + "to hold the record's id",
                entity: entity.name)
        }
        var columns: [String: (name: String, type: AttributeType, declaration: String)] = [:]
        // A deprecated attribute stays in the store for nodes on earlier releases, but records neither read nor write it.
        for attribute in entity.attributes where !attribute.deprecated {
            columns[attribute.name] = (attribute.name, attribute.type, "\(attribute.type)")
        }
        for relationship in entity.relationships {
            guard let destinationKey = schema.entity(named: relationship.destination)?.primaryKey else {
                throw ContextError(
                    .unknownEntity,
                    "\(typeName) cannot be stored in entity \(entity.name): its relationship \(relationship.name) "
                        + "leads to \(relationship.destination), which the schema does not declare with a primary key",
                    entity: entity.name)
            }
            columns[relationship.name] = (
                relationship.name, destinationKey.type, "\(destinationKey.type) key of \(relationship.destination)"
            )
        }
        columns["id"] = (key.name, key.type, "\(key.type) primary key")
        self.entity = entity
        self.keyColumn = key.name
        self.columns = columns
    }

    /// The row of `record`: the key column and a column for every property the record encodes.
    func encode<R: Record>(_ record: R) throws(ContextError) -> [String: DatabaseValue] {
        let encoder = RowEncoder(coder: self, recordType: R.self)
        do {
            try record.encode(to: encoder)
        } catch {
            throw (error as? ContextError)
                ?? ContextError(
                    .typeMismatch, "\(R.self) cannot be encoded as a row of entity \(entity.name)",
                    entity: entity.name,
                    cause: error)
        }
        return encoder.row
    }

    /// The record stored in `row`, which may hold more columns than the record has properties.
    func decode<R: Record>(_ type: R.Type, from row: [String: DatabaseValue]) throws(ContextError) -> R {
        let decoder = RowDecoder(coder: self, recordType: R.self, row: row)
        do {
            return try R(from: decoder)
        } catch {
            throw (error as? ContextError)
                ?? ContextError(
                    .typeMismatch, "\(R.self) cannot be decoded from a row of entity \(entity.name)",
                    entity: entity.name,
                    cause: error)
        }
    }

    /// The column a property of `recordType` maps to: the key column for `id`, else the one of the same name.
    func column(forProperty property: String, of recordType: Any.Type) throws(ContextError) -> PropertyColumn {
        guard let column = columns[property] else {
            if entity.attributes.contains(where: { $0.name == property && $0.deprecated }) {
                throw ContextError(
                    .unknownProperty,
                    "\(recordType).\(property) maps to '\(entity.name).\(property)', which this schema deprecates: remove the property from the record",
                    entity: entity.name)
            }
            let declared = (["\(keyColumn) for id"] + EntityColumns.appColumns(of: entity)).joined(separator: ", ")
            throw ContextError(
                .unknownProperty,
                "\(recordType).\(property) has no column in entity \(entity.name) (its columns: \(declared))",
                entity: entity.name)
        }
        return PropertyColumn(
            recordType: recordType, property: property, entity: entity.name, name: column.name, type: column.type,
            declaration: column.declaration)
    }

    /// Why a property cannot be encoded or decoded as a container of its own.
    func nestedValueError(forProperty property: String, of recordType: Any.Type) -> ContextError {
        do {
            return try column(forProperty: property, of: recordType).mismatch("a nested container")
        } catch {
            return error
        }
    }

    /// How a key is stored in a column of `type`: 36 lowercase characters, or 16 bytes for `uuidBlob`.
    static func keyValue(_ id: UUID, type: AttributeType) -> DatabaseValue {
        type == .uuidBlob ? .blob(withUnsafeBytes(of: id.uuid) { Array($0) }) : .text(id.uuidString.lowercased())
    }

    /// The key in a stored value: text in any case, or a 16-byte blob.
    static func uuid(from value: DatabaseValue) -> UUID? {
        switch value {
        case .text(let text): UUID(uuidString: text)
        case .blob(let bytes) where bytes.count == 16:
            UUID(uuid: bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
        default: nil
        }
    }
}

/// One property of a record type and the column it maps to: where its value is converted, and what the
/// errors of that conversion name.
struct PropertyColumn {
    let recordType: Any.Type
    let property: String
    let entity: String
    /// The column's name, which differs from the property's for `id`.
    let name: String
    let type: AttributeType
    let declaration: String

    /// The stored form of the property's value.
    func encode<T: Encodable>(_ value: T) throws -> DatabaseValue {
        let encoder = ColumnEncoder(column: self, valueType: T.self)
        do {
            try encoder.encode(value)
        } catch {
            throw (error as? ContextError) ?? mismatch("\(T.self)", cause: error)
        }
        guard let stored = encoder.value else { throw mismatch("\(T.self)") }
        return stored
    }

    /// The property's value read from the column's non-NULL `value`.
    func decode<T: Decodable>(_ type: T.Type, from value: DatabaseValue) throws -> T {
        do {
            return try ColumnDecoder(column: self, valueType: T.self, value: value).decode(T.self)
        } catch {
            throw (error as? ContextError) ?? mismatch("\(T.self)", reading: value, cause: error)
        }
    }

    /// A value of `valueType` does not fit the column (or, when `reading` is given, cannot be read from it).
    func mismatch(_ valueType: String, reading value: DatabaseValue? = nil, cause: (any Error)? = nil) -> ContextError {
        let problem = value.map { "cannot be read from \($0.summary) in" } ?? "does not fit"
        return ContextError(
            .typeMismatch, "\(recordType).\(property) (\(valueType)) \(problem) \(place)", entity: entity, cause: cause)
    }

    /// A non-optional property whose column is absent from the row or NULL.
    var missingValue: ContextError {
        ContextError(
            .typeMismatch, "\(recordType).\(property) is not optional but the row has no value for \(place)",
            entity: entity)
    }

    private var place: String { "column \(name) (\(declaration)) of entity \(entity)" }
}

extension DatabaseValue {
    /// The kind of a stored value, for messages: its content only when it is short.
    fileprivate var summary: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): "integer \(value)"
        case .real(let value): "real \(value)"
        case .text(let text): text.count <= 40 ? "text \(description)" : "\(text.count) characters of text"
        case .blob(let bytes): "a \(bytes.count)-byte blob"
        case .nonUTF8Text(let bytes):
            bytes.count <= 20 ? "text that is not valid UTF-8 (\(description))" : "\(bytes.count) bytes of text that is not valid UTF-8"
        }
    }
}

/// A type stored directly in a column rather than through its own `Codable` implementation: strings,
/// numbers, `Bool`, `Date`, `UUID`, `Data` and `[UInt8]`. Any other type encodes itself, and must come
/// down to one of these (as a raw-value enum or a ``Reference`` does).
protocol ColumnValue {
    /// The stored form in a column declared as `type`, or nil if the value does not fit it.
    func databaseValue(as type: AttributeType) -> DatabaseValue?
    /// The value read from a stored one, or nil if it cannot be read as this type.
    init?(databaseValue: DatabaseValue)
}

extension String: ColumnValue {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .text ? .text(self) : nil }

    init?(databaseValue: DatabaseValue) {
        guard case .text(let text) = databaseValue else { return nil }
        self = text
    }
}

/// Integers go to `integer` columns, and to `real` ones when the conversion is exact.
extension ColumnValue where Self: BinaryInteger {
    func databaseValue(as type: AttributeType) -> DatabaseValue? {
        switch type {
        case .integer: Int64(exactly: self).map(DatabaseValue.integer)
        case .real: Double(exactly: self).map(DatabaseValue.real)
        default: nil
        }
    }

    init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .integer(let value): self.init(exactly: value)
        case .real(let value): self.init(exactly: value)
        default: return nil
        }
    }
}

extension Int: ColumnValue {}
extension Int8: ColumnValue {}
extension Int16: ColumnValue {}
extension Int32: ColumnValue {}
extension Int64: ColumnValue {}
extension Int128: ColumnValue {}
extension UInt: ColumnValue {}
extension UInt8: ColumnValue {}
extension UInt16: ColumnValue {}
extension UInt32: ColumnValue {}
extension UInt64: ColumnValue {}
extension UInt128: ColumnValue {}

extension ColumnValue where Self: BinaryFloatingPoint {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .real ? .real(Double(self)) : nil }

    init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .real(let value): self.init(value)
        case .integer(let value): self.init(value)
        default: return nil
        }
    }
}

extension Double: ColumnValue {}
extension Float: ColumnValue {}

/// Stored as 0 or 1.
extension Bool: ColumnValue {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .bool ? .integer(self ? 1 : 0) : nil }

    init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .integer(0): self = false
        case .integer(1): self = true
        default: return nil
        }
    }
}

/// Stored as seconds since 1970.
extension Date: ColumnValue {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .date ? .real(timeIntervalSince1970) : nil }

    init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .real(let seconds): self.init(timeIntervalSince1970: seconds)
        case .integer(let seconds): self.init(timeIntervalSince1970: Double(seconds))
        default: return nil
        }
    }
}

/// Stored like a key: in `uuid` and `uuidBlob` columns, and in relationship columns.
extension UUID: ColumnValue {
    func databaseValue(as type: AttributeType) -> DatabaseValue? {
        type.isGlobalKey ? RowCoder.keyValue(self, type: type) : nil
    }

    init?(databaseValue: DatabaseValue) {
        guard let id = RowCoder.uuid(from: databaseValue) else { return nil }
        self = id
    }
}

extension Data: ColumnValue {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .blob ? .blob(Array(self)) : nil }

    init?(databaseValue: DatabaseValue) {
        guard case .blob(let bytes) = databaseValue else { return nil }
        self.init(bytes)
    }
}

extension Array: ColumnValue where Element == UInt8 {
    func databaseValue(as type: AttributeType) -> DatabaseValue? { type == .blob ? .blob(self) : nil }

    init?(databaseValue: DatabaseValue) {
        guard case .blob(let bytes) = databaseValue else { return nil }
        self = bytes
    }
}
