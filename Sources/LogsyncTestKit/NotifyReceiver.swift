import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for systemd's notification socket: a datagram socket in a temp folder, passed to a
/// daemon as `NOTIFY_SOCKET`, recording every message with the time it arrived.
public final class NotifyReceiver: @unchecked Sendable {
    public let path: String
    private let descriptor: Int32
    private let lock = NSLock()
    private var received: [(at: ContinuousClock.Instant, message: String)] = []
    private var running = true

    public init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while lock.withLock({ running }) {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                lock.withLock { received.append((ContinuousClock.now, message)) }
            }
        }
        thread.start()
    }

    deinit {
        lock.withLock { running = false }
        close(descriptor)
        unlink(path)
    }

    /// Every message so far, oldest first.
    public var messages: [(at: ContinuousClock.Instant, message: String)] { lock.withLock { received } }

    /// Waits until a message contains `text`; returns it.
    @discardableResult
    public func await(_ text: String, after: Int = 0, timeout: Duration = .seconds(20)) async throws -> (index: Int, at: ContinuousClock.Instant, message: String) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let found = messages.enumerated().dropFirst(after).first { $0.element.message.contains(text) }
            if let found { return (found.offset, found.element.at, found.element.message) }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw SubprocessError.timedOut(waitingFor: "notification '\(text)'", stdout: messages.map(\.message).joined(separator: " | "), stderr: "")
    }
}
