import CZlib

// The one place that crosses into zlib. Everything here is internal: the segment codec is the API.
//
// zlib keeps a pointer back to its `z_stream` and refuses a stream that has moved, so each stream lives in
// its own allocation, owned by one class instance whose deinit releases it. Input and output buffers are
// handed to zlib only for the duration of one call (zlib copies what it needs to keep into its window).

/// CRC-32 (ISO-HDLC, the one used by zlib, gzip and PNG) of some bytes.
enum CRC32 {
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        return UInt32(truncatingIfNeeded: crc32_z(0, base.assumingMemoryBound(to: Bytef.self), bytes.count))
    }

    static func checksum(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The CRC-32 of the bytes behind `crc` followed by `bytes`: a checksum computed as a stream passes.
    static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        return UInt32(truncatingIfNeeded: crc32_z(UInt(crc), base.assumingMemoryBound(to: Bytef.self), bytes.count))
    }
}

/// A zlib (RFC 1950) compressor that accumulates its output in memory.
final class Deflater {
    /// The zlib compression level: zlib's default, a good balance of speed and size for row data.
    static let level: Int32 = Z_DEFAULT_COMPRESSION

    private let stream: UnsafeMutablePointer<z_stream>
    private let chunk: UnsafeMutableRawBufferPointer
    private var ended = false

    /// The compressed bytes produced so far.
    private(set) var output: [UInt8] = []
    /// Bytes written since the last flush: their compressed form may still be inside zlib.
    private(set) var unflushedInputCount = 0

    init() throws(SegmentError) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        chunk = .allocate(byteCount: 64 * 1024, alignment: 16)
        let status = czlib_deflate_init(stream, Self.level)
        guard status == Z_OK else {
            ended = true
            throw SegmentError(.compression, at: "encoder", "zlib deflateInit failed: \(Self.describe(status, stream))")
        }
    }

    deinit {
        if !ended { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        chunk.deallocate()
    }

    /// Compresses `bytes` without forcing any output.
    func write(_ bytes: [UInt8]) throws(SegmentError) {
        try run(bytes, flush: Z_NO_FLUSH)
        unflushedInputCount += bytes.count
    }

    /// Emits everything written so far (a sync flush), so ``output`` holds all of it.
    func flush() throws(SegmentError) {
        try run([], flush: Z_SYNC_FLUSH)
        unflushedInputCount = 0
    }

    /// Hands over the compressed bytes produced so far and forgets them: a stream written out as it grows.
    func takeOutput() -> [UInt8] {
        defer { output.removeAll(keepingCapacity: true) }
        return output
    }

    /// Discards everything written and starts a new stream.
    func reset() throws(SegmentError) {
        precondition(!ended, "deflater used after finish")
        let status = deflateReset(stream)
        guard status == Z_OK else {
            throw SegmentError(.compression, at: "encoder", "zlib deflateReset failed: \(Self.describe(status, stream))")
        }
        output.removeAll()
        unflushedInputCount = 0
    }

    /// Ends the stream and returns the complete compressed bytes. The deflater is unusable afterwards.
    func finish() throws(SegmentError) -> [UInt8] {
        try run([], flush: Z_FINISH)
        deflateEnd(stream)
        ended = true
        unflushedInputCount = 0
        return output
    }

    /// An upper bound on the compressed size the stream will have once `extra` more bytes are written and
    /// the stream is finished: what is out already, plus zlib's worst case for everything not yet flushed.
    func finishedSizeBound(adding extra: Int) -> Int {
        let pending = unflushedInputCount + extra
        let bound = deflateBound(stream, UInt(clamping: pending))
        // deflateBound covers a whole stream from scratch: with the flush markers and the end of the
        // stream, 64 bytes of slack is more than generous.
        return output.count + Int(clamping: bound) + 64
    }

    private func run(_ input: [UInt8], flush: Int32) throws(SegmentError) {
        precondition(!ended, "deflater used after finish")
        var failure: Int32?
        var reachedEnd = false
        input.withUnsafeBytes { inputBytes in
            var offset = 0
            // zlib's documented loop: call deflate until it leaves output room unused (all input taken,
            // the flush complete) or, when finishing, until it reports the end of the stream.
            repeat {
                let available = min(inputBytes.count - offset, Int(UInt32.max))
                stream.pointee.next_in = available == 0
                    ? nil
                    : UnsafeMutablePointer(mutating: inputBytes.baseAddress!.assumingMemoryBound(to: Bytef.self) + offset)
                stream.pointee.avail_in = UInt32(available)
                stream.pointee.next_out = chunk.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = UInt32(chunk.count)
                let status = deflate(stream, flush)
                let consumed = available - Int(stream.pointee.avail_in)
                let produced = chunk.count - Int(stream.pointee.avail_out)
                stream.pointee.next_in = nil
                stream.pointee.next_out = nil
                offset += consumed
                output.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<produced]))
                if status == Z_STREAM_END {
                    reachedEnd = true
                    return
                }
                // Z_BUF_ERROR only says that no progress was possible; anything else is a real failure.
                guard status == Z_OK || status == Z_BUF_ERROR, consumed > 0 || produced > 0 || offset == inputBytes.count
                else {
                    failure = status
                    return
                }
            } while stream.pointee.avail_out == 0 || offset < inputBytes.count
        }
        if let failure {
            throw SegmentError(.compression, at: "encoder", "zlib deflate failed: \(Self.describe(failure, stream))")
        }
        if flush == Z_FINISH && !reachedEnd {
            throw SegmentError(.compression, at: "encoder", "zlib deflate did not end the stream")
        }
    }

    static func describe(_ status: Int32, _ stream: UnsafeMutablePointer<z_stream>) -> String {
        if let message = stream.pointee.msg { return "\(String(cString: message)) (status \(status))" }
        return "status \(status)"
    }
}

/// A zlib (RFC 1950) decompressor that is fed from, and writes into, caller-owned buffers.
final class Inflater {
    enum Status: Equatable {
        /// More output may follow.
        case progress
        /// The end of the compressed stream was reached.
        case streamEnd
        /// The input ran out before the end of the stream.
        case needsInput
        /// The compressed data is corrupt (zlib's message).
        case corrupt(String)
    }

    private let stream: UnsafeMutablePointer<z_stream>
    private var ended = false

    init() throws(SegmentError) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = czlib_inflate_init(stream)
        guard status == Z_OK else {
            ended = true
            throw SegmentError(.compression, at: "decoder", "zlib inflateInit failed: \(Deflater.describe(status, stream))")
        }
    }

    deinit {
        if !ended { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Inflates from `input` into `output`, returning how many bytes were consumed and produced.
    func inflate(from input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> (
        consumed: Int, produced: Int, status: Status
    ) {
        guard !ended else { return (0, 0, .streamEnd) }
        let inputCount = min(input.count, Int(UInt32.max))
        let outputCount = min(output.count, Int(UInt32.max))
        stream.pointee.next_in = inputCount == 0
            ? nil : UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(inputCount)
        stream.pointee.next_out = outputCount == 0 ? nil : output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = UInt32(outputCount)
        let code = CZlib.inflate(stream, Z_NO_FLUSH)
        let consumed = inputCount - Int(stream.pointee.avail_in)
        let produced = outputCount - Int(stream.pointee.avail_out)
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        switch code {
        case Z_OK:
            return (consumed, produced, .progress)
        case Z_STREAM_END:
            inflateEnd(stream)
            ended = true
            return (consumed, produced, .streamEnd)
        case Z_BUF_ERROR:
            return (consumed, produced, inputCount == consumed ? .needsInput : .progress)
        default:
            return (consumed, produced, .corrupt(Deflater.describe(code, stream)))
        }
    }
}

/// zlib for tests that look into what a carrier stores.
package enum ZlibProbe {
    /// What a zlib stream starting at `start` of `bytes` inflates to, up to `limit` bytes, stopping at
    /// the first error (nil when nothing inflates). For tests that search a carrier's storage for
    /// plaintext: a plain segment's values are only readable once inflated.
    package static func inflatedPrefix(_ bytes: [UInt8], from start: Int, limit: Int) -> [UInt8]? {
        guard let inflater = try? Inflater() else { return nil }
        var output = [UInt8](repeating: 0, count: limit)
        var consumed = start
        var produced = 0
        while produced < limit, consumed < bytes.count {
            let step = bytes[consumed...].withUnsafeBytes { input in
                output[produced...].withUnsafeMutableBytes { inflater.inflate(from: input, into: $0) }
            }
            consumed += step.consumed
            produced += step.produced
            if case .corrupt = step.status { break }
            if step.status == .streamEnd || (step.consumed == 0 && step.produced == 0) { break }
        }
        return produced == 0 ? nil : Array(output[0..<produced])
    }
}
