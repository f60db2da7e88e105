import Foundation
import LogsyncPlatform

/// Serves `GET /metrics` (Prometheus's text format) on a loopback address, `[metrics] listen`: one
/// request at a time, on a thread of its own, never on the sync loop. No neighbour can hold it: a client
/// gets 2 s to send its request line and headers (at most 8 KiB) and 2 s to take the answer, then the
/// connection is closed; anything but `GET /metrics` is answered 404 or 405.
final class MetricsServer: Sendable {
    /// The port it listens on (the kernel's choice when the configuration asked for port 0).
    let port: Int
    let address: LoopbackListener.Address
    private let socket: UnixSocket

    static let deadlineMilliseconds = 2_000
    static let maximumRequestBytes = 8 << 10

    /// Binds `address` (at start-up, so that a taken port is an error before syncd says it is ready).
    init(address: LoopbackListener.Address) throws(SystemError) {
        (socket, port) = try LoopbackListener.listen(at: address)
        self.address = LoopbackListener.Address(host: address.host, port: port)
    }

    /// Answers requests until ``stop()``; `body` makes the text of each answer.
    func start(body: @escaping @Sendable () -> String) {
        let thread = Thread { [self] in
            while let client = socket.accept() { answer(client, body: body) }
        }
        thread.name = "syncd.metrics"
        thread.start()
    }

    /// Stops accepting; the request in progress ends within its deadlines.
    func stop() { socket.shutdown() }

    private func answer(_ client: UnixSocket, body: () -> String) {
        client.setReceiveTimeout(milliseconds: Self.deadlineMilliseconds)
        client.setSendTimeout(milliseconds: Self.deadlineMilliseconds)
        let deadline = ContinuousClock.now + .milliseconds(Self.deadlineMilliseconds)
        var request: [UInt8] = []
        while !request.containsHeaderEnd, request.count < Self.maximumRequestBytes, ContinuousClock.now < deadline {
            guard let chunk = try? client.read(maximum: Self.maximumRequestBytes - request.count), !chunk.isEmpty else { break }
            request += chunk
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let (status, type, text): (String, String, String)
        if line.count < 3 || !line[2].hasPrefix("HTTP/1.") {
            (status, type, text) = ("400 Bad Request", "text/plain", "expected GET /metrics HTTP/1.1\n")
        } else if line[0] != "GET" && line[0] != "HEAD" {
            (status, type, text) = ("405 Method Not Allowed", "text/plain", "only GET /metrics is served\n")
        } else if line[1] != "/metrics" && !line[1].hasPrefix("/metrics?") {
            (status, type, text) = ("404 Not Found", "text/plain", "only /metrics is served\n")
        } else {
            (status, type, text) = ("200 OK", MetricsText.contentType, body())
        }
        let payload = Array(text.utf8)
        var answer = Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n".utf8)
        if line.first != "HEAD" { answer += payload }
        try? client.write(answer)
    }
}

extension [UInt8] {
    /// Whether an HTTP request's headers have ended (an empty line).
    fileprivate var containsHeaderEnd: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4) where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return true
        }
        return false
    }
}
