/// Makes a value of a `Decodable` type with every key it decodes present, optional ones included: each
/// number is 1, each string "x", each Boolean true, each array one element. Encoded again, such a value
/// shows every key the type can put on the wire, which an example value would show only for the keys
/// it happens to fill.
struct FillingDecoder: Decoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }


    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> { KeyedDecodingContainer(Keyed<Key>()) }
    func unkeyedContainer() -> any UnkeyedDecodingContainer { Unkeyed() }
    func singleValueContainer() -> any SingleValueDecodingContainer { Single() }

    static func filled<T: Decodable>(_ type: T.Type) throws -> T {
        switch type {
        case is Bool.Type: return true as! T
        case is String.Type: return "x" as! T
        case is Double.Type: return 1.0 as! T
        case is Float.Type: return Float(1) as! T
        case is Int.Type: return 1 as! T
        case is Int8.Type: return Int8(1) as! T
        case is Int16.Type: return Int16(1) as! T
        case is Int32.Type: return Int32(1) as! T
        case is Int64.Type: return Int64(1) as! T
        case is UInt.Type: return UInt(1) as! T
        case is UInt8.Type: return UInt8(1) as! T
        case is UInt16.Type: return UInt16(1) as! T
        case is UInt32.Type: return UInt32(1) as! T
        case is UInt64.Type: return UInt64(1) as! T
        default: return try T(from: FillingDecoder())
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        var codingPath: [any CodingKey] = []
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { true }
        func decodeNil(forKey key: Key) -> Bool { false }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try filled(type) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try filled(type) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try filled(type) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try filled(type) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try filled(type) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try filled(type) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try filled(type) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try filled(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try filled(type) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try filled(type) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try filled(type) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try filled(type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try filled(type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try filled(type) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try filled(type) }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) -> KeyedDecodingContainer<NestedKey> {
            KeyedDecodingContainer(Keyed<NestedKey>())
        }
        func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer { Unkeyed() }
        func superDecoder() -> any Decoder { FillingDecoder() }
        func superDecoder(forKey key: Key) -> any Decoder { FillingDecoder() }
    }

    /// One element.
    struct Unkeyed: UnkeyedDecodingContainer {
        var codingPath: [any CodingKey] = []
        var count: Int? { 1 }
        var currentIndex = 0
        var isAtEnd: Bool { currentIndex >= 1 }

        mutating func next<T: Decodable>(_ type: T.Type) throws -> T {
            currentIndex += 1
            return try filled(type)
        }

        mutating func decodeNil() -> Bool { false }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
        mutating func decode(_ type: String.Type) throws -> String { try next(type) }
        mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
        mutating func decode(_ type: Float.Type) throws -> Float { try next(type) }
        mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) -> KeyedDecodingContainer<NestedKey> {
            currentIndex += 1
            return KeyedDecodingContainer(Keyed<NestedKey>())
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedDecodingContainer {
            currentIndex += 1
            return Unkeyed()
        }
        mutating func superDecoder() -> any Decoder { FillingDecoder() }
    }

    struct Single: SingleValueDecodingContainer {
        var codingPath: [any CodingKey] = []
        func decodeNil() -> Bool { false }
        func decode(_ type: Bool.Type) throws -> Bool { try filled(type) }
        func decode(_ type: String.Type) throws -> String { try filled(type) }
        func decode(_ type: Double.Type) throws -> Double { try filled(type) }
        func decode(_ type: Float.Type) throws -> Float { try filled(type) }
        func decode(_ type: Int.Type) throws -> Int { try filled(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try filled(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try filled(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try filled(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try filled(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try filled(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try filled(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try filled(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try filled(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try filled(type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try filled(type) }
    }
}

private func filled<T: Decodable>(_ type: T.Type) throws -> T { try FillingDecoder.filled(type) }
