#if canImport(Glibc)
import Glibc
#endif

/// A Unix domain stream socket: the control channel between `syncd` and `syncctl`. With
/// ``LoopbackListener``, the only place logsync calls socket(2), bind(2), accept(2) and connect(2); the
/// connections that listener accepts are of this type too (reads, writes and deadlines do not depend on
/// the address family).
public final class UnixSocket: Sendable {
    public let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    /// Takes ownership of a socket made elsewhere in this module (``LoopbackListener``).
    init(adopting descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Longest path `sockaddr_un` holds (107 bytes on Linux).
    public static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Binds and listens at `path` with owner-only permissions. A socket file left by a process that is
    /// gone is replaced; one that a live process answers on is `EADDRINUSE`.
    public static func listen(at path: String, backlog: Int32 = 16) throws(SystemError) -> UnixSocket {
        let server = try stream(for: path, call: "bind")
        let fd = server.descriptor
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if bound != 0 {
            guard errno == EADDRINUSE else { throw .last("bind", path: path) }
            // In use, or a stale file from a process that died: only a live listener keeps it.
            if (try? connect(to: path)) != nil { throw SystemError(call: "bind", path: path, errno: EADDRINUSE) }
            unlink(path)
            let retried = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard retried == 0 else { throw .last("bind", path: path) }
        }
        chmod(path, 0o600)
        guard Glibc.listen(fd, backlog) == 0 else { throw .last("listen", path: path) }
        return server
    }

    public static func connect(to path: String) throws(SystemError) -> UnixSocket {
        let client = try stream(for: path, call: "connect")
        let fd = client.descriptor
        var address = Self.address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw .last("connect", path: path) }
        return client
    }

    /// A new stream socket for `path`, which must fit in `sockaddr_un`.
    private static func stream(for path: String, call: String) throws(SystemError) -> UnixSocket {
        guard path.utf8.count <= maximumPathLength else { throw SystemError(call: call, path: path, errno: ENAMETOOLONG) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .last("socket") }
        return UnixSocket(descriptor: fd)
    }

    /// Blocks until a client connects; nil when the socket was shut down.
    public func accept() -> UnixSocket? {
        while true {
            let fd = Glibc.accept(descriptor, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                return UnixSocket(descriptor: fd)
            }
            if errno == EINTR { continue }
            return nil
        }
    }

    /// Stops `accept` and reads in other threads.
    public func shutdown() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Writes all of `bytes`, waiting at most the send timeout (``setSendTimeout(milliseconds:)``) for
    /// room each time the peer's buffer is full: `EAGAIN` then. `waiting: false` never waits: what does
    /// not fit at once fails with `EAGAIN` (a last word to a peer that stopped reading).
    public func write(_ bytes: [UInt8], waiting: Bool = true) throws(SystemError) {
        var offset = 0
        let flags = Int32(MSG_NOSIGNAL) | (waiting ? 0 : Int32(MSG_DONTWAIT))
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + offset, $0.count - offset, flags) }
            if sent < 0 {
                if errno == EINTR { continue }
                throw .last("send")
            }
            offset += sent
        }
    }

    /// Whether the peer has closed its end (or the connection failed), without waiting; anything it sent
    /// meanwhile is read and discarded.
    public func peerHasClosed() -> Bool {
        // POLLRDHUP: not exported by Swift's Glibc module (it needs _GNU_SOURCE); Linux's value.
        let readHangUp: Int16 = 0x2000
        var descriptor = pollfd(fd: self.descriptor, events: Int16(POLLIN) | readHangUp, revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return false }
        if descriptor.revents & (Int16(POLLHUP) | readHangUp | Int16(POLLERR)) != 0 { return true }
        var scratch = [UInt8](repeating: 0, count: 4096)
        let count = scratch.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR)
    }

    /// Reads whatever is available (blocking until something is); empty at end of stream.
    public func read(maximum: Int = 65_536) throws(SystemError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count >= 0 { return Array(buffer[0..<count]) }
            if errno == EINTR { continue }
            throw .last("recv")
        }
    }

    /// Sets a receive timeout, so a reader never waits forever on a peer that does not answer: a read
    /// then fails with `EAGAIN`.
    public func setReceiveTimeout(milliseconds: Int) {
        var value = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sets a send timeout, so a writer never waits forever on a peer that does not read: a write then
    /// fails with `EAGAIN`.
    public func setSendTimeout(milliseconds: Int) {
        var value = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(maximumPathLength))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}

/// Reads newline-delimited messages from a socket.
public struct LineReader {
    private let socket: UnixSocket
    private var buffer: [UInt8] = []
    private let maximumLine: Int
    /// Set when ``next()`` gave up on a line longer than the maximum.
    public private(set) var overflowed = false

    public init(_ socket: UnixSocket, maximumLine: Int = 1 << 20) {
        self.socket = socket
        self.maximumLine = maximumLine
    }

    /// The next line without its newline; nil at end of stream or on an oversized line (``overflowed``).
    public mutating func next() throws(SystemError) -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            guard buffer.count <= maximumLine else {
                overflowed = true
                return nil
            }
            let chunk = try socket.read()
            if chunk.isEmpty { return nil }
            buffer += chunk
        }
    }
}

/// An exclusive advisory lock on a file (flock), held for the life of the process: one `syncd` per store.
public final class FileLock: Sendable {
    private let descriptor: Int32
    public let path: String

    /// Takes the lock without waiting; nil when another process holds it.
    public static func acquire(_ path: String) throws(SystemError) -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .last("open", path: path) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            close(fd)
            if error == EWOULDBLOCK { return nil }
            throw SystemError(call: "flock", path: path, errno: error)
        }
        // Record who holds it, for the message the next one prints.
        ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        return FileLock(descriptor: fd, path: path)
    }

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// The process id recorded by the holder, if readable.
    public static func holder(of path: String) -> Int32? {
        guard case .bytes(let bytes)? = try? Directory.readFile(atPath: path, maximumBytes: 64, followingLinks: false) else { return nil }
        return Int32(String(decoding: bytes.filter { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }, as: UTF8.self))
    }
}
