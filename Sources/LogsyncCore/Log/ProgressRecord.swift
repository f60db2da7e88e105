/// What a node tells the others about itself, through its transport, so that they know what they may
/// prune (`docs/retention.md`): what it has applied from every node (its own exported history included),
/// how far it has pruned its own segments, and when it was last active. Small, self-checking, and
/// replaced as a whole each time it is published (`docs/log-format.md`, "Progress records").
package struct ProgressRecord: Sendable, Hashable {
    public var account: String
    public var node: NodeID
    /// Everything this node's store holds: the last sequence applied from each other node, and for the
    /// node itself the last sequence it exported.
    public var applied: Frontier
    /// The node's own segments with a last sequence at or below this are deleted (0: none).
    public var prunedThrough: UInt64
    /// Wall-clock milliseconds since 1970 when the node wrote this record: a node whose record is older
    /// than the retention stops holding pruning back.
    public var activeAtMilliseconds: UInt64
    /// The schema version the node's app registered (format 2; nil in a record of format 1): what
    /// `syncctl peers` and the relay's `/metrics` show for a node that upgraded before writing anything
    /// (`docs/schema-evolution.md`).
    public var schemaVersion: Int?

    public init(
        account: String, node: NodeID, applied: Frontier, prunedThrough: UInt64, activeAtMilliseconds: UInt64, schemaVersion: Int? = nil
    ) {
        self.account = account
        self.node = node
        self.applied = applied
        self.prunedThrough = prunedThrough
        self.activeAtMilliseconds = activeAtMilliseconds
        self.schemaVersion = schemaVersion
    }

    /// `LSPRG`, CR, LF, SUB, as segments' magic.
    static let magic: [UInt8] = [0x4C, 0x53, 0x50, 0x52, 0x47, 0x0D, 0x0A, 0x1A]
    /// Version 2 appends the schema version (u32) to version 1's body; a record without one is written as
    /// version 1.
    public static let formatVersion: UInt16 = 2
    /// Later versions only append fields to the body, so a reader takes the fields it knows from a record
    /// of any version and skips the rest: a reader of this build takes the schema version from a record of
    /// version 3 or later too, and never counts a newer writer as silent.
    public static let appendOnlyFrom: UInt16 = 2
    /// A record names every node once; a node with more than this is not a logsync record.
    public static let maximumByteCount = 1 << 20

    /// The record's bytes: magic, version (u16), body length (u32), body, CRC-32 of everything before it.
    public func encoded() -> [UInt8] {
        var body = ByteWriter()
        body.writeString(account)
        body.writeString(node.rawValue)
        body.writeLittleEndian(activeAtMilliseconds)
        body.writeLittleEndian(prunedThrough)
        let entries = applied.sorted
        body.writeLittleEndian(UInt32(entries.count))
        for (node, sequence) in entries {
            body.writeString(node.rawValue)
            body.writeLittleEndian(sequence)
        }
        if let schemaVersion { body.writeLittleEndian(UInt32(clamping: schemaVersion)) }
        var writer = ByteWriter()
        writer.write(contentsOf: Self.magic)
        writer.writeLittleEndian(schemaVersion == nil ? 1 : Self.formatVersion)
        writer.writeLittleEndian(UInt32(body.count))
        writer.write(contentsOf: body.bytes)
        writer.writeLittleEndian(CRC32.checksum(writer.bytes, 0..<writer.count))
        return writer.bytes
    }

    /// Decodes and checks a record; a damaged, truncated or foreign one throws.
    public init(decoding bytes: [UInt8]) throws(SegmentError) {
        func fail(_ code: SegmentError.Code, _ message: String) -> SegmentError {
            SegmentError(code, at: "progress record", message)
        }
        guard bytes.count >= 18, bytes.count <= Self.maximumByteCount else {
            throw fail(.truncated, "\(bytes.count) bytes is not the size of a progress record")
        }
        guard bytes[0..<8].elementsEqual(Self.magic) else { throw fail(.badMagic, "it does not start with \"LSPRG\"") }
        var reader = ByteReader(bytes, from: 8, to: bytes.count - 4)
        let version = try reader.readLittleEndian(UInt16.self, "format version")
        guard version >= 1 else {
            throw fail(.unsupportedFormat, "format version \(version); this build reads 1 and the fields it knows of later ones")
        }
        let length = Int(try reader.readLittleEndian(UInt32.self, "body length"))
        guard length == reader.remaining else { throw fail(.malformed, "body length \(length), but \(reader.remaining) bytes follow") }
        var crcReader = ByteReader(bytes, from: bytes.count - 4)
        let stored = try crcReader.readLittleEndian(UInt32.self, "CRC")
        guard stored == CRC32.checksum(bytes, 0..<bytes.count - 4) else { throw fail(.checksumMismatch, "the CRC-32 does not match: the record is damaged") }
        account = try reader.readString("account")
        node = NodeID(try reader.readString("node id"))
        activeAtMilliseconds = try reader.readLittleEndian(UInt64.self, "active at")
        prunedThrough = try reader.readLittleEndian(UInt64.self, "pruned through")
        // Stored and compared as SQLite's signed 64-bit integers: anything above is no record of a store's.
        guard activeAtMilliseconds <= UInt64(Int64.max), prunedThrough <= LogTransaction.maximumSequence else {
            throw fail(.limitExceeded, "active at \(activeAtMilliseconds) or pruned through \(prunedThrough) is above \(Int64.max)")
        }
        let count = Int(try reader.readLittleEndian(UInt32.self, "node count"))
        var sequences: [NodeID: UInt64] = [:]
        for _ in 0..<count {
            let node = NodeID(try reader.readString("node id"))
            let sequence = try reader.readLittleEndian(UInt64.self, "sequence")
            guard sequence <= LogTransaction.maximumSequence else {
                throw fail(.limitExceeded, "node \(node)'s sequence \(sequence) is above \(LogTransaction.maximumSequence)")
            }
            guard sequences.updateValue(sequence, forKey: node) == nil else { throw fail(.malformed, "node \(node) is listed twice") }
        }
        // Version 2 appends the schema version; fields of a later version follow it. Version 1 has none.
        guard reader.remaining == 0 || version >= Self.appendOnlyFrom else {
            throw fail(.malformed, "\(reader.remaining) unexplained bytes at the end")
        }
        schemaVersion = version >= 2 ? Int(try reader.readLittleEndian(UInt32.self, "schema version")) : nil
        applied = Frontier(sequences)
    }
}

extension ByteWriter {
    /// A u16 length and UTF-8: the strings of headers and records.
    mutating func writeString(_ value: String) {
        let utf8 = Array(value.utf8.prefix(Int(UInt16.max)))
        writeLittleEndian(UInt16(utf8.count))
        write(contentsOf: utf8)
    }
}

extension ByteReader {
    mutating func readString(_ field: String) throws(SegmentError) -> String {
        let offset = offset
        let length = Int(try readLittleEndian(UInt16.self, "\(field) length"))
        guard length >= 1 else { throw SegmentError(.malformed, at: "byte \(offset)", "\(field) is empty") }
        guard let value = String(validating: try readBytes(length, field), as: UTF8.self) else {
            throw SegmentError(.malformed, at: "byte \(offset + 2)", "\(field) is not valid UTF-8")
        }
        return value
    }
}
