import CCurl
import Foundation
import LogsyncTransport
import Synchronization

/// One libcurl easy handle, reused request after request so that its connection stays open
/// (keep-alive); the only type that holds a `CURL*`, for every HTTP client of the package (the relay
/// transport, the Syncthing client). Requests on one session run one at a time.
package final class CurlSession: @unchecked Sendable {
    // `handle`, `headerList` and `listedHeaders` are used only while `lock` is held.
    private let handle: UnsafeMutableRawPointer
    private let lock = NSLock()
    private let caFile: String?
    /// Whether ``cancelled`` is looked at.
    private let cancellable: Bool
    /// The header list of the last request, kept for the next one with the same headers (a node sends
    /// the same two or three request after request).
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var listedHeaders: [String] = []
    /// Set to abort the transfer in progress (checked by libcurl's progress callback, about once a
    /// second and on every read): how a long-poll ends promptly when its consumer goes away. Only in a
    /// session made `cancellable`; the others go without the callback.
    package let cancelled = Atomic<Bool>(false)

    package struct Response: Sendable {
        package var status: Int
        package var body: [UInt8]
    }

    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    package init(caFile: String? = nil, cancellable: Bool = false) {
        _ = Self.globalInit
        guard let handle = curl_easy_init() else { fatalError("curl_easy_init failed: libcurl is out of memory") }
        self.handle = handle
        self.caFile = caFile
        self.cancellable = cancellable
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
    }

    /// Where a `200` answer's body goes instead of memory: `consume` gets it in chunks of `chunkBytes`
    /// (the last one shorter), at most `maximumBytes` in all. Other answers (errors) are kept in memory.
    package struct Stream {
        package var chunkBytes: Int
        package var maximumBytes: Int
        package var consume: ([UInt8]) throws -> Void

        package init(chunkBytes: Int, maximumBytes: Int, consume: @escaping ([UInt8]) throws -> Void) {
            self.chunkBytes = chunkBytes
            self.maximumBytes = maximumBytes
            self.consume = consume
        }
    }

    /// Sends one request and returns the status and body. Throws ``TransportError/Code/io`` for network
    /// failures (refused, reset, timed out, TLS), with libcurl's own message. With `stallSeconds`, the
    /// request has no overall timeout but is cut when it moves less than 1 KiB a second for that long (for
    /// transfers whose size says nothing about how long they may take). With `stream`, a 200 answer's body
    /// goes to it and the returned body is empty; an error `stream.consume` throws ends the transfer and
    /// comes back as an ``TransportError/Code/io`` error with it as the cause.
    package func perform(
        method: String, url: String, headers: [String], body: [UInt8]? = nil, timeoutMilliseconds: Int, connectTimeoutMilliseconds: Int,
        maximumResponseBytes: Int, stallSeconds: Int? = nil, stream: Stream? = nil
    ) throws(TransportError) -> Response {
        lock.lock()
        defer { lock.unlock() }
        // curl_easy_reset keeps the open connections, the TLS session cache and the DNS cache.
        curl_easy_reset(handle)
        let sink = Sink(limit: maximumResponseBytes, session: self, handle: handle, stream: stream)
        if headers != listedHeaders || headerList == nil {
            curl_slist_free_all(headerList)
            headerList = nil
            // Without "Expect:" libcurl waits for a 100-continue before sending a large body.
            for header in headers + ["Expect:"] { headerList = curl_slist_append(headerList, header) }
            listedHeaders = headers
        }
        let unmanagedSink = Unmanaged.passRetained(sink)
        defer { unmanagedSink.release() }
        var codes: [CURLcode] = []
        codes.append(ccurl_setopt_string(handle, CURLOPT_URL, url))
        codes.append(ccurl_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)))
        codes.append(ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        if let stallSeconds {
            codes.append(ccurl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1_024))
            codes.append(ccurl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, stallSeconds))
        } else {
            codes.append(ccurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds))
        }
        codes.append(ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds))
        codes.append(ccurl_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1))
        codes.append(ccurl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        codes.append(ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        codes.append(ccurl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList))
        codes.append(ccurl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            guard let context else { return 0 }
            let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
            return sink.append(data, size * count) ? size * count : 0
        }))
        codes.append(ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, unmanagedSink.toOpaque()))
        if cancellable {
            codes.append(ccurl_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
            codes.append(ccurl_setopt_progress(handle, CURLOPT_XFERINFOFUNCTION, { context, _, _, _, _ in
                guard let context else { return 0 }
                return Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue().session.cancelled.load(ordering: .relaxed) ? 1 : 0
            }))
            codes.append(ccurl_setopt_pointer(handle, CURLOPT_XFERINFODATA, unmanagedSink.toOpaque()))
        }
        if let caFile { codes.append(ccurl_setopt_string(handle, CURLOPT_CAINFO, caFile)) }
        switch method {
        case "GET": codes.append(ccurl_setopt_long(handle, CURLOPT_HTTPGET, 1))
        default: codes.append(ccurl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            throw TransportError(.io, "libcurl refused an option: \(String(cString: curl_easy_strerror(failed)))")
        }
        let code: CURLcode = (body ?? []).withUnsafeBytes { bytes in
            if body != nil {
                _ = ccurl_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                // POSTFIELDS keeps the pointer: `bytes` stays valid until curl_easy_perform returns.
                _ = ccurl_setopt_pointer(handle, CURLOPT_POSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            }
            return curl_easy_perform(handle)
        }
        if code == CURLE_OK, let failure = sink.flush() { throw Self.consumerFailure(failure, method, url) }
        guard code == CURLE_OK else {
            if code == CURLE_WRITE_ERROR, let failure = sink.consumerError { throw Self.consumerFailure(failure, method, url) }
            if code == CURLE_WRITE_ERROR, sink.overflowed {
                let limit = sink.streaming == true ? stream?.maximumBytes ?? maximumResponseBytes : maximumResponseBytes
                throw TransportError(.tooLarge, "the answer to \(method) \(Self.redacted(url)) is over \(limit) bytes")
            }
            let detail = code == CURLE_ABORTED_BY_CALLBACK ? "cancelled" : String(cString: curl_easy_strerror(code))
            throw TransportError(.io, "\(method) \(Self.redacted(url)) failed: \(detail)")
        }
        var status = 0
        _ = ccurl_response_code(handle, &status)
        return Response(status: status, body: sink.bytes)
    }

    private static func consumerFailure(_ error: any Error, _ method: String, _ url: String) -> TransportError {
        TransportError(.io, "the answer to \(method) \(redacted(url)) was refused by its reader: \(error)")
    }

    /// A URL as logs and errors show it: without a query string.
    package static func redacted(_ url: String) -> String { String(url.split(separator: "?", maxSplits: 1).first ?? "") }

    /// Where libcurl writes an answer, bounded: in memory, or for a 200 answer with a stream, to the
    /// stream in chunks.
    private final class Sink {
        var bytes: [UInt8] = []
        var overflowed = false
        let limit: Int
        /// Alive while the request runs: `perform` is its method.
        unowned let session: CurlSession
        let handle: UnsafeMutableRawPointer
        let stream: Stream?
        /// Whether the body goes to the stream: decided at its first byte, by the answer's status.
        var streaming: Bool?
        var streamed = 0
        var consumerError: (any Error)?

        init(limit: Int, session: CurlSession, handle: UnsafeMutableRawPointer, stream: Stream?) {
            self.limit = limit
            self.session = session
            self.handle = handle
            self.stream = stream
        }

        func append(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Bool {
            if streaming == nil {
                var status = 0
                _ = ccurl_response_code(handle, &status)
                streaming = stream != nil && status == 200
            }
            if streaming == true, let stream {
                guard streamed + count <= stream.maximumBytes else {
                    overflowed = true
                    return false
                }
                streamed += count
                guard let data, count > 0 else { return true }
                // Chunks of exactly chunkBytes, whatever sizes libcurl writes in.
                var rest = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: count)[...]
                while !rest.isEmpty {
                    let taken = min(rest.count, stream.chunkBytes - bytes.count)
                    bytes.append(contentsOf: rest.prefix(taken))
                    rest = rest.dropFirst(taken)
                    if bytes.count == stream.chunkBytes, flush() != nil { return false }
                }
                return true
            }
            guard bytes.count + count <= limit else {
                overflowed = true
                return false
            }
            guard let data, count > 0 else { return true }
            data.withMemoryRebound(to: UInt8.self, capacity: count) { bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: count)) }
            return true
        }

        /// Hands what is gathered to the stream; returns the stream's error, if it threw one.
        func flush() -> (any Error)? {
            guard streaming == true, let stream, !bytes.isEmpty else { return nil }
            do {
                try stream.consume(bytes)
                bytes.removeAll(keepingCapacity: true)
                return nil
            } catch {
                consumerError = error
                return error
            }
        }
    }
}
