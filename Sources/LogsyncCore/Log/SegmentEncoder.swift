/// Builds one log segment from consecutive transactions of one node.
///
/// Each appended transaction is encoded and streamed into the compressor at once, so the encoder's memory
/// is the compressed body so far (bounded by ``SegmentLimits/maxSegmentBytes``) and one transaction's
/// record, never the transactions themselves. ``finish()`` returns the complete, self-checking segment.
///
/// ```swift
/// var encoder = try SegmentEncoder(schemaVersion: 3, account: account, node: node)
/// for transaction in pending {
///     do {
///         try encoder.append(transaction)
///     } catch where error.code == .segmentFull {
///         ship(try encoder.finish())
///         encoder = try SegmentEncoder(schemaVersion: 3, account: account, node: node)
///         try encoder.append(transaction)
///     }
/// }
/// ship(try encoder.finish())
/// ```
///
/// Encoding is deterministic: the same header fields and transactions always give the same bytes (with the
/// same zlib build). The encoder owns a zlib stream, so it cannot be copied.
package struct SegmentEncoder: ~Copyable {
    /// The schema version the header records.
    package let schemaVersion: Int
    /// The account the header records.
    package let account: String
    /// The node the header records: the writer of every transaction in the segment.
    package let node: NodeID
    /// The bounds the segment stays within.
    package let limits: SegmentLimits

    /// How many transactions the segment holds so far.
    package private(set) var transactionCount = 0
    /// The size of the uncompressed body so far, in bytes.
    package private(set) var uncompressedByteCount = 0
    /// The sequence of the first transaction appended, nil while the segment is empty.
    package private(set) var firstSequence: UInt64?
    /// The sequence of the last transaction appended: the next one must be its successor.
    package private(set) var lastSequence: UInt64?
    /// The earliest timestamp among the appended transactions.
    package private(set) var minTimestamp: HLCTimestamp?
    /// The latest timestamp among the appended transactions.
    package private(set) var maxTimestamp: HLCTimestamp?

    private var body: BodyEncoder
    private var record = ByteWriter()
    private let deflater: Deflater
    /// Header and trailer bytes.
    private let framingByteCount: Int

    /// Starts an empty segment.
    ///
    /// - Parameters:
    ///   - schemaVersion: the version of the schema the transactions were written under (0 or more).
    ///   - account: the account the store belongs to; 1 to 1,024 bytes of UTF-8.
    ///   - node: the node that wrote the transactions; 1 to 1,024 bytes of UTF-8.
    ///   - limits: the bounds the segment must stay within; readers should use the same.
    /// - Throws: ``SegmentError/Code/invalidArgument`` for an unusable header field.
    package init(schemaVersion: Int, account: String, node: NodeID, limits: SegmentLimits = .default) throws(SegmentError) {
        guard schemaVersion >= 0 else {
            throw SegmentError(.invalidArgument, at: "header", "schema version \(schemaVersion) is negative")
        }
        try SegmentFormat.validateHeaderString(account, "account")
        try SegmentFormat.validateHeaderString(node.rawValue, "node id")
        // Everything that can fail happens before the first stored property is set.
        let deflater = try Deflater()
        self.schemaVersion = schemaVersion
        self.account = account
        self.node = node
        self.limits = limits
        self.body = BodyEncoder(limits: limits)
        self.deflater = deflater
        self.framingByteCount = SegmentFormat.headerByteCount(account: account, node: node) + SegmentFormat.trailerByteCount
    }

    /// An upper bound on the size of the segment ``finish()`` would return now, in bytes.
    package var byteCountBound: Int { framingByteCount + deflater.finishedSizeBound(adding: 0) }

    /// Adds a transaction to the segment, or leaves the segment exactly as it was and throws.
    ///
    /// - Throws: ``SegmentError/Code/sequenceGap`` unless the transaction's sequence follows the last one
    ///   appended; ``SegmentError/Code/segmentFull`` when it would take the segment over a per-segment
    ///   limit (finish this segment and start another); ``SegmentError/Code/limitExceeded`` when it can
    ///   never fit a segment under these limits.
    package mutating func append(_ transaction: LogTransaction) throws(SegmentError) {
        let site = "transaction \(transaction.sequence)"
        let tooMuch: SegmentError.Code = transactionCount == 0 ? .limitExceeded : .segmentFull
        guard transactionCount < limits.effectiveMaxTransactions else {
            throw SegmentError(tooMuch, at: site, "the segment holds \(transactionCount) transactions; maxTransactions is \(limits.maxTransactions)")
        }
        if let lastSequence {
            guard lastSequence < .max, transaction.sequence == lastSequence + 1 else {
                throw SegmentError(
                    .sequenceGap, at: site,
                    "sequence \(transaction.sequence) cannot follow \(lastSequence): a segment's sequences are consecutive")
            }
        }
        try body.encode(transaction, into: &record)
        do {
            try admitRecord(site: site, tooMuch: tooMuch)
        } catch {
            body.rollback()
            throw error
        }
        body.commit(transaction)
        transactionCount += 1
        uncompressedByteCount += record.count
        firstSequence = firstSequence ?? transaction.sequence
        lastSequence = transaction.sequence
        minTimestamp = min(minTimestamp ?? transaction.timestamp, transaction.timestamp)
        maxTimestamp = max(maxTimestamp ?? transaction.timestamp, transaction.timestamp)
    }

    /// Compresses the encoded record if the segment stays within its size limits.
    private mutating func admitRecord(site: String, tooMuch: SegmentError.Code) throws(SegmentError) {
        let count = record.count
        guard uncompressedByteCount + count <= limits.maxUncompressedBodyBytes else {
            throw SegmentError(
                tooMuch, at: site,
                "\(count) more body bytes would make \(uncompressedByteCount + count); maxUncompressedBodyBytes is \(limits.maxUncompressedBodyBytes)")
        }
        // The final size is only known at the end. zlib's worst-case bound for the unflushed input keeps
        // the promise; near the limit, a flush turns the estimate into exact output so compressible data
        // still fills the segment.
        var bound = framingByteCount + deflater.finishedSizeBound(adding: count)
        if bound > limits.maxSegmentBytes && deflater.unflushedInputCount > 0 {
            try deflater.flush()
            bound = framingByteCount + deflater.finishedSizeBound(adding: count)
        }
        if bound <= limits.maxSegmentBytes {
            try deflater.write(record.bytes)
            return
        }
        guard transactionCount == 0 else {
            throw SegmentError(
                .segmentFull, at: site,
                "the segment could grow to \(bound) bytes with this transaction; maxSegmentBytes is \(limits.maxSegmentBytes)")
        }
        // Alone in the segment, the transaction can be tried for real and undone if it does not fit.
        try deflater.write(record.bytes)
        try deflater.flush()
        let size = framingByteCount + deflater.finishedSizeBound(adding: 0)
        if size > limits.maxSegmentBytes {
            try deflater.reset()
            throw SegmentError(
                .limitExceeded, at: site,
                "the transaction compresses to about \(size) bytes; maxSegmentBytes is \(limits.maxSegmentBytes)")
        }
    }

    /// Ends the segment and returns its bytes: header, compressed body, trailer.
    ///
    /// - Throws: ``SegmentError/Code/empty`` when no transaction was appended.
    package consuming func finish() throws(SegmentError) -> [UInt8] {
        guard let firstSequence, let lastSequence, let minTimestamp, let maxTimestamp else {
            throw SegmentError(.empty, at: "encoder", "a segment needs at least one transaction")
        }
        let compressed = try deflater.finish()
        let header = SegmentHeader(
            formatVersion: body.formatVersion, schemaVersion: schemaVersion, account: account, node: node, firstSequence: firstSequence,
            lastSequence: lastSequence, minTimestamp: minTimestamp, maxTimestamp: maxTimestamp,
            transactionCount: transactionCount)
        let bytes = SegmentFormat.assemble(header: header, compressedBody: compressed, uncompressedByteCount: uncompressedByteCount)
        guard bytes.count <= limits.maxSegmentBytes else {
            // The admission bound makes this unreachable; it is checked so that it can never ship.
            throw SegmentError(
                .limitExceeded, at: "encoder", "the segment is \(bytes.count) bytes; maxSegmentBytes is \(limits.maxSegmentBytes)")
        }
        return bytes
    }

    /// Encodes `transactions` as one segment.
    ///
    /// - Throws: as ``append(_:)`` and ``finish()``; ``SegmentError/Code/segmentFull`` means the
    ///   transactions need more than one segment.
    package static func encode(
        schemaVersion: Int, account: String, node: NodeID, transactions: some Sequence<LogTransaction>,
        limits: SegmentLimits = .default
    ) throws(SegmentError) -> [UInt8] {
        var encoder = try SegmentEncoder(schemaVersion: schemaVersion, account: account, node: node, limits: limits)
        for transaction in transactions { try encoder.append(transaction) }
        return try encoder.finish()
    }
}
