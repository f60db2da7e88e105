/// Reads a log segment: checks it whole, then hands out its transactions one at a time.
///
/// ``init(bytes:limits:)`` checks the size limit, the magic, the format version and the checksum over
/// every byte before anything is exposed, so a corrupt or tampered segment is refused up front. The body is
/// then inflated in bounded chunks as ``next()`` is called, so memory does not grow with the number of
/// transactions: at most one transaction, one chunk and the segment's name table are held.
///
/// ```swift
/// var decoder = try SegmentDecoder(bytes: bytes)
/// while let transaction = try decoder.next() {
///     try batch.apply(transaction)
/// }
/// // Only now is the whole segment known to be good.
/// ```
///
/// Every structural rule is checked as the body is read (lengths, counts against ``SegmentLimits``, tags,
/// UTF-8, consecutive sequences matching the header), and the last checks (nothing after the last
/// transaction, the header's timestamp range) run in the call to ``next()`` that returns nil. Apply a
/// segment's transactions only once that call has returned nil; after any error, discard everything decoded
/// from the segment. Decoding throws ``SegmentError`` for any input and never traps.
///
/// The decoder owns a zlib stream, so it cannot be copied.
package struct SegmentDecoder: ~Copyable {
    /// The segment's header, checked against the limits and, as decoding proceeds, against the body.
    package let header: SegmentHeader
    /// The bounds the segment is checked against.
    package let limits: SegmentLimits
    /// The size of the uncompressed body, in bytes, as the trailer states it (checked when decoding ends).
    package let uncompressedByteCount: Int

    private var body: BodyDecoder

    /// Enough leading bytes of any segment for ``readHeader(_:limits:)``.
    package static let maximumHeaderByteCount = SegmentFormat.maximumHeaderByteCount

    /// Checks a complete segment and prepares to decode its transactions.
    ///
    /// - Throws: ``SegmentError/Code/limitExceeded`` for a segment larger than
    ///   ``SegmentLimits/maxSegmentBytes``, ``SegmentError/Code/badMagic`` for something that is not a
    ///   segment, ``SegmentError/Code/unsupportedFormat`` for a newer format (keep the file),
    ///   ``SegmentError/Code/truncated`` or ``SegmentError/Code/checksumMismatch`` for damaged bytes, and
    ///   ``SegmentError/Code/malformed`` for a header that breaks the format's rules.
    package init(bytes: [UInt8], limits: SegmentLimits = .default) throws(SegmentError) {
        let (header, headerEnd, bodyLength) = try Self.checkEnvelope(bytes, limits: limits)
        let source = try BodySource(
            segment: bytes, compressedRange: headerEnd..<(bytes.count - SegmentFormat.trailerByteCount),
            expectedLength: Int(bodyLength))
        self.header = header
        self.limits = limits
        self.uncompressedByteCount = Int(bodyLength)
        self.body = BodyDecoder(header: header, limits: limits, source: source)
    }

    /// Checks everything about a complete segment except its body: the size limit, the magic, the format
    /// version, the checksum over every byte, the header, and the body length the trailer states. Carriers
    /// that store segments without interpreting them (the relay) use it to refuse damaged or mislabelled
    /// segments without inflating anything.
    package static func checkEnvelope(_ bytes: [UInt8], limits: SegmentLimits = .default) throws(SegmentError) -> SegmentHeader {
        try checkEnvelope(bytes, limits: limits).header
    }

    private static func checkEnvelope(
        _ bytes: [UInt8], limits: SegmentLimits
    ) throws(SegmentError) -> (header: SegmentHeader, headerEnd: Int, bodyLength: UInt64) {
        guard bytes.count <= limits.maxSegmentBytes else {
            throw SegmentError(
                .limitExceeded, at: "byte 0", "the segment is \(bytes.count) bytes; maxSegmentBytes is \(limits.maxSegmentBytes)")
        }
        let (_, headerEnd) = try SegmentFormat.readPrefix(bytes)
        let smallest = headerEnd + SegmentFormat.minimumBodyByteCount + SegmentFormat.trailerByteCount
        guard bytes.count >= smallest else {
            throw SegmentError(
                .truncated, at: "byte \(bytes.count)",
                "a segment with this header is at least \(smallest) bytes; only \(bytes.count) are present")
        }
        let crcOffset = bytes.count - 4
        var trailer = ByteReader(bytes, from: bytes.count - SegmentFormat.trailerByteCount)
        let bodyLength = try trailer.readLittleEndian(UInt64.self, "uncompressed body length")
        let storedCRC = try trailer.readLittleEndian(UInt32.self, "segment CRC")
        let actualCRC = CRC32.checksum(bytes, 0..<crcOffset)
        guard storedCRC == actualCRC else {
            throw SegmentError(
                .checksumMismatch, at: "byte \(crcOffset)",
                "segment CRC-32 is \(SegmentFormat.hex(storedCRC)) but the bytes hash to \(SegmentFormat.hex(actualCRC)): the segment is corrupt, truncated or tampered with")
        }
        let (header, _) = try SegmentFormat.decodeHeader(bytes, limits: limits)
        guard fitsLimit(bodyLength, limits.maxUncompressedBodyBytes) else {
            throw SegmentError(
                .limitExceeded, at: "byte \(bytes.count - SegmentFormat.trailerByteCount)",
                "the body inflates to \(bodyLength) bytes; maxUncompressedBodyBytes is \(limits.maxUncompressedBodyBytes)")
        }
        guard bodyLength > 0 else {
            throw SegmentError(
                .malformed, at: "byte \(bytes.count - SegmentFormat.trailerByteCount)", "the trailer says the body is empty")
        }
        return (header, headerEnd, bodyLength)
    }

    /// The next transaction, in sequence order, or nil once every transaction has been read and the body
    /// has passed its final checks.
    ///
    /// After an error, every later call throws the same error.
    package mutating func next() throws(SegmentError) -> LogTransaction? {
        try body.next()
    }

    /// Inflated bytes the decoder holds right now (for tests of bounded memory).
    var bufferedByteCount: Int { body.bufferedByteCount }

    /// Reads just the header from the first bytes of a segment, checking the magic, the format version and
    /// the header's own checksum, but not the rest of the segment.
    ///
    /// ``maximumHeaderByteCount`` bytes always suffice; fewer do when the account and node id are short.
    /// Use it to look at segments cheaply (to list or route them); decode with ``init(bytes:limits:)``.
    ///
    /// - Throws: ``SegmentError/Code/truncated`` when `prefix` is too short to hold the header, and the
    ///   errors ``init(bytes:limits:)`` throws for a bad header.
    package static func readHeader(_ prefix: [UInt8], limits: SegmentLimits = .default) throws(SegmentError) -> SegmentHeader {
        try SegmentFormat.decodeHeader(prefix, limits: limits).0
    }

    /// Decodes a whole segment at once. Holds every transaction in memory: prefer ``next()`` for large
    /// segments.
    package static func decode(_ bytes: [UInt8], limits: SegmentLimits = .default) throws(SegmentError) -> (
        header: SegmentHeader, transactions: [LogTransaction]
    ) {
        var decoder = try SegmentDecoder(bytes: bytes, limits: limits)
        var transactions: [LogTransaction] = []
        while let transaction = try decoder.next() { transactions.append(transaction) }
        return (decoder.header, transactions)
    }
}
