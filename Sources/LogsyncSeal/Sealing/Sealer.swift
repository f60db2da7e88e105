import Crypto
import LogsyncCore

/// A sealed segment or progress record (`docs/log-format.md`, "Sealed objects"):
///
///     header | u32 C | ChaCha20-Poly1305 ciphertext of C bytes (tag included) | Ed25519 signature
///
/// The ciphertext holds `u32 L | previous link (32) | signer's public key (32) | L content bytes | zeros`,
/// padded to a multiple of ``padding`` bytes (of ``smallPadding`` below ``smallObjectBytes``); the header
/// and the length field are its associated data.
/// The signature is over the object's **link**, the SHA-256 of every byte before the signature; a
/// segment's previous link is its node's previous segment's link (zeros for a chain's first segment).
public enum Sealer {
    /// What the content is padded to, inside the ciphertext: sizes move in steps of this many bytes...
    public static let padding = 256
    /// ...and of this many below ``smallObjectBytes``: a segment of a row or two pays 32 bytes of padding
    /// on average instead of 128, which is a third of its size (`docs/security.md`).
    public static let smallPadding = 64
    public static let smallObjectBytes = 1_024
    static let innerPrefix = 4 + 32 + 32
    static let zeroLink = [UInt8](repeating: 0, count: 32)

    /// An object sealed or opened.
    package struct Sealed: Sendable {
        package var header: SealedHeader
        /// The sealed bytes (from ``seal(_:first:last:node:content:previous:keyring:)``).
        package var bytes: [UInt8]
        /// The plain content (from ``open(_:kind:keyring:maximumBytes:)``).
        package var content: [UInt8]
        /// The previous link it names (zeros: none).
        package var previous: [UInt8]
        /// Its own link: what the next segment of its node names.
        package var link: [UInt8]
        /// The public key it is signed with.
        package var signer: [UInt8]
    }

    /// Seals `content` as `kind` of `keyring`'s account, written by `node`.
    package static func seal(
        _ kind: SealedHeader.Kind, first: UInt64 = 0, last: UInt64 = 0, node: NodeID, content: [UInt8], previous: [UInt8]? = nil,
        keyring: SealKeyring
    ) throws(SealError) -> Sealed {
        let previous = previous ?? zeroLink
        guard previous.count == 32 else { throw SealError(.malformed, "a link is 32 bytes") }
        guard content.count <= Int(UInt32.max) - padding - innerPrefix else { throw SealError(.malformed, "\(content.count) bytes are too many to seal") }
        var identity = SealedHeader(
            kind: kind, keyEpoch: keyring.currentEpoch, keyID: keyring.keyID, first: first, last: last,
            salt: [UInt8](repeating: 0, count: SealedHeader.saltByteCount), account: keyring.account, node: node)
        identity.salt = try keyring.salt(epoch: keyring.currentEpoch, identity: identity.encoded(), content: content, previous: previous)
        let headerBytes = identity.encoded()
        var inner = [UInt8]()
        let innerCount = paddedCount(innerPrefix + content.count)
        inner.reserveCapacity(innerCount)
        appendLittleEndian(UInt32(content.count), to: &inner)
        inner += previous
        inner += keyring.signingKey.publicKey
        inner += content
        inner += [UInt8](repeating: 0, count: innerCount - inner.count)
        let key = try keyring.objectKey(identity, headerBytes: headerBytes)
        var bytes = headerBytes
        appendLittleEndian(UInt32(innerCount + SealedHeader.tagByteCount), to: &bytes)
        let box: ChaChaPoly.SealedBox
        do {
            box = try ChaChaPoly.seal(inner, using: key, nonce: try ChaChaPoly.Nonce(data: nonce(0, final: true)), authenticating: bytes)
        } catch {
            throw SealError(.crypto, "sealing failed: \(error)")
        }
        bytes += box.ciphertext
        bytes += box.tag
        let link = Array(SHA256.hash(data: bytes))
        bytes += try keyring.signingKey.signature(for: link)
        return Sealed(header: identity, bytes: bytes, content: content, previous: previous, link: link, signer: keyring.signingKey.publicKey)
    }

    /// Opens a sealed object of `kind`: its structure, key, ciphertext and signature all checked before
    /// any of its content is returned. Where it belongs (node, range, account) is the caller's to check
    /// against where it was found.
    package static func open(_ bytes: [UInt8], kind: SealedHeader.Kind, keyring: SealKeyring, maximumBytes: Int) throws(SealError) -> Sealed {
        let header: SealedHeader
        let range: Range<Int>
        do {
            (header, range) = try SealedHeader.checkWhole(bytes, maximumBytes: maximumBytes)
        } catch {
            throw SealError(error.code == .badMagic ? .mixed : .malformed, error.code == .badMagic ? "it is not sealed, and this account is" : "\(error)")
        }
        guard header.kind == kind else { throw SealError(.misplaced, "it is a sealed \(header.kind), not a \(kind)") }
        let headerBytes = Array(bytes[0..<range.lowerBound])
        let key = try keyring.objectKey(header, headerBytes: Array(bytes[0..<range.lowerBound - 4]))
        let inner: [UInt8]
        do {
            let box = try ChaChaPoly.SealedBox(
                nonce: try ChaChaPoly.Nonce(data: nonce(0, final: true)), ciphertext: bytes[range.lowerBound..<range.upperBound - SealedHeader.tagByteCount],
                tag: bytes[range.upperBound - SealedHeader.tagByteCount..<range.upperBound])
            inner = Array(try ChaChaPoly.open(box, using: key, authenticating: headerBytes))
        } catch {
            throw SealError(.unauthentic, "its ciphertext does not authenticate under this account's key: changed, truncated or forged in transit")
        }
        guard inner.count >= innerPrefix else { throw SealError(.malformed, "the sealed content is \(inner.count) bytes, shorter than its prefix") }
        let length = Int(readLittleEndianUInt32(inner, at: 0))
        guard length <= inner.count - innerPrefix, inner[(innerPrefix + length)...].allSatisfy({ $0 == 0 }) else {
            throw SealError(.malformed, "the sealed content's length \(length) does not fit its \(inner.count) bytes, or its padding is not zeros")
        }
        let previous = Array(inner[4..<36])
        let signer = Array(inner[36..<68])
        let link = Array(SHA256.hash(data: bytes[0..<range.upperBound]))
        guard NodeSigningKey.isValid(bytes[range.upperBound...], of: link, by: signer) else {
            throw SealError(.unauthentic, "its signature does not verify with the key it names (\(NodeSigningKey.fingerprint(of: signer)))")
        }
        return Sealed(header: header, bytes: bytes, content: Array(inner[innerPrefix..<innerPrefix + length]), previous: previous, link: link, signer: signer)
    }

    static func paddedCount(_ count: Int) -> Int {
        let step = count < smallObjectBytes ? smallPadding : padding
        return (count + step - 1) / step * step
    }

    /// A chunk's nonce: its index and whether it is the last (a sealed segment is one last chunk).
    static func nonce(_ index: UInt64, final: Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        appendLittleEndian(index, to: &bytes)
        appendLittleEndian(UInt32(final ? 1 : 0), to: &bytes)
        return bytes
    }

    static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    static func readLittleEndianUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
    }
}
