import Crypto
import LogsyncCore

/// What one node of a sealed account seals and opens with: the account's epoch keys, the epoch it
/// seals under now, and its own signing key.
public struct SealKeyring: Sendable {
    public let account: String
    public let keyID: [UInt8]
    /// The epoch new objects are sealed under.
    public let currentEpoch: UInt32
    /// Per epoch, the key's bytes (`SymmetricKey` is not `Sendable`).
    let epochKeys: [UInt32: [UInt8]]
    public let signingKey: NodeSigningKey
    /// The account key, when this node holds the recovery phrase; nil for a device another approved.
    let accountKey: AccountKey?

    public init(account: String, accountKey: AccountKey, signingKey: NodeSigningKey) {
        self.account = account
        keyID = accountKey.keyID
        currentEpoch = 0
        epochKeys = [0: accountKey.firstEpochKeyBytes]
        self.signingKey = signingKey
        self.accountKey = accountKey
    }

    /// The keys of epochs 0 to `keys.count - 1`, as a roster grants them; the newest is sealed under.
    init(account: String, keyID: [UInt8], keys: [[UInt8]], signingKey: NodeSigningKey, accountKey: AccountKey?) {
        self.account = account
        self.keyID = keyID
        currentEpoch = UInt32(keys.count - 1)
        epochKeys = Dictionary(uniqueKeysWithValues: keys.enumerated().map { (UInt32($0.offset), $0.element) })
        self.signingKey = signingKey
        self.accountKey = accountKey
    }

    /// Every epoch key held, epoch 0 first (all epochs up to the current one).
    var allEpochKeys: [[UInt8]] { (0...currentEpoch).compactMap { epochKeys[$0] } }

    /// The account key's fingerprint: its key id as hex, as ``AccountKey/fingerprint`` shows it.
    public var fingerprint: String { Hex.encode(keyID) }

    func epochKey(_ header: SealedHeader) throws(SealError) -> SymmetricKey {
        guard header.keyID == keyID else {
            throw SealError(
                .wrongKey,
                "it is sealed under account key \(Hex.encode(header.keyID)), and this node holds \(Hex.encode(keyID)): give syncd the account's recovery phrase (docs/security.md)")
        }
        guard let key = epochKeys[header.keyEpoch] else {
            throw SealError(.unknownEpoch, "it is sealed under key epoch \(header.keyEpoch), which this node does not hold (it holds \(epochKeys.keys.sorted()))")
        }
        return SymmetricKey(data: key)
    }

    /// The object's own key: from the epoch key, the object's whole header (its kind, account, node,
    /// range and salt) and nothing secret besides.
    func objectKey(_ header: SealedHeader, headerBytes: [UInt8]) throws(SealError) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: try epochKey(header), salt: header.salt, info: Array("logsync sealed object v1".utf8) + headerBytes, outputByteCount: 32)
    }

    /// The salt of a segment or progress record: keyed by the epoch key over everything its plaintext
    /// holds (identity, previous link, signer, content), so that sealing the same object again gives the
    /// same bytes (a publish that is retried), and any other plaintext under the same name another key.
    func salt(epoch: UInt32, identity: [UInt8], content: [UInt8], previous: [UInt8]) throws(SealError) -> [UInt8] {
        guard let key = epochKeys[epoch] else { throw SealError(.unknownEpoch, "no key for epoch \(epoch)") }
        var mac = HMAC<SHA256>(key: SymmetricKey(data: key))
        mac.update(data: Array("logsync salt".utf8))
        mac.update(data: identity)
        mac.update(data: previous)
        mac.update(data: signingKey.publicKey)
        mac.update(data: Array(SHA256.hash(data: content)))
        return Array(Array(mac.finalize()).prefix(SealedHeader.saltByteCount))
    }

    /// A random salt, for a baseline: its content is streamed, so it cannot key its own salt, and two
    /// baselines of one name (the same frontier written again after a schema upgrade) must not share a key.
    static func randomSalt() -> [UInt8] {
        SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }
    }

}
