/// The bounds a segment must stay within, enforced by both ``SegmentEncoder`` and ``SegmentDecoder``.
///
/// They keep the memory a reader needs bounded whatever a segment claims, and keep hostile segments from
/// exhausting it. A writer and its readers should use the same limits; the defaults suit every node.
///
/// Some limits are per segment (``maxSegmentBytes``, ``maxUncompressedBodyBytes``, ``maxTransactions``,
/// ``maxNames``): when a transaction would cross one, the encoder reports ``SegmentError/Code/segmentFull``
/// and the caller starts a new segment. The others are per transaction (``maxChangesPerTransaction``,
/// ``maxValuesPerChange``, ``maxStringBytes``): a transaction over one of those can never be shipped under
/// these limits, and the encoder reports ``SegmentError/Code/limitExceeded``.
public struct SegmentLimits: Sendable, Hashable {
    /// The largest complete segment, in bytes (header, compressed body and trailer). Default 64 MiB.
    public var maxSegmentBytes: Int
    /// The largest uncompressed body, in bytes: bounds decompression whatever the compressed size.
    /// Default 256 MiB.
    public var maxUncompressedBodyBytes: Int
    /// The most transactions in one segment. Default 1,000,000 (the format allows at most 2³² − 1).
    public var maxTransactions: Int
    /// The most changes in one transaction. Default 1,000,000.
    public var maxChangesPerTransaction: Int
    /// The most column values in one change. Default 64 (a schema allows at most 63 non-key columns).
    public var maxValuesPerChange: Int
    /// The longest text or blob value, and the longest entity name, column name, author or context name,
    /// in bytes (UTF-8 for text). Default 16 MiB.
    public var maxStringBytes: Int
    /// The most distinct names (entities, columns, authors, context names) in one segment's name table.
    /// Default 65,536.
    public var maxNames: Int

    public init(
        maxSegmentBytes: Int = 64 << 20,
        maxUncompressedBodyBytes: Int = 256 << 20,
        maxTransactions: Int = 1_000_000,
        maxChangesPerTransaction: Int = 1_000_000,
        maxValuesPerChange: Int = 64,
        maxStringBytes: Int = 16 << 20,
        maxNames: Int = 65_536
    ) {
        self.maxSegmentBytes = maxSegmentBytes
        self.maxUncompressedBodyBytes = maxUncompressedBodyBytes
        self.maxTransactions = maxTransactions
        self.maxChangesPerTransaction = maxChangesPerTransaction
        self.maxValuesPerChange = maxValuesPerChange
        self.maxStringBytes = maxStringBytes
        self.maxNames = maxNames
    }

    /// The limits every node uses unless configured otherwise.
    public static let `default` = SegmentLimits()

    /// ``maxTransactions`` as the format can record it.
    var effectiveMaxTransactions: Int { min(maxTransactions, Int(UInt32.max)) }
}
