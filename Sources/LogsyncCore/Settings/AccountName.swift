/// The rule for account names, shared by the daemon's configuration and the transports: an account
/// names a folder in the shared folder (and a mailbox on a relay).
public enum AccountName {
    /// Why `name` cannot be an account (a folder name in the shared folder), or nil when it can: 1 to 128
    /// ASCII letters, digits, '-', '_' and '.', not starting with '.'.
    public static func problem(_ name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.utf8.count > 128 { return "is \(name.utf8.count) bytes long; an account name has at most 128" }
        guard name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }) else {
            return "has characters other than letters, digits, '-', '_' and '.' (it names a folder in the shared folder)"
        }
        if name.hasPrefix(".") { return "starts with '.' (\(name == "." || name == ".." ? "it would name another folder" : "readers ignore dot folders"))" }
        return nil
    }
}
