import Foundation
import LogsyncPlatform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for systemd's notification socket: a datagram socket in a temp folder, passed to a
/// daemon as `NOTIFY_SOCKET`, recording every message with the time it arrived.
public final class NotifyReceiver: Sendable {
    public let path: String
    private let descriptor: Int32
    private let state = Mutex<(received: [(at: ContinuousClock.Instant, message: String)], running: Bool)>(([], true))

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
        // The kernel stamps each datagram as it is queued: a receiver thread starved on a loaded machine
        // still records when each message was sent, not when it got round to reading it.
        var on: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_TIMESTAMPNS, &on, socklen_t(MemoryLayout<Int32>.size))
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            var control = [UInt8](repeating: 0, count: 256)
            while state.withLock({ $0.running }) {
                var queuedAt: timespec?
                let count = buffer.withUnsafeMutableBytes { data in
                    control.withUnsafeMutableBytes { controlBytes in
                        var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                        return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                            var header = msghdr()
                            header.msg_iov = vectorPointer
                            header.msg_iovlen = 1
                            header.msg_control = controlBytes.baseAddress
                            header.msg_controllen = controlBytes.count
                            let count = recvmsg(descriptor, &header, 0)
                            if count > 0 { queuedAt = Self.timestamp(in: UnsafeRawBufferPointer(rebasing: controlBytes[0..<header.msg_controllen])) }
                            return count
                        }
                    }
                }
                guard count > 0 else { continue }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                state.withLock { $0.received.append((Self.instant(of: queuedAt), message)) }
            }
        }
        thread.start()
    }

    deinit {
        state.withLock { $0.running = false }
        close(descriptor)
        unlink(path)
    }

    /// The `SCM_TIMESTAMPNS` control message's time, walking the `cmsghdr`s by hand (Swift has no
    /// `CMSG_*` macros): length (`size_t`), level, type, then the data, each header 8-byte aligned.
    private static func timestamp(in control: UnsafeRawBufferPointer) -> timespec? {
        let headerSize = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size
        var offset = 0
        while offset + headerSize <= control.count {
            let length = control.loadUnaligned(fromByteOffset: offset, as: Int.self)
            let level = control.loadUnaligned(fromByteOffset: offset + MemoryLayout<Int>.size, as: Int32.self)
            let type = control.loadUnaligned(fromByteOffset: offset + MemoryLayout<Int>.size + 4, as: Int32.self)
            guard length >= headerSize, offset + length <= control.count else { return nil }
            if level == SOL_SOCKET, type == SO_TIMESTAMPNS, length >= headerSize + MemoryLayout<timespec>.size {
                return control.loadUnaligned(fromByteOffset: offset + headerSize, as: timespec.self)
            }
            offset += (length + 7) & ~7
        }
        return nil
    }

    /// Turns a kernel wall-clock stamp into a `ContinuousClock` instant: now, less how long ago it was.
    private static func instant(of stamp: timespec?) -> ContinuousClock.Instant {
        let now = ContinuousClock.now
        guard let stamp else { return now }
        let stamped = Int64(stamp.tv_sec) * 1_000_000_000 + Int64(stamp.tv_nsec)
        let ago = Duration.nanoseconds(Int64(WallClock.nanoseconds()) - stamped)
        return ago > .zero && ago < .seconds(60) ? now - ago : now
    }

    /// Every message so far, oldest first.
    public var messages: [(at: ContinuousClock.Instant, message: String)] { state.withLock { $0.received } }

    /// Waits until a message contains `text`; returns it.
    @discardableResult
    public func await(_ text: String, after: Int = 0, timeout: Duration = .seconds(20)) async throws -> (index: Int, at: ContinuousClock.Instant, message: String) {
        let found = try await poll(timeout: timeout, every: .milliseconds(10)) {
            messages.enumerated().dropFirst(after).first { $0.element.message.contains(text) }
        }
        if let found { return (found.offset, found.element.at, found.element.message) }
        throw SubprocessError.timedOut(waitingFor: "notification '\(text)'", stdout: messages.map(\.message).joined(separator: " | "), stderr: "")
    }
}
