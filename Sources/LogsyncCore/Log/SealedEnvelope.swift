/// The readable part of a sealed object (`docs/log-format.md`, "Sealed objects"): what a carrier needs to
/// route and name-check a segment, a progress record or a baseline of a sealed account, and nothing else.
/// Everything it says is bound to the ciphertext as associated data and covered by the writer's
/// signature, so a carrier can read it but not change it. Pure: the cryptography is `LogsyncSeal`'s.
package struct SealedHeader: Sendable, Hashable {
    /// What the ciphertext holds.
    package enum Kind: UInt8, Sendable, Hashable, CustomStringConvertible {
        case segment = 1
        case progressRecord = 2
        case baseline = 3

        package var description: String {
            switch self {
            case .segment: return "segment"
            case .progressRecord: return "progress record"
            case .baseline: return "baseline"
            }
        }
    }

    package var kind: Kind
    /// The account key epoch the object is sealed under.
    package var keyEpoch: UInt32
    /// Who may open it: 8 bytes derived from the account key (not secret; tells a wrong key at once).
    package var keyID: [UInt8]
    /// A segment's first and last sequence; a baseline's transaction count and frontier digest; 0 and 0
    /// for a progress record.
    package var first: UInt64
    package var last: UInt64
    /// 16 bytes that make the object's key its own: for a segment or progress record, keyed by the epoch
    /// key over everything its plaintext holds (the same object sealed again is the same bytes; any other
    /// plaintext under the same name gets another key); for a baseline, random.
    package var salt: [UInt8]
    package var account: String
    package var node: NodeID

    package init(kind: Kind, keyEpoch: UInt32, keyID: [UInt8], first: UInt64, last: UInt64, salt: [UInt8], account: String, node: NodeID) {
        self.kind = kind
        self.keyEpoch = keyEpoch
        self.keyID = keyID
        self.first = first
        self.last = last
        self.salt = salt
        self.account = account
        self.node = node
    }

    /// `LSSEAL`, CR, LF: distinct from every plain object's magic (`LSSEG`, `LSPRG`, `LSBAS`).
    package static let magic: [UInt8] = [0x4C, 0x53, 0x53, 0x45, 0x41, 0x4C, 0x0D, 0x0A]
    package static let formatVersion: UInt8 = 1
    package static let keyIDByteCount = 8
    package static let saltByteCount = 16
    /// An Ed25519 signature closes every sealed object.
    package static let signatureByteCount = 64
    /// The AEAD tag at the end of every ciphertext (ChaCha20-Poly1305).
    package static let tagByteCount = 16

    /// Whether `bytes` start like a sealed object (its magic), whatever follows.
    package static func isSealed(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= magic.count && bytes.prefix(magic.count).elementsEqual(magic)
    }

    /// The key epoch a device that holds no key yet names in its progress slot's placeholder: no key, so
    /// no reader takes it for a record.
    package static let placeholderEpoch = UInt32.max

    /// Whether `bytes` start with a placeholder's header (``placeholderEpoch``).
    package static func isPlaceholder(_ bytes: [UInt8]) -> Bool {
        (try? decode(bytes).header.keyEpoch) == placeholderEpoch
    }

    /// The header's bytes, which are also the associated data its ciphertext is sealed with.
    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(contentsOf: Self.magic)
        writer.write(kind.rawValue)
        writer.write(Self.formatVersion)
        writer.writeLittleEndian(keyEpoch)
        writer.write(contentsOf: keyID)
        writer.writeLittleEndian(first)
        writer.writeLittleEndian(last)
        writer.write(contentsOf: salt)
        writer.writeString(account)
        writer.writeString(node.rawValue)
        return writer.bytes
    }

    /// Reads a header from the start of `bytes`; returns it and where it ends.
    package static func decode(_ bytes: [UInt8]) throws(SegmentError) -> (header: SealedHeader, end: Int) {
        guard isSealed(bytes) else { throw SegmentError(.badMagic, at: "byte 0", "not a sealed logsync object (no LSSEAL magic)") }
        var reader = ByteReader(bytes, from: magic.count)
        let kindByte = try reader.readLittleEndian(UInt8.self, "kind")
        guard let kind = Kind(rawValue: kindByte) else {
            throw SegmentError(.malformed, at: "byte 8", "kind \(kindByte) is not a segment (1), a progress record (2) or a baseline (3)")
        }
        let version = try reader.readLittleEndian(UInt8.self, "format version")
        guard version != 0 else { throw SegmentError(.malformed, at: "byte 9", "sealed format version 0 is invalid") }
        guard version <= formatVersion else {
            throw SegmentError(.unsupportedFormat, at: "byte 9", "sealed format version \(version) is newer than this build reads (\(formatVersion)): upgrade logsync")
        }
        let epoch = try reader.readLittleEndian(UInt32.self, "key epoch")
        let keyID = Array(try reader.readBytes(keyIDByteCount, "key id"))
        let first = try reader.readLittleEndian(UInt64.self, "first")
        let last = try reader.readLittleEndian(UInt64.self, "last")
        let salt = Array(try reader.readBytes(saltByteCount, "salt"))
        let account = try readName(&reader, "account")
        let node = try readName(&reader, "node id")
        if kind == .segment {
            guard first >= 1, first <= last, last <= LogTransaction.maximumSequence else {
                throw SegmentError(.malformed, at: "byte 24", "sequences \(first)-\(last) are not a segment's range")
            }
        }
        return (SealedHeader(kind: kind, keyEpoch: epoch, keyID: keyID, first: first, last: last, salt: salt, account: account, node: NodeID(node)), reader.offset)
    }

    /// A UTF-8 name of 1 to 1,024 bytes after its u16 length, as in segment headers.
    private static func readName(_ reader: inout ByteReader, _ field: String) throws(SegmentError) -> String {
        let start = reader.offset
        let length = Int(try reader.readLittleEndian(UInt16.self, "\(field) length"))
        guard (1...1_024).contains(length) else { throw SegmentError(.malformed, at: "byte \(start)", "\(field) length \(length) is not 1 to 1,024") }
        let bytes = try reader.readBytes(length, field)
        guard let text = String(validating: bytes, as: UTF8.self) else { throw SegmentError(.malformed, at: "byte \(start + 2)", "\(field) is not UTF-8") }
        return text
    }

    /// The layout of a sealed segment or progress record after its header: a u32 ciphertext length, the
    /// ciphertext (tag included), the signature, and nothing else. Checks the structure and `maximumBytes`
    /// only (no key needed): what a relay refuses a push with. Returns the header and the ciphertext's range.
    package static func checkWhole(_ bytes: [UInt8], maximumBytes: Int) throws(SegmentError) -> (header: SealedHeader, ciphertext: Range<Int>) {
        guard bytes.count <= maximumBytes else {
            throw SegmentError(.limitExceeded, at: "byte 0", "the sealed object is \(bytes.count) bytes; the limit is \(maximumBytes)")
        }
        var (header, end) = try decode(bytes)
        if header.kind == .progressRecord, let split = deviceAppendixStart(bytes) {
            // A progress slot's device appendix follows the record (see ``deviceAppendixStart(_:)``).
            (header, end) = try decode(Array(bytes[..<split]))
            return try checkRecord(Array(bytes[..<split]), header: header, end: end)
        }
        return try checkRecord(bytes, header: header, end: end)
    }

    /// A sealed account's progress slot may end with a **device appendix** (`docs/log-format.md`, "Devices"):
    /// the writer's device card and the roster it holds, readable, after the sealed record; its last 12
    /// bytes are its length (u32, the bytes before them) and the magic `LSDEVICE`. Returns where it starts.
    package static func deviceAppendixStart(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 12, bytes.suffix(8).elementsEqual(deviceAppendixMagic) else { return nil }
        let at = bytes.count - 12
        let length = (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
        guard length <= at else { return nil }
        return at - length
    }

    package static let deviceAppendixMagic = Array("LSDEVICE".utf8)

    private static func checkRecord(_ bytes: [UInt8], header: SealedHeader, end: Int) throws(SegmentError) -> (header: SealedHeader, ciphertext: Range<Int>) {
        guard header.kind != .baseline else {
            throw SegmentError(.malformed, at: "byte 8", "a sealed baseline is a run of chunks, not one ciphertext")
        }
        var reader = ByteReader(bytes, from: end)
        let length = Int(try reader.readLittleEndian(UInt32.self, "ciphertext length"))
        let start = reader.offset
        guard length >= tagByteCount, bytes.count - start == length + signatureByteCount else {
            throw SegmentError(
                .truncated, at: "byte \(end)",
                "the ciphertext is said to be \(length) bytes and the signature \(signatureByteCount); \(bytes.count - start) bytes follow: truncated or padded")
        }
        return (header, start..<start + length)
    }
}
