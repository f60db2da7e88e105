import Crypto
import Foundation
import LogsyncCore

/// Who is in a sealed account (`docs/security.md`, "Devices"): the member devices with their signing and
/// agreement keys, the devices revoked and how far their objects are still taken, and the current key
/// epoch, wrapped with HPKE to every member and to the recovery phrase. Signed by the member that made
/// it; readable by the carrier (it holds public keys and wrapped keys only).
///
/// Approving a device adds it and wraps the epoch keys to it (same epoch); revoking one starts a new
/// epoch whose random key is wrapped to the remaining members and the phrase only. Each grant holds every
/// epoch key from 0 on, so a member reads the whole history; nothing sealed before is sealed again.
public struct Roster: Sendable, Hashable {
    public struct Member: Sendable, Hashable {
        public var node: String
        public var signingKey: [UInt8]
        public var agreementKey: [UInt8]

        public init(node: String, signingKey: [UInt8], agreementKey: [UInt8]) {
            self.node = node
            self.signingKey = signingKey
            self.agreementKey = agreementKey
        }
    }

    public struct Revoked: Sendable, Hashable {
        public var node: String
        public var signingKey: [UInt8]
        /// The revoked device's objects up to this sequence were verified before its revocation and stay
        /// taken; anything further it signs is refused.
        public var through: UInt64
    }

    /// Epoch keys wrapped to one recipient's agreement key.
    struct Grant: Sendable, Hashable {
        var recipient: [UInt8]
        var encapsulated: [UInt8]
        var sealed: [UInt8]
    }

    public var account: String
    public var keyID: [UInt8]
    /// Grows with every change: a node takes a roster newer than the one it holds, never an older one.
    public var version: UInt64
    public var epoch: UInt32
    public var members: [Member]
    public var revoked: [Revoked]
    /// The recovery phrase's agreement key: the phrase is a recipient of every epoch.
    var recovery: [UInt8]
    var grants: [Grant]
    /// The signing key of the member that made it, and its signature.
    public var author: [UInt8]
    var signature: [UInt8]

    static let magic = Array("LSROSTR\n".utf8)
    static let maximumMembers = 1_024
    static let maximumRevoked = 4_096
    static let maximumEpoch: UInt32 = 4_096
    public static let maximumByteCount = 1 << 19

    /// Makes and signs a roster whose grants wrap `epochKeys` (epoch 0 first, one per epoch up to
    /// `epoch`) to every member and to the recovery key.
    static func make(
        account: String, keyID: [UInt8], version: UInt64, epochKeys: [[UInt8]], members: [Member], revoked: [Revoked], recovery: [UInt8],
        author: NodeSigningKey
    ) throws(SealError) -> Roster {
        guard !epochKeys.isEmpty, epochKeys.count <= Int(maximumEpoch) + 1, epochKeys.allSatisfy({ $0.count == 32 }) else {
            throw SealError(.malformed, "a roster wraps 1 to \(maximumEpoch + 1) epoch keys of 32 bytes")
        }
        var roster = Roster(
            account: account, keyID: keyID, version: version, epoch: UInt32(epochKeys.count - 1), members: members, revoked: revoked, recovery: recovery,
            grants: [], author: author.publicKey, signature: [])
        let plain = epochKeys.flatMap { $0 }
        for recipient in members.map(\.agreementKey) + [recovery] {
            do {
                let key = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: recipient)
                var sender = try HPKE.Sender(recipientKey: key, ciphersuite: .Curve25519_SHA256_ChachaPoly, info: Data(roster.grantInfo))
                let sealed = try sender.seal(plain)
                roster.grants.append(Grant(recipient: recipient, encapsulated: Array(sender.encapsulatedKey), sealed: Array(sealed)))
            } catch {
                throw SealError(.badKey, "cannot wrap the epoch keys to agreement key \(Hex.encode(recipient.prefix(8))): \(error)")
            }
        }
        roster.signature = try author.signature(for: Array(SHA256.hash(data: roster.encoded(signed: false))))
        return roster
    }

    /// What every grant's HPKE context is bound to: the account, its key and the epoch.
    var grantInfo: [UInt8] {
        var info = Array("logsync roster grant v1".utf8) + keyID + Array(account.utf8)
        Sealer.appendLittleEndian(epoch, to: &info)
        return info
    }

    /// The epoch keys (epoch 0 first) this roster wraps to `key`; nil when it wraps none to it.
    func epochKeys(for key: Curve25519.KeyAgreement.PrivateKey) -> [[UInt8]]? {
        let own = Array(key.publicKey.rawRepresentation)
        guard let grant = grants.first(where: { $0.recipient == own }) else { return nil }
        guard var recipient = try? HPKE.Recipient(
            privateKey: key, ciphersuite: .Curve25519_SHA256_ChachaPoly, info: Data(grantInfo), encapsulatedKey: Data(grant.encapsulated)),
            let plain = try? recipient.open(grant.sealed), plain.count == 32 * (Int(epoch) + 1)
        else { return nil }
        let bytes = Array(plain)
        return (0...Int(epoch)).map { Array(bytes[$0 * 32..<$0 * 32 + 32]) }
    }

    public func member(signedBy signingKey: [UInt8]) -> Member? { members.first { $0.signingKey == signingKey } }

    public func revocation(of signingKey: [UInt8]) -> Revoked? { revoked.first { $0.signingKey == signingKey } }

    // MARK: Bytes

    func encoded(signed: Bool = true) -> [UInt8] {
        var bytes = Self.magic
        func u16(_ value: Int) { Sealer.appendLittleEndian(UInt16(value), to: &bytes) }
        func name(_ text: String) {
            u16(text.utf8.count)
            bytes += Array(text.utf8)
        }
        name(account)
        bytes += keyID
        Sealer.appendLittleEndian(version, to: &bytes)
        Sealer.appendLittleEndian(epoch, to: &bytes)
        u16(members.count)
        for member in members {
            name(member.node)
            bytes += member.signingKey + member.agreementKey
        }
        u16(revoked.count)
        for gone in revoked {
            name(gone.node)
            bytes += gone.signingKey
            Sealer.appendLittleEndian(gone.through, to: &bytes)
        }
        bytes += recovery
        u16(grants.count)
        for grant in grants {
            bytes += grant.recipient + grant.encapsulated
            Sealer.appendLittleEndian(UInt32(grant.sealed.count), to: &bytes)
            bytes += grant.sealed
        }
        bytes += author
        if signed { bytes += signature }
        return bytes
    }

    /// Reads a roster and checks its signature by its author (whether the author may make one is the
    /// reader's to decide). Never traps on hostile bytes.
    static func decode(_ bytes: [UInt8]) throws(SealError) -> Roster {
        guard bytes.count <= maximumByteCount else { throw SealError(.malformed, "a roster of \(bytes.count) bytes is over \(maximumByteCount)") }
        var reader = SealReader(bytes)
        guard try reader.bytes(magic.count) == magic else { throw SealError(.malformed, "not a roster (no LSROSTR magic)") }
        let account = try reader.name()
        let keyID = try reader.bytes(8)
        let version = try reader.u64()
        let epoch = try reader.u32()
        guard epoch <= maximumEpoch else { throw SealError(.malformed, "epoch \(epoch) is over \(maximumEpoch)") }
        let memberCount = try reader.u16()
        guard memberCount <= maximumMembers else { throw SealError(.malformed, "\(memberCount) members is over \(maximumMembers)") }
        var members: [Member] = []
        for _ in 0..<memberCount { members.append(Member(node: try reader.name(), signingKey: try reader.bytes(32), agreementKey: try reader.bytes(32))) }
        let revokedCount = try reader.u16()
        guard revokedCount <= maximumRevoked else { throw SealError(.malformed, "\(revokedCount) revoked devices is over \(maximumRevoked)") }
        var revoked: [Revoked] = []
        for _ in 0..<revokedCount { revoked.append(Revoked(node: try reader.name(), signingKey: try reader.bytes(32), through: try reader.u64())) }
        let recovery = try reader.bytes(32)
        let grantCount = try reader.u16()
        guard grantCount <= maximumMembers + 1 else { throw SealError(.malformed, "\(grantCount) grants is over \(maximumMembers + 1)") }
        var grants: [Grant] = []
        for _ in 0..<grantCount {
            let recipient = try reader.bytes(32), encapsulated = try reader.bytes(32)
            let length = Int(try reader.u32())
            guard length <= 32 * (Int(maximumEpoch) + 1) + 16 else { throw SealError(.malformed, "a grant of \(length) bytes is too long") }
            grants.append(Grant(recipient: recipient, encapsulated: encapsulated, sealed: try reader.bytes(length)))
        }
        let author = try reader.bytes(32)
        let signature = try reader.bytes(SealedHeader.signatureByteCount)
        guard reader.isAtEnd else { throw SealError(.malformed, "bytes follow the roster's signature") }
        let roster = Roster(
            account: account, keyID: keyID, version: version, epoch: epoch, members: members, revoked: revoked, recovery: recovery, grants: grants,
            author: author, signature: signature)
        guard NodeSigningKey.isValid(signature, of: Array(SHA256.hash(data: roster.encoded(signed: false))), by: author) else {
            throw SealError(.unauthentic, "the roster's signature does not verify with its author's key (\(NodeSigningKey.fingerprint(of: author)))")
        }
        return roster
    }
}

/// Bounds-checked reading of the device objects' bytes: every problem is a ``SealError``.
struct SealReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func bytes(_ count: Int) throws(SealError) -> [UInt8] {
        guard count >= 0, bytes.count - offset >= count else { throw SealError(.malformed, "cut short at byte \(offset)") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(SealError) -> T {
        try bytes(MemoryLayout<T>.size).reversed().reduce(T(0)) { $0 << 8 | T($1) }
    }

    mutating func u16() throws(SealError) -> Int { Int(try integer(UInt16.self)) }
    mutating func u32() throws(SealError) -> UInt32 { try integer(UInt32.self) }
    mutating func u64() throws(SealError) -> UInt64 { try integer(UInt64.self) }

    mutating func name() throws(SealError) -> String {
        let length = try u16()
        guard (1...1_024).contains(length), let text = String(validating: try bytes(length), as: UTF8.self) else {
            throw SealError(.malformed, "a name at byte \(offset) is not 1 to 1,024 bytes of UTF-8")
        }
        return text
    }
}
