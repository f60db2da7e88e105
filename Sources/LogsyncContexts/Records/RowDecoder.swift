import LogsyncCore

/// Decodes one record from a row: each property the record decodes reads its column.
struct RowDecoder: Decoder {
    let coder: RowCoder
    let recordType: Any.Type
    let row: [String: DatabaseValue]

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowDecodingContainer(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw notKeyed }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { throw notKeyed }

    private var notKeyed: ContextError {
        ContextError(
            .typeMismatch,
            "\(recordType) does not decode from properties, so it cannot be read from a row of entity "
                + coder.entity.name,
            entity: coder.entity.name)
    }

    /// The property's stored value, nil when its column is absent from the row.
    func value(forProperty property: String) -> DatabaseValue? {
        row[property == "id" ? coder.keyColumn : property]
    }

    func decode<T: Decodable>(_ type: T.Type, forProperty property: String) throws -> T {
        let column = try coder.column(forProperty: property, of: recordType)
        guard let value = row[column.name], !value.isNull else { throw column.missingValue }
        return try column.decode(type, from: value)
    }
}

/// The record's properties. An optional property whose column is absent or NULL decodes to nil.
struct RowDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: RowDecoder
    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] {
        decoder.row.keys.compactMap { Key(stringValue: $0 == decoder.coder.keyColumn ? "id" : $0) }
    }

    func contains(_ key: Key) -> Bool { decoder.value(forProperty: key.stringValue) != nil }
    func decodeNil(forKey key: Key) -> Bool { decoder.value(forProperty: key.stringValue)?.isNull ?? true }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.decode(type, forProperty: key.stringValue)
    }
    // The generic method meets the other integers' requirements; these two have defaults that throw.
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 {
        try decoder.decode(type, forProperty: key.stringValue)
    }
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 {
        try decoder.decode(type, forProperty: key.stringValue)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw decoder.coder.nestedValueError(forProperty: key.stringValue, of: decoder.recordType)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw decoder.coder.nestedValueError(forProperty: key.stringValue, of: decoder.recordType)
    }
    func superDecoder() throws -> any Decoder { throw decoder.coder.nestedValueError(forProperty: "super", of: decoder.recordType) }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        throw decoder.coder.nestedValueError(forProperty: key.stringValue, of: decoder.recordType)
    }
}

/// Decodes one property's value from its column: a ``ColumnValue`` directly, any other type through its
/// own `Codable` implementation, which must read a single ``ColumnValue`` or nil.
struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    let column: PropertyColumn
    /// The property's type, which errors name.
    let valueType: Any.Type
    let value: DatabaseValue

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func decodeNil() -> Bool { value.isNull }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try read(type) }
    func decode(_ type: Int128.Type) throws -> Int128 { try read(type) }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try read(type) }

    private func read<T: Decodable>(_ type: T.Type) throws -> T {
        guard let direct = type as? any ColumnValue.Type else { return try T(from: self) }
        guard let decoded = direct.init(databaseValue: value) as? T else {
            throw column.mismatch("\(valueType)", reading: value)
        }
        return decoded
    }

    func singleValueContainer() -> any SingleValueDecodingContainer { self }

    // A struct, array or dictionary is not stored in a column.
    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw column.mismatch("\(valueType)", reading: value)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw column.mismatch("\(valueType)", reading: value)
    }
}
