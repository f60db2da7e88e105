/// Encodes transactions into body records, keeping the segment's name table.
///
/// Encoding one transaction either succeeds or leaves the encoder exactly as it was, so a transaction that
/// does not fit can go to the next segment.
struct BodyEncoder {
    let limits: SegmentLimits
    var nameIndices: [String: UInt64] = [:]
    var names: [String] = []
    var namesBeforeLastEncode = 0
    var previousTimestamp: UInt64 = 0
    var committedCount = 0
    /// The record being encoded holds a value only format 2 can carry.
    var recordNeedsFormat2 = false
    /// The lowest format version that can carry every committed record: 1 unless one holds text that is
    /// not valid UTF-8 (``ValueTag/nonUTF8Text``). Older readers keep a format-2 segment unapplied instead
    /// of misreading it, so segments use format 2 only when they must.
    private(set) var formatVersion: UInt16 = 1

    init(limits: SegmentLimits) { self.limits = limits }

    /// Where a problem is, built only when there is one.
    struct Site {
        var sequence: UInt64
        var change: Int?
        var column: String?

        var description: String {
            var text = "transaction \(sequence)"
            if let change { text += ", change \(change)" }
            if let column { text += ", column '\(column)'" }
            return text
        }
    }

    /// Replaces `writer`'s bytes with the record for `transaction`. Call ``commit(_:)`` once the record is
    /// in the segment, or ``rollback()`` if it is not.
    mutating func encode(_ transaction: LogTransaction, into writer: inout ByteWriter) throws(SegmentError) {
        namesBeforeLastEncode = names.count
        recordNeedsFormat2 = false
        writer.removeAll()
        do {
            try encodeRecord(transaction, into: &writer)
        } catch {
            rollback()
            throw error
        }
    }

    /// Forgets the names the last ``encode(_:into:)`` defined.
    mutating func rollback() {
        for name in names[namesBeforeLastEncode...] { nameIndices[name] = nil }
        names.removeSubrange(namesBeforeLastEncode...)
    }

    /// Records that the last encoded transaction is in the segment: later timestamps are relative to it.
    mutating func commit(_ transaction: LogTransaction) {
        previousTimestamp = transaction.timestamp.rawValue
        committedCount += 1
        namesBeforeLastEncode = names.count
        if recordNeedsFormat2 { formatVersion = max(formatVersion, 2) }
    }

    private mutating func encodeRecord(_ transaction: LogTransaction, into writer: inout ByteWriter) throws(SegmentError) {
        var site = Site(sequence: transaction.sequence)
        writer.writeVarint(committedCount == 0 ? 0 as UInt64 : 1)
        writer.writeVarint(zigzagEncode(Int64(bitPattern: transaction.timestamp.rawValue &- previousTimestamp)))
        var flags: UInt8 = 0
        if transaction.author != nil { flags |= TransactionFlags.hasAuthor }
        if transaction.contextName != nil { flags |= TransactionFlags.hasContextName }
        writer.write(flags)
        if let author = transaction.author { try writeName(author, "author", site, into: &writer) }
        if let contextName = transaction.contextName { try writeName(contextName, "context name", site, into: &writer) }

        guard fitsLimit(UInt64(transaction.changes.count), limits.maxChangesPerTransaction) else {
            throw SegmentError(
                .limitExceeded, at: site.description,
                "\(transaction.changes.count) changes; maxChangesPerTransaction is \(limits.maxChangesPerTransaction)")
        }
        writer.writeVarint(transaction.changes.count)
        for (index, change) in transaction.changes.enumerated() {
            site.change = index
            try writeName(change.entity, "entity name", site, into: &writer)
            writer.write(UInt8(truncatingIfNeeded: change.kind.rawValue))
            writer.writeVarint(change.causalLength)
            try writeValue(change.primaryKey, site, into: &writer)
            guard fitsLimit(UInt64(change.values.count), limits.maxValuesPerChange) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "\(change.values.count) values; maxValuesPerChange is \(limits.maxValuesPerChange)")
            }
            writer.writeVarint(change.values.count)
            // Sorted by name, so the same change always encodes to the same bytes.
            for (column, value) in change.values.sorted(by: { $0.key < $1.key }) {
                site.column = column
                try writeName(column, "column name", site, into: &writer)
                try writeValue(value, site, into: &writer)
            }
            site.column = nil
        }
    }

    /// A name reference: the varint index + 1 of a name already in the table, or 0 followed by a new name
    /// (varint length, UTF-8), which takes the next index.
    private mutating func writeName(_ name: String, _ what: String, _ site: Site, into writer: inout ByteWriter) throws(SegmentError) {
        if let index = nameIndices[name] {
            writer.writeVarint(index + 1)
            return
        }
        let length = name.utf8.count
        guard fitsLimit(UInt64(length), limits.maxStringBytes) else {
            throw SegmentError(
                .limitExceeded, at: site.description,
                "the \(what) is \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
        }
        guard fitsLimit(UInt64(names.count + 1), limits.maxNames) else {
            // If the segment is empty, this transaction alone has too many names for any segment.
            throw SegmentError(
                committedCount == 0 ? .limitExceeded : .segmentFull, at: site.description,
                "the \(what) would be name \(names.count + 1) in the segment's name table; maxNames is \(limits.maxNames)")
        }
        nameIndices[name] = UInt64(names.count)
        names.append(name)
        writer.writeVarint(0 as UInt64)
        writer.writeVarint(length)
        writer.write(contentsOf: name.utf8)
    }

    private mutating func writeValue(_ value: DatabaseValue, _ site: Site, into writer: inout ByteWriter) throws(SegmentError) {
        switch value {
        case .null:
            writer.write(ValueTag.null)
        case .integer(let integer):
            writer.write(ValueTag.integer)
            writer.writeVarint(zigzagEncode(integer))
        case .real(let real):
            writer.write(ValueTag.real)
            writer.writeLittleEndian(real.bitPattern)
        case .text(let text):
            if let uuid = CanonicalUUID.parse(text) {
                writer.write(ValueTag.uuidText)
                writer.writeBigEndian(uuid.high)
                writer.writeBigEndian(uuid.low)
                return
            }
            let length = text.utf8.count
            guard fitsLimit(UInt64(length), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description, "a text value is \(length) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            writer.write(ValueTag.text)
            writer.writeVarint(length)
            writer.write(contentsOf: text.utf8)
        case .blob(let bytes):
            guard fitsLimit(UInt64(bytes.count), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "a blob value is \(bytes.count) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            writer.write(ValueTag.blob)
            writer.writeVarint(bytes.count)
            writer.write(contentsOf: bytes)
        case .nonUTF8Text(let bytes):
            guard fitsLimit(UInt64(bytes.count), limits.maxStringBytes) else {
                throw SegmentError(
                    .limitExceeded, at: site.description,
                    "a text value is \(bytes.count) bytes; maxStringBytes is \(limits.maxStringBytes)")
            }
            recordNeedsFormat2 = true
            writer.write(ValueTag.nonUTF8Text)
            writer.writeVarint(bytes.count)
            writer.write(contentsOf: bytes)
        }
    }
}
