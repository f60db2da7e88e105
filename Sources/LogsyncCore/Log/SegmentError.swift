/// A segment that cannot be encoded or decoded, with what is wrong and where.
///
/// Decoding never traps on bad input: every problem with a segment's bytes, hostile or accidental, is one of
/// these errors. A reader that gets one must not apply anything it decoded from that segment.
public struct SegmentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem, for callers that react differently to each.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// The bytes end before the segment does: a partial copy, or a header prefix that is too short.
        public static let truncated = Code(name: "truncated")
        /// The bytes do not start with the segment magic: not a logsync segment at all.
        public static let badMagic = Code(name: "badMagic")
        /// The segment is written in a newer format than this build reads. Keep the file: a newer build
        /// will read it.
        public static let unsupportedFormat = Code(name: "unsupportedFormat")
        /// A checksum does not match: the segment was corrupted or tampered with.
        public static let checksumMismatch = Code(name: "checksumMismatch")
        /// A size or count is over a ``SegmentLimits`` limit (the message names it). From the encoder, the
        /// transaction can never fit in a segment under these limits, not even an empty one.
        public static let limitExceeded = Code(name: "limitExceeded")
        /// From the encoder only: the transaction would take the segment over a limit (the message names
        /// it). Nothing was added; finish this segment and append the transaction to a new one.
        public static let segmentFull = Code(name: "segmentFull")
        /// The bytes pass the checksum but do not follow the format: a broken or hostile writer.
        public static let malformed = Code(name: "malformed")
        /// zlib failed, or the compressed body is not a valid zlib stream.
        public static let compression = Code(name: "compression")
        /// Transaction sequence numbers are not consecutive.
        public static let sequenceGap = Code(name: "sequenceGap")
        /// ``SegmentEncoder/finish()`` was called before any transaction was appended.
        public static let empty = Code(name: "empty")
        /// An encoder argument is unusable, such as an empty node id.
        public static let invalidArgument = Code(name: "invalidArgument")
    }

    /// What kind of problem it is.
    public var code: Code
    /// Where: `header`, `byte 10`, `body byte 4711 (transaction 3, sequence 45, change 7)`, `encoder`.
    ///
    /// Byte offsets count from the start of the segment; body byte offsets count within the uncompressed
    /// body.
    public var location: String
    /// What is wrong, with the numbers involved and, for limits, the limit's name.
    public var message: String

    public init(_ code: Code, at location: String, _ message: String) {
        self.code = code
        self.location = location
        self.message = message
    }

    public var description: String { "segment error (\(code)) at \(location): \(message)" }
}
