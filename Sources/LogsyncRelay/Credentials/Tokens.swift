import Crypto
import Foundation

/// Bearer tokens: `lsr1_<id>_<secret>`, where the id (12 hex digits) names the token in listings and
/// revocations and the secret is 32 random bytes in unpadded base64url. Only the SHA-256 of the secret
/// is stored: 256 random bits need no slow hash, and a stolen database grants nothing.
public enum Tokens {
    static let prefix = "lsr1"

    /// A new token: its id and its full text.
    public static func generate() -> (id: String, token: String, digest: [UInt8]) {
        var generator = SystemRandomNumberGenerator()
        let idBytes = (0..<6).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let secretBytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let id = idBytes.map { String(format: "%02x", $0) }.joined()
        let secret = base64URL(secretBytes)
        return (id, "\(prefix)_\(id)_\(secret)", digest(secret))
    }

    /// The id and secret of a token's text, or nil when it is not shaped like a token.
    public static func parse(_ token: String) -> (id: String, secret: String)? {
        let parts = token.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == prefix, parts[1].utf8.count == 12, parts[2].utf8.count == 43,
            parts[1].utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
            parts[2].utf8.allSatisfy({ isBase64URL($0) })
        else { return nil }
        return (String(parts[1]), String(parts[2]))
    }

    public static func digest(_ secret: String) -> [UInt8] { Array(SHA256.hash(data: Array(secret.utf8))) }

    /// Compares two digests in time that does not depend on where they differ.
    public static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte) || byte == 45 || byte == 95
    }
}
