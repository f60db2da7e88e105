import Foundation

/// SQL names as text: the one rule for quoting a table or column name in generated SQL.
public enum SQLIdentifier {
    /// `identifier` as a double-quoted SQL identifier, inner quotes doubled: `Note` → `"Note"`.
    public static func quoted(_ identifier: String) -> String {
        // Validated schema names never contain a quote; only other names need escaping.
        guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
        return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
