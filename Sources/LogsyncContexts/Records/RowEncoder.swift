import LogsyncCore

/// Encodes one record into a row: each property the record encodes becomes its column.
final class RowEncoder: Encoder {
    let coder: RowCoder
    let recordType: Any.Type
    var row: [String: DatabaseValue] = [:]

    init(coder: RowCoder, recordType: Any.Type) {
        self.coder = coder
        self.recordType = recordType
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RowEncodingContainer(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { Refusal(error: notKeyed) }
    func singleValueContainer() -> any SingleValueEncodingContainer { Refusal(error: notKeyed) }

    private var notKeyed: ContextError {
        ContextError(
            .typeMismatch,
            "\(recordType) does not encode as properties, so it cannot be a row of entity \(coder.entity.name)",
            entity: coder.entity.name)
    }

    func encode<T: Encodable>(_ value: T, forProperty property: String) throws {
        let column = try coder.column(forProperty: property, of: recordType)
        row[column.name] = try column.encode(value)
    }

    func encodeNil(forProperty property: String) throws {
        let column = try coder.column(forProperty: property, of: recordType)
        row[column.name] = .null
    }
}

/// The record's properties. A nil optional is written as `.null`: `encodeIfPresent`, which synthesized
/// `Codable` uses for optionals and which would otherwise skip nil, is overridden for every type.
struct RowEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: RowEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { try encoder.encodeNil(forProperty: key.stringValue) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.encode(value, forProperty: key.stringValue)
    }
    // The generic method meets the other integers' requirements; these two have defaults that throw.
    mutating func encode(_ value: Int128, forKey key: Key) throws {
        try encoder.encode(value, forProperty: key.stringValue)
    }
    mutating func encode(_ value: UInt128, forKey key: Key) throws {
        try encoder.encode(value, forProperty: key.stringValue)
    }

    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int128?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt128?, forKey key: Key) throws { try encodeOrNull(value, key) }

    private func encodeOrNull<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value {
            try encoder.encode(value, forProperty: key.stringValue)
        } else {
            try encoder.encodeNil(forProperty: key.stringValue)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedRefusal(error: encoder.coder.nestedValueError(forProperty: key.stringValue, of: encoder.recordType)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        Refusal(error: encoder.coder.nestedValueError(forProperty: key.stringValue, of: encoder.recordType))
    }

    mutating func superEncoder() -> any Encoder { Refusal(error: encoder.coder.nestedValueError(forProperty: "super", of: encoder.recordType)) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        Refusal(error: encoder.coder.nestedValueError(forProperty: key.stringValue, of: encoder.recordType))
    }
}

/// Encodes one property's value into its column: a ``ColumnValue`` directly, any other value through
/// its own `Codable` implementation, which must come down to a single ``ColumnValue`` or nil.
final class ColumnEncoder: Encoder, SingleValueEncodingContainer {
    let column: PropertyColumn
    /// The property's type, which errors name.
    let valueType: Any.Type
    /// The stored form, once the value has been encoded.
    var value: DatabaseValue?

    init(column: PropertyColumn, valueType: Any.Type) {
        self.column = column
        self.valueType = valueType
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func encodeNil() { value = .null }
    func encode<T: Encodable>(_ value: T) throws { try store(value) }
    func encode(_ value: Int128) throws { try store(value) }
    func encode(_ value: UInt128) throws { try store(value) }

    private func store<T: Encodable>(_ value: T) throws {
        guard let direct = value as? any ColumnValue else { return try value.encode(to: self) }
        guard let stored = direct.databaseValue(as: column.type) else { throw column.mismatch("\(valueType)") }
        self.value = stored
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    // A struct, array or dictionary does not fit in a column.
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedRefusal(error: column.mismatch("\(valueType)")))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { Refusal(error: column.mismatch("\(valueType)")) }
}

/// The encoder and containers handed out where nothing can be encoded (inside a property's value, or a
/// record that is not made of properties): every write fails with `error`.
struct Refusal: Encoder, UnkeyedEncodingContainer, SingleValueEncodingContainer {
    let error: ContextError
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var count: Int { 0 }

    func encodeNil() throws { throw error }
    func encode<T: Encodable>(_ value: T) throws { throw error }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedRefusal(error: error))
    }
    func nestedContainer<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        container(keyedBy: type)
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { self }
    func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }
    func superEncoder() -> any Encoder { self }
}

/// The keyed container of a ``Refusal``.
struct KeyedRefusal<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let error: ContextError
    var codingPath: [any CodingKey] { [] }

    func encodeNil(forKey key: Key) throws { throw error }
    func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw error }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedRefusal<NestedKey>(error: error))
    }
    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { Refusal(error: error) }
    func superEncoder() -> any Encoder { Refusal(error: error) }
    func superEncoder(forKey key: Key) -> any Encoder { Refusal(error: error) }
}
