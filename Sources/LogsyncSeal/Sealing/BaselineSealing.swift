import Crypto
import LogsyncCore

/// A sealed baseline is sealed in chunks, so that neither writing nor reading one holds it whole:
///
///     header | { u8 last | u32 C | ciphertext of C bytes } … | Ed25519 signature
///
/// Chunk *i* is sealed with nonce (*i*, last) under the object's key, the header as associated data; its
/// plaintext is `u32 L | L bytes | zeros`, only the last chunk padded (as ``Sealer`` pads). The first
/// chunk's bytes start with the signer's public key. The signature is over the SHA-256 of every byte
/// before it, so a carrier can neither cut the run short (the last flag), reorder chunks (the nonces),
/// nor splice two baselines (the key is the header's).
public struct BaselineSealer {
    let keyring: SealKeyring
    let header: SealedHeader
    let headerBytes: [UInt8]
    let key: SymmetricKey
    var hash = SHA256()
    var index: UInt64 = 0
    var started = false

    /// A sealer of `node`'s baseline named by `transactionCount` and `frontierDigest`.
    public init(transactionCount: UInt64, frontierDigest: UInt64, node: NodeID, keyring: SealKeyring) throws(SealError) {
        self.keyring = keyring
        var header = SealedHeader(
            kind: .baseline, keyEpoch: keyring.currentEpoch, keyID: keyring.keyID, first: transactionCount, last: frontierDigest,
            salt: [UInt8](repeating: 0, count: SealedHeader.saltByteCount), account: keyring.account, node: node)
        header.salt = SealKeyring.randomSalt()
        self.header = header
        headerBytes = header.encoded()
        key = try keyring.objectKey(header, headerBytes: headerBytes)
    }

    /// The sealed bytes of the next plain chunk (the header before the first).
    public mutating func seal(_ chunk: [UInt8], last: Bool) throws(SealError) -> [UInt8] {
        var out: [UInt8] = []
        var content = chunk
        if !started {
            out = headerBytes
            content = keyring.signingKey.publicKey + chunk
            started = true
        }
        var inner: [UInt8] = []
        Sealer.appendLittleEndian(UInt32(content.count), to: &inner)
        inner += content
        if last { inner += [UInt8](repeating: 0, count: Sealer.paddedCount(inner.count) - inner.count) }
        let box: ChaChaPoly.SealedBox
        do {
            box = try ChaChaPoly.seal(inner, using: key, nonce: try ChaChaPoly.Nonce(data: Sealer.nonce(index, final: last)), authenticating: headerBytes)
        } catch {
            throw SealError(.crypto, "sealing failed: \(error)")
        }
        index += 1
        out.append(last ? 1 : 0)
        Sealer.appendLittleEndian(UInt32(box.ciphertext.count + SealedHeader.tagByteCount), to: &out)
        out += box.ciphertext
        out += box.tag
        hash.update(data: out)
        if last { out += try keyring.signingKey.signature(for: Array(hash.finalize())) }
        return out
    }
}

/// Opens a sealed baseline as it streams in: ``feed(_:)`` takes the bytes in any pieces and returns the
/// plain bytes of every chunk completed; ``finish()`` checks that the last chunk and the signature came and
/// nothing after them. Content is handed on as each chunk authenticates; only the signature waits for the
/// end, so the caller must not commit what it built from the content before ``finish()`` returns.
public struct BaselineOpener {
    let keyring: SealKeyring
    let expected: (node: NodeID, transactionCount: UInt64, frontierDigest: UInt64)
    /// The largest ciphertext chunk accepted.
    public static let maximumChunkBytes = 16 << 20
    var buffer: [UInt8] = []
    var header: SealedHeader?
    var headerBytes: [UInt8] = []
    var key: SymmetricKey?
    var hash = SHA256()
    var index: UInt64 = 0
    var ended = false
    var digest: [UInt8] = []
    public private(set) var signer: [UInt8] = []

    public init(node: NodeID, transactionCount: UInt64, frontierDigest: UInt64, keyring: SealKeyring) {
        self.keyring = keyring
        expected = (node, transactionCount, frontierDigest)
    }

    public mutating func feed(_ bytes: [UInt8]) throws(SealError) -> [UInt8] {
        buffer += bytes
        // After the last chunk only the signature may follow.
        guard !ended || buffer.count <= SealedHeader.signatureByteCount else {
            throw SealError(.unauthentic, "\(buffer.count) bytes follow the last chunk instead of a signature of \(SealedHeader.signatureByteCount)")
        }
        var plain: [UInt8] = []
        if header == nil {
            guard buffer.count >= 8 else { return [] }
            guard SealedHeader.isSealed(buffer) else { throw SealError(.mixed, "the baseline is not sealed, and this account is") }
            let decoded: (header: SealedHeader, end: Int)
            do {
                decoded = try SealedHeader.decode(buffer)
            } catch where error.code == .truncated {
                guard buffer.count < 4_200 else { throw SealError(.malformed, "\(error)") }
                return []
            } catch {
                throw SealError(.malformed, "\(error)")
            }
            let found = decoded.header
            guard found.kind == .baseline else { throw SealError(.misplaced, "it is a sealed \(found.kind), not a baseline") }
            guard found.account == keyring.account, found.node == expected.node, found.first == expected.transactionCount,
                found.last == expected.frontierDigest
            else {
                throw SealError(
                    .misplaced,
                    "it is sealed as account '\(found.account)' node \(found.node)'s baseline \(found.first)-\(String(found.last, radix: 16)), not the one its name says")
            }
            headerBytes = Array(buffer[0..<decoded.end])
            key = try keyring.objectKey(found, headerBytes: headerBytes)
            header = found
            hash.update(data: headerBytes)
            buffer.removeFirst(decoded.end)
        }
        while !ended {
            if buffer.count < 5 { break }
            let last = buffer[0]
            let length = Int(Sealer.readLittleEndianUInt32(buffer, at: 1))
            guard last <= 1, length >= SealedHeader.tagByteCount, length <= Self.maximumChunkBytes else {
                throw SealError(.malformed, "chunk \(index) says it is \(length) bytes (flag \(last)): not a sealed baseline chunk")
            }
            guard buffer.count >= 5 + length else { break }
            let record = Array(buffer[0..<5 + length])
            buffer.removeFirst(5 + length)
            hash.update(data: record)
            let inner: [UInt8]
            do {
                let box = try ChaChaPoly.SealedBox(
                    nonce: try ChaChaPoly.Nonce(data: Sealer.nonce(index, final: last == 1)), ciphertext: record[5..<record.count - SealedHeader.tagByteCount],
                    tag: record[(record.count - SealedHeader.tagByteCount)...])
                inner = Array(try ChaChaPoly.open(box, using: key!, authenticating: headerBytes))
            } catch {
                throw SealError(.unauthentic, "chunk \(index) does not authenticate: changed, reordered, cut or forged in transit")
            }
            guard inner.count >= 4 else { throw SealError(.malformed, "chunk \(index) is too short") }
            let count = Int(Sealer.readLittleEndianUInt32(inner, at: 0))
            guard count <= inner.count - 4, inner[(4 + count)...].allSatisfy({ $0 == 0 }) else {
                throw SealError(.malformed, "chunk \(index)'s length \(count) does not fit it")
            }
            var content = inner[4..<4 + count]
            if index == 0 {
                guard content.count >= 32 else { throw SealError(.malformed, "the first chunk lacks the signer's key") }
                signer = Array(content.prefix(32))
                content = content.dropFirst(32)
            }
            plain += content
            index += 1
            if last == 1 {
                ended = true
                digest = Array(hash.finalize())
                guard buffer.count <= SealedHeader.signatureByteCount else {
                    throw SealError(.unauthentic, "\(buffer.count) bytes follow the last chunk instead of a signature of \(SealedHeader.signatureByteCount)")
                }
            }
        }
        return plain
    }

    /// Checks the end: the last chunk came, then the signature, then nothing.
    public func finish() throws(SealError) {
        guard ended else { throw SealError(.unauthentic, "the baseline ends before its last chunk: cut short in transit") }
        guard buffer.count == SealedHeader.signatureByteCount else {
            throw SealError(.unauthentic, "\(buffer.count) bytes follow the last chunk instead of a signature of \(SealedHeader.signatureByteCount)")
        }
        guard NodeSigningKey.isValid(buffer, of: digest, by: signer) else {
            throw SealError(.unauthentic, "its signature does not verify with the key it names (\(NodeSigningKey.fingerprint(of: signer)))")
        }
    }
}
