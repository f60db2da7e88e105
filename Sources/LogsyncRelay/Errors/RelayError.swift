import Foundation
import HTTPTypes
import Hummingbird
import LogsyncRelayProtocol

/// A refusal or failure of the relay: a stable code clients can act on, the HTTP status it travels
/// with, a message that says what failed and what to do, and the error behind it (never sent to clients).
public struct RelayError: Error, Sendable, CustomStringConvertible {
    /// The codes and their statuses are the protocol's (``RelayErrorCode``, in LogsyncRelayProtocol).
    public typealias Code = RelayErrorCode

    public var code: Code
    public var message: String
    /// Seconds a client should wait before trying again (sent as `Retry-After`).
    public var retryAfter: Int?
    /// The methods a route answers (sent as `Allow` with a 405).
    public var allow: String?
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, retryAfter: Int? = nil, allow: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.allow = allow
        self.cause = cause
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let cause { text += " (\(cause))" }
        return text
    }
}

extension RelayError: HTTPResponseError {
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: code.status) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = RelayHeader.json
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        if let allow { headers[.allow] = allow }
        if code == .unauthorized { headers[.wwwAuthenticate] = RelayHeader.bearerChallenge }
        // A refused upload may still be arriving: close the connection rather than read it.
        if code.status == 413 || code == .lengthRequired || code == .timeout { headers[.connection] = "close" }
        let body = ErrorAnswer(code: code.name, message: message).encoded()
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
