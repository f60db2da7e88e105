import Foundation
import LogsyncPlatform

/// Talks to a running `syncd` over its control socket. Every read and write has a deadline (`wait`).
public final class ControlClient {
    public enum Failure: Error, CustomStringConvertible {
        /// No daemon listens there (no socket file, or nobody accepting).
        case notRunning(path: String, SystemError)
        /// Something answers, but not a syncd speaking this protocol.
        case notOurSocket(path: String, detail: String)
        /// No answer in time.
        case timedOut(path: String)
        /// The daemon closed the connection (without answering, or at the end of a `watch`).
        case closed(path: String)

        public var description: String {
            switch self {
            case .notRunning(let path, let error):
                return "syncd is not running (no daemon at \(path): \(error)); start it with 'syncd' or 'systemctl start syncd'"
            case .notOurSocket(let path, let detail):
                return "\(path) is not a syncd control socket (\(detail))"
            case .timedOut(let path):
                return "syncd at \(path) did not answer in time"
            case .closed(let path):
                return "\(path) closed the connection without answering"
            }
        }
    }

    public let path: String
    private let socket: UnixSocket
    private var reader: LineReader
    private var nextID = 1

    public init(path: String) throws(Failure) {
        self.path = path
        do {
            socket = try UnixSocket.connect(to: path)
        } catch {
            throw .notRunning(path: path, error)
        }
        reader = LineReader(socket)
    }

    /// Sends a request and waits up to `wait` for its response.
    public func send(
        _ command: ControlRequest.Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil, account: String? = nil, logout: String? = nil,
        accountEvents: Bool? = nil, segment: String? = nil, refusalEvents: Bool? = nil, schemaEvents: Bool? = nil, device: String? = nil,
        wait: Duration = .seconds(10)
    ) throws(Failure) -> ControlResponse {
        let request = ControlRequest(
            id: nextID, command: command, timeoutMilliseconds: timeoutMilliseconds, limit: limit, account: account, logout: logout,
            accountEvents: accountEvents, segment: segment, refusalEvents: refusalEvents, schemaEvents: schemaEvents, device: device)
        nextID += 1
        guard let data = try? JSONEncoder().encode(request) else { throw .notOurSocket(path: path, detail: "cannot encode request") }
        let waitMilliseconds = Int((wait / .milliseconds(1)).rounded(.up))
        socket.setReceiveTimeout(milliseconds: waitMilliseconds)
        socket.setSendTimeout(milliseconds: waitMilliseconds)
        do {
            try socket.write(Array(data) + [10])
        } catch {
            // A daemon that refuses a connection (too many clients) says why and closes it at once: the
            // reason may be waiting to be read.
            guard let refusal = try? nextResponse(), !refusal.ok else {
                throw .notOurSocket(path: path, detail: "cannot write: \(error)")
            }
            return refusal
        }
        let response = try nextResponse()
        // A refusal before the request was read (too many clients) answers id 0.
        guard response.id == request.id || (response.id == 0 && !response.ok) else {
            throw .notOurSocket(path: path, detail: "it answered request \(request.id) as \(response.id)")
        }
        return response
    }

    /// The next line from the daemon, as a response (used by `watch` for events).
    public func nextResponse() throws(Failure) -> ControlResponse {
        let line: [UInt8]?
        do {
            line = try reader.next()
        } catch {
            if error.errno == EAGAIN || error.errno == EWOULDBLOCK { throw .timedOut(path: path) }
            throw .notOurSocket(path: path, detail: "\(error)")
        }
        guard let line else { throw .closed(path: path) }
        guard let response = try? JSONDecoder().decode(ControlResponse.self, from: Data(line)) else {
            throw .notOurSocket(path: path, detail: "its answer is not control protocol JSON")
        }
        guard response.version == ControlProtocol.version else {
            throw .notOurSocket(path: path, detail: "it speaks control protocol version \(response.version), this syncctl speaks \(ControlProtocol.version)")
        }
        return response
    }
}
