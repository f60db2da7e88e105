import Foundation
import LogsyncCore

/// A Swift value that a filter compares a column with. It is stored as the column's declared type
/// says, exactly as a record's property would be: a `UUID` is lowercase text in a `uuid` column and 16
/// bytes in a `uuidBlob` one, a `Date` is seconds since 1970, a `Bool` is 0 or 1.
public protocol QueryValue: Sendable {
    /// The value as a column of `type` stores it.
    func databaseValue(for type: AttributeType) -> DatabaseValue
}

extension DatabaseValue: QueryValue {
    /// The value as it is, whatever the column's type.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { self }
}

extension String: QueryValue {
    /// Text.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { .text(self) }
}

extension Int: QueryValue {
    /// An integer; a real in a `real` or `date` column.
    public func databaseValue(for type: AttributeType) -> DatabaseValue {
        type == .real || type == .date ? .real(Double(self)) : .integer(Int64(self))
    }
}

extension Int64: QueryValue {
    /// An integer; a real in a `real` or `date` column.
    public func databaseValue(for type: AttributeType) -> DatabaseValue {
        type == .real || type == .date ? .real(Double(self)) : .integer(self)
    }
}

extension Double: QueryValue {
    /// A real.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { .real(self) }
}

extension Bool: QueryValue {
    /// 1 or 0.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { .integer(self ? 1 : 0) }
}

extension Date: QueryValue {
    /// Seconds since 1970, as a real.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { .real(timeIntervalSince1970) }
}

extension UUID: QueryValue {
    /// Lowercase text, or 16 bytes in a `uuidBlob` column.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { RowCoder.keyValue(self, type: type) }
}

extension Reference: QueryValue {
    /// The destination's key, as a `UUID` is stored.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { RowCoder.keyValue(id, type: type) }
}

extension Data: QueryValue {
    /// A blob.
    public func databaseValue(for type: AttributeType) -> DatabaseValue { .blob([UInt8](self)) }
}
