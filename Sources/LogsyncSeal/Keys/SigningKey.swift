import Crypto
import Foundation
import LogsyncPlatform

/// A node's signing key (Ed25519): random per installation, never derived from the account key, so that
/// no one who holds the recovery phrase can sign as this node. Kept in a file only syncd reads.
public struct NodeSigningKey: Sendable {
    /// The private key's 32 bytes (swift-crypto's key types are not `Sendable`: made again where used).
    let raw: [UInt8]
    /// The 32 bytes others verify this node's objects with.
    public let publicKey: [UInt8]

    public init() { try! self.init(rawRepresentation: Array(Curve25519.Signing.PrivateKey().rawRepresentation)) }

    public init(rawRepresentation: [UInt8]) throws(SealError) {
        do {
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation)
            raw = rawRepresentation
            publicKey = Array(key.publicKey.rawRepresentation)
        } catch {
            throw SealError(.badKey, "not an Ed25519 private key: \(error)")
        }
    }

    /// A short form of the public key for people to compare: its SHA-256's first 8 bytes as hex, in
    /// groups of four.
    public var fingerprint: String { Self.fingerprint(of: publicKey) }

    public static func fingerprint(of publicKey: [UInt8]) -> String {
        let hex = Hex.encode(SHA256.hash(data: publicKey).prefix(8))
        return stride(from: 0, to: hex.count, by: 4).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return String(hex[start..<hex.index(start, offsetBy: 4)])
        }.joined(separator: "-")
    }

    func signature(for digest: [UInt8]) throws(SealError) -> [UInt8] {
        do {
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: raw).signature(for: digest))
        } catch {
            throw SealError(.crypto, "signing failed: \(error)")
        }
    }

    static func isValid(_ signature: some DataProtocol, of digest: [UInt8], by publicKey: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: digest)
    }

    /// The key in `path`, or a new one written there (mode 0600, created exclusively) when the file does
    /// not exist: a node's key is made on its first sealed start and kept for good.
    public static func loadOrCreate(at path: String) throws(SealError) -> NodeSigningKey {
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count == 32 else {
                throw SealError(.badKey, "\(path) is not a node signing key (32 bytes); move it aside to make a new one (other nodes then see a new key for this node)")
            }
            return try NodeSigningKey(rawRepresentation: Array(data))
        }
        let key = NodeSigningKey()
        do {
            try DurableFiles.createPrivate(path, with: key.raw)
        } catch {
            throw SealError(.badKey, "cannot create the node signing key \(path): \(error)")
        }
        return key
    }
}
