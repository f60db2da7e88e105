import LogsyncCore
import LogsyncPlatform

/// A baseline's rows, decoded a chunk ahead on another thread while the loader merges the chunk before:
/// inflating and parsing is about a quarter of a load's work, and runs on the second core instead of
/// adding to the time the write lock is held (as imports decode the next segment, `Prefetch`).
///
/// The decoder is used by one chunk's work at a time, and not at all once ``finish()`` returned. A
/// decoding error reaches the loader with the chunk that holds it, so the rows before it in that chunk
/// are not merged: the batch fails, and its transaction rolls back, either way.
final class BaselineRowsAhead {
    /// Rows per chunk by default: two chunks (the one merged, the one decoded) are in memory at a time.
    /// Each chunk is one hand-over to the decoding thread and one wait for it: with 1,024 rows a load of
    /// 1M rows took 28 % longer on average on a 2-core VM (8 ABBA pairs, docs/BENCHMARKS-history.md); 32,768 was
    /// no faster than 8,192 and held 30 MB more.
    static let chunkRows = 8_192
    /// A chunk also ends once its rows took this many bytes in the baseline, by default: rows may hold
    /// large values. (A Note row takes about 90.)
    static let chunkBytes: UInt64 = 8 << 20

    private let chunkRows: Int
    private let chunkBytes: UInt64

    /// A row as ``next()`` hands it out: decoded, or prepared as a first insert (an index in
    /// ``inserts``).
    enum Item {
        case row(BaselineRow)
        case prepared(Int)
    }

    /// Hands the decoder to one chunk's work at a time: never two at once, and not after ``finish()``.
    private final class Source: @unchecked Sendable {
        let decoder: BaselineDecoder
        let preparer: BaselineInsertPreparer?
        /// Renamed attributes: the baseline's names become the store's current ones as rows are decoded.
        let names: LogNames
        init(_ decoder: BaselineDecoder, preparer: BaselineInsertPreparer?, names: LogNames) {
            self.decoder = decoder
            self.preparer = preparer
            self.names = names
        }

        /// Up to `count` rows, fewer once they took `bytes`, the baseline's row bytes up to the end of
        /// each, and whether they are the last. Rows the preparer takes are handed out prepared.
        func chunk(_ count: Int, bytes: UInt64) -> Result<Chunk, any Error> {
            Result {
                var chunk = Chunk()
                chunk.items.reserveCapacity(min(count, BaselineRowsAhead.chunkRows))
                chunk.ends.reserveCapacity(min(count, BaselineRowsAhead.chunkRows))
                if let preparer { chunk.inserts = preparer.start() }
                var scratch: [UInt8] = []
                let end = decoder.rowBytes + bytes
                while chunk.items.count < count, decoder.rowBytes < end {
                    guard let decoded = try decoder.next() else {
                        chunk.last = true
                        return chunk
                    }
                    let row = names.current(decoded)
                    if let preparer, preparer.prepare(row, into: &chunk.inserts, scratch: &scratch) {
                        chunk.items.append(.prepared(chunk.inserts.inserts.count - 1))
                    } else {
                        chunk.items.append(.row(row))
                    }
                    chunk.ends.append(decoder.rowBytes)
                }
                return chunk
            }
        }
    }

    private struct Chunk {
        var items: [Item] = []
        /// Per row, ``BaselineDecoder/rowBytes`` once it was decoded.
        var ends: [UInt64] = []
        var inserts = BaselineInserts()
        var last = false
    }

    private let source: Source
    private var ahead: Prefetch<Result<Chunk, any Error>>?
    private var current = Chunk()
    private var index = 0
    private var ended = false
    /// The baseline's row bytes up to the end of the last row ``next()`` returned.
    private(set) var bytesHandedOut: UInt64 = 0
    /// The prepared rows of the chunk the last row ``next()`` returned is in.
    var inserts: BaselineInserts { current.inserts }
    /// Counts the chunks ``next()`` has taken rows from: a new number, new ``inserts``.
    private(set) var chunkNumber = 0

    /// `preparer`: prepares the rows it can as first inserts (``BaselineInserts``); without one, every
    /// row is handed out decoded.
    init(_ decoder: BaselineDecoder, chunkRows: Int, chunkBytes: UInt64, preparer: BaselineInsertPreparer? = nil, names: LogNames) {
        source = Source(decoder, preparer: preparer, names: names)
        self.chunkRows = chunkRows
        self.chunkBytes = chunkBytes
        ahead = start()
    }

    private func start() -> Prefetch<Result<Chunk, any Error>> {
        let (source, count, bytes) = (source, chunkRows, chunkBytes)
        return Prefetch { source.chunk(count, bytes: bytes) }
    }

    /// The next row, or nil after the last.
    func next() throws -> Item? {
        if index == current.items.count {
            guard !ended, let pending = ahead else { return nil }
            ahead = nil
            // A failed chunk ends the rows, as the last one does. Any other holds at least one row.
            ended = true
            current = try pending.value().get()
            chunkNumber += 1
            index = 0
            if !current.last {
                ended = false
                ahead = start()
            }
            if current.items.isEmpty { return nil }
        }
        defer { index += 1 }
        bytesHandedOut = current.ends[index]
        return current.items[index]
    }

    /// Waits for the chunk being decoded, if any: afterwards nothing uses the decoder.
    func finish() {
        _ = ahead?.value()
        ahead = nil
    }
}
