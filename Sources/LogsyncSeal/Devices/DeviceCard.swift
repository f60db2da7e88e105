import Crypto
import LogsyncCore

/// What a device says of itself in its progress slot: its node id, its signing key and the agreement key
/// epoch keys are wrapped to, signed with the signing key. A new device publishes one before it holds any
/// key of the account, so that a member can approve it by the fingerprint it shows.
public struct DeviceCard: Sendable, Hashable {
    public var node: String
    public var signingKey: [UInt8]
    public var agreementKey: [UInt8]
    var signature: [UInt8]

    static let magic = Array("LSCARD\r\n".utf8)

    init(node: NodeID, key: NodeSigningKey) throws(SealError) {
        self.node = node.rawValue
        signingKey = key.publicKey
        agreementKey = key.agreementPublicKey
        signature = []
        signature = try key.signature(for: Array(SHA256.hash(data: encoded(signed: false))))
    }

    private init(node: String, signingKey: [UInt8], agreementKey: [UInt8], signature: [UInt8]) {
        self.node = node
        self.signingKey = signingKey
        self.agreementKey = agreementKey
        self.signature = signature
    }

    /// The fingerprint people compare: the signing key's.
    public var fingerprint: String { NodeSigningKey.fingerprint(of: signingKey) }

    var member: Roster.Member { Roster.Member(node: node, signingKey: signingKey, agreementKey: agreementKey) }

    func encoded(signed: Bool = true) -> [UInt8] {
        var bytes = Self.magic
        Sealer.appendLittleEndian(UInt16(node.utf8.count), to: &bytes)
        bytes += Array(node.utf8) + signingKey + agreementKey
        if signed { bytes += signature }
        return bytes
    }

    static func decode(_ bytes: [UInt8]) throws(SealError) -> DeviceCard {
        var reader = SealReader(bytes)
        guard try reader.bytes(magic.count) == magic else { throw SealError(.malformed, "not a device card (no LSCARD magic)") }
        let card = DeviceCard(node: try reader.name(), signingKey: try reader.bytes(32), agreementKey: try reader.bytes(32), signature: try reader.bytes(64))
        guard reader.isAtEnd else { throw SealError(.malformed, "bytes follow the device card's signature") }
        guard NodeSigningKey.isValid(card.signature, of: Array(SHA256.hash(data: card.encoded(signed: false))), by: card.signingKey) else {
            throw SealError(.unauthentic, "the device card of \(card.node) is not signed by the key it names")
        }
        return card
    }
}

/// A progress slot of a sealed account: the sealed progress record (or, for a device that holds no key
/// yet, a placeholder that only routes), then the device appendix with the writer's card and the roster it
/// holds (`docs/log-format.md`, "Devices").
enum ProgressSlot {
    static func encode(record: [UInt8], card: DeviceCard, roster: [UInt8]?) -> [UInt8] {
        var appendix: [UInt8] = []
        let cardBytes = card.encoded()
        Sealer.appendLittleEndian(UInt32(cardBytes.count), to: &appendix)
        appendix += cardBytes
        Sealer.appendLittleEndian(UInt32(roster?.count ?? 0), to: &appendix)
        appendix += roster ?? []
        var bytes = record + appendix
        Sealer.appendLittleEndian(UInt32(appendix.count), to: &bytes)
        return bytes + SealedHeader.deviceAppendixMagic
    }

    /// The record's bytes, and the card and roster the appendix holds (nil: none, or not readable).
    static func decode(_ bytes: [UInt8]) -> (record: [UInt8], card: DeviceCard?, roster: Roster?, rosterBytes: [UInt8]?) {
        guard let start = SealedHeader.deviceAppendixStart(bytes) else { return (bytes, nil, nil, nil) }
        var reader = SealReader(Array(bytes[start..<bytes.count - 12]))
        let cardBytes = (try? reader.u32()).flatMap { try? reader.bytes(Int($0)) }
        let rosterBytes = (try? reader.u32()).flatMap { try? reader.bytes(Int($0)) }
        let roster = rosterBytes.flatMap { $0.isEmpty ? nil : try? Roster.decode($0) }
        return (Array(bytes[..<start]), cardBytes.flatMap { try? DeviceCard.decode($0) }, roster, roster == nil ? nil : rosterBytes)
    }

    /// What a device without keys puts in its slot before the appendix: a progress record's routing
    /// header under no key, an empty ciphertext and a signature, which carriers route like any record.
    static func placeholder(account: String, node: NodeID, key: NodeSigningKey) throws(SealError) -> [UInt8] {
        let header = SealedHeader(
            kind: .progressRecord, keyEpoch: SealedHeader.placeholderEpoch, keyID: [UInt8](repeating: 0, count: SealedHeader.keyIDByteCount), first: 0, last: 0,
            salt: [UInt8](repeating: 0, count: SealedHeader.saltByteCount), account: account, node: node)
        var bytes = header.encoded()
        Sealer.appendLittleEndian(UInt32(SealedHeader.tagByteCount), to: &bytes)
        bytes += [UInt8](repeating: 0, count: SealedHeader.tagByteCount)
        return bytes + (try key.signature(for: Array(SHA256.hash(data: bytes))))
    }
}

/// The device appendix's decoders on any bytes, for the fuzz target (`scripts/decoder-fuzz.sh`): a slot
/// split, its card and roster decoded, and the roster's grants tried with a fixed key. Throws what a
/// reader would refuse; never traps.
package enum DeviceSlotDecoding {
    package static func decode(_ bytes: [UInt8], opening key: NodeSigningKey) throws(SealError) -> String {
        let slot = ProgressSlot.decode(bytes)
        var parts: [String] = ["record of \(slot.record.count) bytes"]
        if slot.card != nil { parts.append("a card") }
        if let roster = slot.roster { parts.append("a roster of \(roster.members.count) members, \(roster.epochKeys(for: key.agreementKey)?.count ?? 0) keys opened") }
        // The decoders on the whole input too, as if it were only a card or a roster.
        if let roster = try? Roster.decode(bytes) { parts.append("a whole roster at epoch \(roster.epoch)") }
        if (try? DeviceCard.decode(bytes)) != nil { parts.append("a whole card") }
        _ = SealedHeader.isPlaceholder(slot.record)
        guard slot.card != nil || slot.roster != nil else { throw SealError(.malformed, "no device appendix") }
        return parts.joined(separator: ", ")
    }

    /// A valid slot: a sealed progress record of `content`, the card of `keyring`'s signer as `node`, and a
    /// roster of three members over two epochs made by it.
    package static func sample(content: [UInt8], node: NodeID, keyring: SealKeyring) throws(SealError) -> [UInt8] {
        let record = try Sealer.seal(.progressRecord, node: node, content: content, keyring: keyring).bytes
        let others = (1...2).map { index in try! NodeSigningKey(rawRepresentation: (0..<32).map { UInt8($0) &* 3 &+ UInt8(index) }) }
        let members = [keyring.signingKey] + others
        let roster = try Roster.make(
            account: keyring.account, keyID: keyring.keyID, version: 2, epochKeys: keyring.allEpochKeys + [[UInt8](repeating: 9, count: 32)],
            members: members.enumerated().map { Roster.Member(node: "node-\($0.offset)", signingKey: $0.element.publicKey, agreementKey: $0.element.agreementPublicKey) },
            revoked: [Roster.Revoked(node: "gone", signingKey: [UInt8](repeating: 1, count: 32), through: 7)],
            recovery: keyring.accountKey.map { Array($0.recoveryAgreementKey.publicKey.rawRepresentation) } ?? [UInt8](repeating: 0, count: 32),
            author: keyring.signingKey)
        return ProgressSlot.encode(record: record, card: try DeviceCard(node: node, key: keyring.signingKey), roster: roster.encoded())
    }
}
