import LogsyncCore
import LogsyncTransport

/// What the relay accepts as ids in its routes, checked before anything else is looked at: account
/// names as the shared folder allows them, node ids as lowercase UUIDs, segment ranges as `FIRST-LAST`
/// in plain decimal. Everything else — `..`, `/`, `%`, NUL, over-long text — is refused with 400.
public enum RelayNames {
    /// Why `name` is not an account name, or nil when it is one.
    public static func accountProblem(_ name: String) -> String? {
        AccountName.problem(name)
    }

    /// Why `text` is not a node id (a lowercase UUID), or nil when it is one.
    public static func nodeProblem(_ text: String) -> String? {
        SegmentName.isNodeFolderName(text) ? nil : "is not a node id (a lowercase UUID, 36 characters)"
    }

    /// A segment range written `FIRST-LAST`: decimal, no sign or leading zero, 1 ≤ FIRST ≤ LAST.
    public static func parseRange(_ text: String) -> (first: UInt64, last: UInt64)? {
        let parts = text.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard parts.count == 2, let first = number(parts[0]), let last = number(parts[1]), first >= 1, first <= last else { return nil }
        return (first, last)
    }

    public static func rangeText(first: UInt64, last: UInt64) -> String { "\(first)-\(last)" }

    private static func number(_ digits: Substring.UTF8View.SubSequence) -> UInt64? {
        guard (1...20).contains(digits.count), digits.first != UInt8(ascii: "0") else { return nil }
        return SegmentName.decimal(digits)
    }

    /// Text from a request, quoted safely in an error message: at most 64 characters, control characters
    /// escaped, so that a hostile id cannot forge log lines or flood them.
    public static func quoted(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars.prefix(64) {
            if scalar.value < 0x20 || scalar.value == 0x7f || scalar == "\"" || scalar == "\\" {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > 64 { result += "… (\(text.utf8.count) bytes)" }
        return "\"\(result)\""
    }
}
