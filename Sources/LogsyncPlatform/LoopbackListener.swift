#if canImport(Glibc)
import Glibc
#endif

/// A TCP listening socket on a loopback address (`127.0.0.0/8` or `::1`): syncd's optional metrics
/// endpoint (`[metrics] listen`). Loopback only, by construction: what it serves names accounts and
/// nodes, and a scraper on another host reaches it through a proxy of the operator's choosing. The
/// connections it accepts are ``UnixSocket``s in all but address family: the same reads, writes,
/// deadlines and shutdown.
public enum LoopbackListener {
    /// A parsed `HOST:PORT` (`127.0.0.1:9469`, `[::1]:9469`); port 0 asks the kernel for a free one.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// What is wrong with an address given as text.
        public struct Problem: Error, Sendable, CustomStringConvertible {
            public let description: String
        }

        /// Parses `text`, or says what is wrong with it.
        public static func parse(_ text: String) -> Result<Address, Problem> {
            var host: Substring, port: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                    return .failure(Problem(description: "'\(text)' is not [IPV6]:PORT"))
                }
                host = text[text.index(after: text.startIndex)..<close]
                port = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":") else { return .failure(Problem(description: "'\(text)' is not HOST:PORT")) }
                host = text[..<colon]
                port = text[text.index(after: colon)...]
            }
            guard let number = Int(port), (0...65_535).contains(number), port.allSatisfy(\.isASCII) else {
                return .failure(Problem(description: "'\(port)' in '\(text)' is not a port (0-65535)"))
            }
            let address = Address(host: String(host), port: number)
            guard address.isLoopback else {
                return .failure(Problem(description: "'\(host)' is not a loopback address (127.0.0.0/8 or ::1): the listener serves this host only"))
            }
            return .success(address)
        }

        /// Whether the host is a numeric loopback address.
        public var isLoopback: Bool {
            if host == "::1" { return true }
            var ipv4 = in_addr()
            guard inet_pton(AF_INET, host, &ipv4) == 1 else { return false }
            return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127
        }
    }

    /// Binds and listens at `address`; the socket's ``UnixSocket/accept()`` returns connections.
    /// Returns the socket and the port it is bound to (the kernel's choice for port 0).
    public static func listen(at address: Address, backlog: Int32 = 16) throws(SystemError) -> (socket: UnixSocket, port: Int) {
        let ipv6 = address.host.contains(":")
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .last("socket") }
        let server = UnixSocket(adopting: fd)
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        func bind<SocketAddress>(_ socketAddress: SocketAddress) -> Int32 {
            withUnsafePointer(to: socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<SocketAddress>.size)) }
            }
        }
        let bound: Int32
        if ipv6 {
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = in_port_t(UInt16(address.port).bigEndian)
            inet_pton(AF_INET6, address.host, &socketAddress.sin6_addr)
            bound = bind(socketAddress)
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = in_port_t(UInt16(address.port).bigEndian)
            inet_pton(AF_INET, address.host, &socketAddress.sin_addr)
            bound = bind(socketAddress)
        }
        guard bound == 0 else { throw .last("bind", path: address.description) }
        guard Glibc.listen(fd, backlog) == 0 else { throw .last("listen", path: address.description) }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw .last("getsockname", path: address.description) }
        let port = withUnsafePointer(to: &storage) { pointer -> UInt16 in
            ipv6
                ? pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
                : pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        return (server, Int(port))
    }
}
