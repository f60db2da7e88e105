import LogsyncCore
import LogsyncStore

/// Why a container or context operation failed: a code to switch on, a message that says what and where,
/// and the underlying cause (often a ``StoreError``) when there is one.
public struct ContextError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it is; compare with the constants below.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        /// The code's name, as in `saveFailed`.
        public var description: String { name }

        /// A record type names an entity the container's schema does not declare.
        public static let unknownEntity = Code(name: "unknownEntity")
        /// A record's property has no column in its entity, or a column has no property to decode into.
        public static let unknownProperty = Code(name: "unknownProperty")
        /// A value does not fit the declared type of its column (a string where a date is declared, a
        /// missing non-optional value, a malformed UUID).
        public static let typeMismatch = Code(name: "typeMismatch")
        /// Saving needs an object the context does not know (update or delete of a record never fetched
        /// or inserted, or already deleted).
        public static let objectNotFound = Code(name: "objectNotFound")
        /// An insert names an object the context already has.
        public static let duplicateObject = Code(name: "duplicateObject")
        /// The store refused the save (unique key, delete rule `deny`, busy); nothing was written and the
        /// context's changes are kept. See ``ContextError/cause``.
        public static let saveFailed = Code(name: "saveFailed")
        /// Reading from the store failed. See ``ContextError/cause``.
        public static let fetchFailed = Code(name: "fetchFailed")
        /// The container is closed.
        public static let closed = Code(name: "closed")
        /// Opening the store failed. See ``ContextError/cause``.
        public static let openFailed = Code(name: "openFailed")
    }

    /// What kind of failure it is.
    public var code: Code
    /// What failed and where, in a sentence.
    public var message: String
    /// The entity concerned, when there is one.
    public var entity: String?
    /// The error underneath, when there is one (often a ``StoreError``).
    public var cause: (any Error & Sendable)?

    /// An error with its code, message, entity and cause.
    public init(_ code: Code, _ message: String, entity: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.entity = entity
        self.cause = cause
    }

    /// The message, then the cause's description when there is one.
    public var description: String {
        var text = message
        if let cause { text += ": \(cause)" }
        return text
    }
}
