import Foundation

/// HTTP/1.1 written by hand over a TCP socket to 127.0.0.1: for requests no HTTP library would send
/// (paths with `..` or NUL, lying Content-Length, bodies that never finish) and for holding connections
/// idle. Every read and write has a deadline.
public final class RawConnection {
    public let descriptor: Int32

    public init(port: Int, timeout: Duration = .seconds(10)) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RawHTTPError("socket: errno \(errno)") }
        var time = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // Not closed here: an initializer that throws once every property is set runs `deinit`, which
        // closes it. Closing it twice closed, under load, another thread's socket that had just been given
        // the same number (the relay chaos run read other requests' answers that way).
        guard result == 0 else { throw RawHTTPError("connect to 127.0.0.1:\(port): errno \(errno)") }
    }

    deinit { close(descriptor) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw RawHTTPError("send: errno \(errno)") }
            offset += written
        }
    }

    /// Reads one response (status, headers, body by Content-Length).
    public func response() throws -> RawResponse {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func fill() throws -> Bool {
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count == 0 { return false }
            guard count > 0 else { throw RawHTTPError("recv: errno \(errno) (timed out or reset)") }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            guard try fill() else { throw RawHTTPError("connection closed before a response") }
            if buffer.count >= 4 {
                headerEnd = (0...(buffer.count - 4)).first { Array(buffer[$0..<($0 + 4)]) == separator }
            }
        }
        let head = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        let bodyStart = headerEnd! + 4
        while buffer.count < bodyStart + length {
            guard try fill() else { break }
        }
        return RawResponse(status: status, headers: headers, body: Array(buffer[bodyStart..<min(buffer.count, bodyStart + length)]))
    }
}

public struct RawResponse: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The `code` of a JSON error answer.
    public var errorCode: String? {
        (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["code"] as? String
    }
}

public struct RawHTTPError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// One request on a fresh connection to 127.0.0.1:`port`, answered before it returns. The blocking
/// socket calls run on a thread of their own, never on the cooperative pool that other tests share.
public func rawRequest(
    port: Int, method: String, path: String, token: String? = nil, headers: [String: String] = [:], body: [UInt8]? = nil
) async throws -> RawResponse {
    try await onThread { try rawRequestBlocking(port: port, method: method, path: path, token: token, headers: headers, body: body) }
}

/// Runs blocking work (sockets, waits) on a new thread and returns its result.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// ``rawRequest(port:method:path:token:headers:body:)`` on the calling thread.
public func rawRequestBlocking(
    port: Int, method: String, path: String, token: String? = nil, headers: [String: String] = [:], body: [UInt8]? = nil
) throws -> RawResponse {
    let connection = try RawConnection(port: port)
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if let token { head += "Authorization: Bearer \(token)\r\n" }
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    if let body, headers["Content-Length"] == nil { head += "Content-Length: \(body.count)\r\n" }
    head += "\r\n"
    try connection.send(Array(head.utf8) + (body ?? []))
    return try connection.response()
}
