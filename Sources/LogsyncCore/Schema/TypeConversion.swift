import Foundation

/// The type changes an attribute may declare (``Attribute/convertedFrom``), and how each converts a value.
/// Every node converts with this code, in Swift, so that the same value converts to the same bytes
/// everywhere; NULL stays NULL.
package enum TypeConversion {
    /// Whether a value of type `source` converts to `target`.
    package static func isSupported(from source: AttributeType, to target: AttributeType) -> Bool {
        switch (source, target) {
        case (.integer, .real), (.integer, .text), (.real, .text), (.bool, .integer), (.integer, .bool),
            (.date, .real), (.real, .date), (.uuid, .uuidBlob), (.uuidBlob, .uuid):
            return true
        default:
            return false
        }
    }

    /// `value`, of type `source`, as a value of `target`. A value that is not of `source`'s type (which
    /// the change rules refuse before) converts to NULL.
    package static func convert(_ value: DatabaseValue, from source: AttributeType, to target: AttributeType) -> DatabaseValue {
        switch (source, target, value) {
        case (_, _, .null): return .null
        case (.integer, .real, .integer(let number)): return .real(Double(number))
        case (.integer, .text, .integer(let number)): return .text(String(number))
        case (.real, .text, .real(let number)): return .text(String(number))
        case (.bool, .integer, .integer(let number)): return .integer(number)
        case (.integer, .bool, .integer(let number)): return .integer(number == 0 ? 0 : 1)
        case (.date, .real, .real(let number)), (.real, .date, .real(let number)): return .real(number)
        case (.uuid, .uuidBlob, .text(let text)):
            guard let uuid = UUID(uuidString: text) else { return .null }
            return .blob(withUnsafeBytes(of: uuid.uuid) { Array($0) })
        case (.uuidBlob, .uuid, .blob(let bytes)) where bytes.count == 16:
            let uuid = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            return .text(uuid.uuidString.lowercased())
        default: return .null
        }
    }
}
