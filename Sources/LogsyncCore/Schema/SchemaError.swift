/// A schema that cannot be registered, with what is wrong and where.
public struct SchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        public static let invalidName = Code(name: "invalidName")
        public static let duplicateName = Code(name: "duplicateName")
        public static let missingPrimaryKey = Code(name: "missingPrimaryKey")
        public static let unusablePrimaryKey = Code(name: "unusablePrimaryKey")
        public static let unknownType = Code(name: "unknownType")
        public static let unknownDestination = Code(name: "unknownDestination")
        public static let unknownColumn = Code(name: "unknownColumn")
        public static let tooManyColumns = Code(name: "tooManyColumns")
        public static let invalidVersion = Code(name: "invalidVersion")
        public static let invalidDefault = Code(name: "invalidDefault")
        public static let malformed = Code(name: "malformed")
        public static let notAdditive = Code(name: "notAdditive")
        public static let versionConflict = Code(name: "versionConflict")
        /// A deprecated attribute that rows inserted without it could not hold, or that a unique key names.
        public static let invalidDeprecation = Code(name: "invalidDeprecation")
        /// A conversion between types that cannot convert, or from a column the schema still declares.
        public static let invalidConversion = Code(name: "invalidConversion")
    }

    public var code: Code
    /// Where: `Note`, `Note.title`, or the JSON path.
    public var location: String
    public var message: String

    public init(_ code: Code, at location: String, _ message: String) {
        self.code = code
        self.location = location
        self.message = message
    }

    public var description: String { "schema error at \(location): \(message)" }
}
