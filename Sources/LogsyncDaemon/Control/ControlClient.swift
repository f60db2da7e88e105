import Foundation
import LogsyncPlatform

/// Talks to a running `syncd` over its control socket.
public final class ControlClient {
    public enum Failure: Error, CustomStringConvertible {
        /// No daemon listens there (no socket file, or nobody accepting).
        case notRunning(path: String, SystemError)
        /// Something answers, but not a syncd speaking this protocol.
        case notOurSocket(path: String, detail: String)
        /// No answer in time.
        case timedOut(path: String)

        public var description: String {
            switch self {
            case .notRunning(let path, let error):
                return "syncd is not running (no daemon at \(path): \(error)); start it with 'syncd' or 'systemctl start syncd'"
            case .notOurSocket(let path, let detail):
                return "\(path) is not a syncd control socket (\(detail))"
            case .timedOut(let path):
                return "syncd at \(path) did not answer in time"
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

    /// Sends a request and waits up to `timeout` for its response.
    public func send(_ command: ControlRequest.Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil, wait: TimeInterval = 10) throws(Failure) -> ControlResponse {
        let request = ControlRequest(id: nextID, command: command, timeoutMilliseconds: timeoutMilliseconds, limit: limit)
        nextID += 1
        guard let data = try? JSONEncoder().encode(request) else { throw .notOurSocket(path: path, detail: "cannot encode request") }
        socket.setReceiveTimeout(milliseconds: Int(wait * 1000))
        do {
            try socket.write(Array(data) + [10])
        } catch {
            throw .notOurSocket(path: path, detail: "cannot write: \(error)")
        }
        return try nextResponse()
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
        guard let line else { throw .notOurSocket(path: path, detail: "it closed the connection without answering") }
        guard let response = try? JSONDecoder().decode(ControlResponse.self, from: Data(line)) else {
            throw .notOurSocket(path: path, detail: "its answer is not control protocol JSON")
        }
        guard response.version == ControlProtocol.version else {
            throw .notOurSocket(path: path, detail: "it speaks control protocol version \(response.version), this syncctl speaks \(ControlProtocol.version)")
        }
        return response
    }
}
