import Foundation
import Synchronization

/// An HTTP/1.1 server on 127.0.0.1 (an ephemeral port) that answers each request with what its `answer`
/// says and remembers each request's head; it stands in for Syncthing's REST API. One connection at a
/// time, closed after its answer; request bodies are not read (the calls it stands in for send none).
public final class StubHTTPServer: Sendable {
    public struct Request: Sendable {
        public var method: String
        /// The request target: path and query.
        public var path: String
        /// Header values by lowercased name.
        public var headers: [String: String]
    }

    public let port: Int
    private let listening: Int32
    private let stopped = Atomic<Bool>(false)
    /// What the serving thread shares with the server (not the server itself, so that it can go away).
    private let shared = Shared()

    private final class Shared: Sendable {
        let requests = Mutex<[Request]>([])
        let ended = DispatchSemaphore(value: 0)
    }

    /// A TCP socket listening on 127.0.0.1 at an ephemeral port, and the port.
    public static func listen() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && Glibc.listen(descriptor, 16) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard descriptor >= 0, bound else {
            let error = errno
            if descriptor >= 0 { close(descriptor) }
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    public init(answer: @escaping @Sendable (Request) -> (status: Int, body: String)) throws {
        let (descriptor, port) = try Self.listen()
        listening = descriptor
        self.port = port
        let shared = self.shared
        Thread.detachNewThread {
            defer { shared.ended.signal() }
            while true {
                let connection = accept(descriptor, nil, nil)
                if connection < 0 {
                    if errno == EINTR { continue }
                    return  // shut down by stop()
                }
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var head: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !head.ends(with: Array("\r\n\r\n".utf8)), head.count < 64 << 10 {
                    let count = read(connection, &buffer, buffer.count)
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    head += buffer[0..<count]
                }
                if let request = Self.parse(head) {
                    shared.requests.withLock { $0.append(request) }
                    let (status, body) = answer(request)
                    let text = "HTTP/1.1 \(status) Stub\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                    let bytes = Array(text.utf8)
                    var offset = 0
                    while offset < bytes.count {
                        let written = bytes[offset...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        if written < 0, errno == EINTR { continue }
                        guard written > 0 else { break }
                        offset += written
                    }
                }
                close(connection)
            }
        }
    }

    /// Every request received so far, in order.
    public var received: [Request] { shared.requests.withLock { $0 } }

    /// Stops accepting, waits for the connection in progress to end (its reads time out after 5 s), and
    /// closes the socket. Later calls do nothing.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listening, Int32(SHUT_RDWR))
        shared.ended.wait()
        close(listening)
    }

    deinit { stop() }

    static func parse(_ head: [UInt8]) -> Request? {
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let first = lines.first?.split(separator: " ") ?? []
        guard first.count == 3 else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Request(method: String(first[0]), path: String(first[1]), headers: headers)
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
