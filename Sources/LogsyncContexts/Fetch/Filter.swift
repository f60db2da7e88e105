import LogsyncCore
import LogsyncStore

/// A column of an entity, to build filters and sort descriptors from:
/// `Column("title") == "Groceries"`, `Column("pinned") == true && Column("body").contains("milk")`.
public struct Column: Sendable, Hashable, ExpressibleByStringLiteral {
    /// The column's name in the entity (a relationship's name for its column).
    public var name: String

    /// The column named `name`.
    public init(_ name: String) { self.name = name }
    /// The column named by a string literal: `"title"` where a ``Column`` is expected.
    public init(stringLiteral name: String) { self.name = name }

    /// The column holds NULL.
    public var isNull: Filter { .isNull(self) }

    /// The column's text contains `text`: byte for byte, or with ASCII letters folded when
    /// `caseInsensitive` (as SQLite's `lower()` does).
    public func contains(_ text: String, caseInsensitive: Bool = false) -> Filter {
        .contains(self, text, caseInsensitive: caseInsensitive)
    }

    /// The column's value is one of `values`.
    public func isIn(_ values: [any QueryValue]) -> Filter { .isIn(self, values) }

    /// The column equals `value` (never matches NULL: use ``isNull`` for that).
    public static func == (column: Column, value: any QueryValue) -> Filter { .compare(column, .equal, value) }
    /// The column differs from `value` (a NULL column matches neither `==` nor `!=`).
    public static func != (column: Column, value: any QueryValue) -> Filter { .compare(column, .notEqual, value) }
    /// The column sorts before `value`, by SQLite's ordering.
    public static func < (column: Column, value: any QueryValue) -> Filter { .compare(column, .less, value) }
    /// The column sorts before or with `value`.
    public static func <= (column: Column, value: any QueryValue) -> Filter { .compare(column, .lessOrEqual, value) }
    /// The column sorts after `value`.
    public static func > (column: Column, value: any QueryValue) -> Filter { .compare(column, .greater, value) }
    /// The column sorts after or with `value`.
    public static func >= (column: Column, value: any QueryValue) -> Filter { .compare(column, .greaterOrEqual, value) }
}

/// Which rows a fetch returns. Built from ``Column``s and combined with `&&`, `||` and `!`.
///
/// A filter runs twice in the same terms: as SQL against the store, and in memory against the
/// context's unsaved objects, so a fetch sees inserts and edits that are not saved yet. Comparisons
/// follow SQLite's: NULL matches nothing but ``Column/isNull``, numbers compare by value whether stored
/// as integers or reals, text compares byte by byte.
public indirect enum Filter: Sendable {
    /// How ``compare(_:_:_:)`` compares; the raw value is the SQL operator.
    public enum Comparison: String, Sendable {
        /// Equal (`=`).
        case equal = "="
        /// Not equal (`<>`).
        case notEqual = "<>"
        /// Sorts before (`<`).
        case less = "<"
        /// Sorts before or with (`<=`).
        case lessOrEqual = "<="
        /// Sorts after (`>`).
        case greater = ">"
        /// Sorts after or with (`>=`).
        case greaterOrEqual = ">="
    }

    /// Every row.
    case all
    /// The column compared with a value (see ``Column``'s operators).
    case compare(Column, Comparison, any QueryValue)
    /// The column holds NULL (``Column/isNull``).
    case isNull(Column)
    /// The column's text contains a string (``Column/contains(_:caseInsensitive:)``).
    case contains(Column, String, caseInsensitive: Bool)
    /// The column's value is one of a list (``Column/isIn(_:)``); an empty list matches nothing.
    case isIn(Column, [any QueryValue])
    /// Both filters match.
    case and(Filter, Filter)
    /// Either filter matches.
    case or(Filter, Filter)
    /// The filter does not match (as in SQL, a comparison with NULL matches neither it nor its negation).
    case not(Filter)

    /// Both filters match.
    public static func && (lhs: Filter, rhs: Filter) -> Filter { .and(lhs, rhs) }
    /// Either filter matches.
    public static func || (lhs: Filter, rhs: Filter) -> Filter { .or(lhs, rhs) }
    /// The filter does not match.
    public static prefix func ! (filter: Filter) -> Filter { .not(filter) }
}

/// A filter checked against one entity: every column exists and every value is in the column's type.
struct ResolvedFilter: Sendable {
    indirect enum Node: Sendable {
        case all
        case compare(String, Filter.Comparison, DatabaseValue)
        case isNull(String)
        case contains(String, String, caseInsensitive: Bool)
        case isIn(String, [DatabaseValue])
        case and(Node, Node)
        case or(Node, Node)
        case not(Node)
    }

    let root: Node

    init(_ filter: Filter, entity: EntityColumns) throws(ContextError) {
        root = try Self.resolve(filter, entity)
    }

    private static func resolve(_ filter: Filter, _ entity: EntityColumns) throws(ContextError) -> Node {
        switch filter {
        case .all: return .all
        case .compare(let column, let comparison, let value):
            let type = try entity.type(of: column.name)
            return .compare(column.name, comparison, value.databaseValue(for: type))
        case .isNull(let column):
            _ = try entity.type(of: column.name)
            return .isNull(column.name)
        case .contains(let column, let text, let caseInsensitive):
            _ = try entity.type(of: column.name)
            return .contains(column.name, text, caseInsensitive: caseInsensitive)
        case .isIn(let column, let values):
            let type = try entity.type(of: column.name)
            return .isIn(column.name, values.map { $0.databaseValue(for: type) })
        case .and(let lhs, let rhs): return .and(try resolve(lhs, entity), try resolve(rhs, entity))
        case .or(let lhs, let rhs): return .or(try resolve(lhs, entity), try resolve(rhs, entity))
        case .not(let inner): return .not(try resolve(inner, entity))
        }
    }

    /// The filter as an SQL expression and its arguments.
    var sql: (expression: String, arguments: [DatabaseValue]) {
        var arguments: [DatabaseValue] = []
        let expression = Self.sql(root, &arguments)
        return (expression, arguments)
    }

    private static func sql(_ node: Node, _ arguments: inout [DatabaseValue]) -> String {
        switch node {
        case .all:
            return "1"
        case .compare(let column, let comparison, let value):
            arguments.append(value)
            return "\(SQLIdentifier.quoted(column)) \(comparison.rawValue) ?"
        case .isNull(let column):
            return "\(SQLIdentifier.quoted(column)) IS NULL"
        case .contains(let column, let text, let caseInsensitive):
            arguments.append(.text(text))
            return caseInsensitive ? "instr(lower(\(SQLIdentifier.quoted(column))), lower(?)) > 0" : "instr(\(SQLIdentifier.quoted(column)), ?) > 0"
        case .isIn(let column, let values):
            guard !values.isEmpty else { return "0" }
            arguments.append(contentsOf: values)
            return "\(SQLIdentifier.quoted(column)) IN (" + Array(repeating: "?", count: values.count).joined(separator: ", ") + ")"
        case .and(let lhs, let rhs):
            return "(\(sql(lhs, &arguments)) AND \(sql(rhs, &arguments)))"
        case .or(let lhs, let rhs):
            return "(\(sql(lhs, &arguments)) OR \(sql(rhs, &arguments)))"
        case .not(let inner):
            return "NOT (\(sql(inner, &arguments)))"
        }
    }

    /// Whether `row` matches, with SQLite's three-valued logic collapsed as a WHERE clause does
    /// (unknown does not match).
    func matches(_ row: Row) -> Bool {
        Self.evaluate(root, row) == true
    }

    /// True, false, or nil for SQL's unknown (a comparison with NULL).
    private static func evaluate(_ node: Node, _ row: Row) -> Bool? {
        switch node {
        case .all:
            return true
        case .compare(let column, let comparison, let value):
            let stored = row[column] ?? .null
            if stored.isNull || value.isNull { return nil }
            let order = stored.sqliteOrder(comparedTo: value)
            switch comparison {
            case .equal: return order == 0
            case .notEqual: return order != 0
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            case .greaterOrEqual: return order >= 0
            }
        case .isNull(let column):
            return (row[column] ?? .null).isNull
        case .contains(let column, let text, let caseInsensitive):
            guard let stored = SQLiteOrdering.text(of: row[column] ?? .null) else { return nil }
            var haystack = Array(stored.utf8)
            var needle = Array(text.utf8)
            if caseInsensitive {
                haystack = haystack.map(SQLiteOrdering.asciiLowercased)
                needle = needle.map(SQLiteOrdering.asciiLowercased)
            }
            return needle.isEmpty || haystack.firstRange(of: needle) != nil
        case .isIn(let column, let values):
            let stored = row[column] ?? .null
            if stored.isNull { return nil }
            return values.contains { !$0.isNull && stored.sqliteOrder(comparedTo: $0) == 0 }
        case .and(let lhs, let rhs):
            let left = evaluate(lhs, row), right = evaluate(rhs, row)
            if left == false || right == false { return false }
            return left == true && right == true ? true : nil
        case .or(let lhs, let rhs):
            let left = evaluate(lhs, row), right = evaluate(rhs, row)
            if left == true || right == true { return true }
            return left == false && right == false ? false : nil
        case .not(let inner):
            return evaluate(inner, row).map { !$0 }
        }
    }
}
