import Foundation
import HTTPTypes
import Hummingbird

/// A refusal or failure of the relay: a stable code clients can act on, the HTTP status it travels
/// with, a message that says what failed and what to do, and the error behind it (never sent to clients).
public struct RelayError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public let status: Int
        public var description: String { name }

        /// A malformed request: a bad id, a bad query parameter.
        public static let badRequest = Code(name: "bad_request", status: 400)
        /// The body is not a segment, or is a damaged one.
        public static let malformedSegment = Code(name: "malformed_segment", status: 400)
        /// The segment's header names another account, node or range than the route.
        public static let headerMismatch = Code(name: "header_mismatch", status: 400)
        /// No token, or one the relay does not know (wrong or revoked).
        public static let unauthorized = Code(name: "unauthorized", status: 401)
        /// A valid token for another account, or bound to another node.
        public static let forbidden = Code(name: "forbidden", status: 403)
        public static let notFound = Code(name: "not_found", status: 404)
        public static let methodNotAllowed = Code(name: "method_not_allowed", status: 405)
        /// The request body did not arrive within the request timeout.
        public static let timeout = Code(name: "request_timeout", status: 408)
        /// Same segment name, other bytes; or a range overlapping a stored one.
        public static let conflict = Code(name: "conflict", status: 409)
        /// The request needs a Content-Length (segments are sized up front).
        public static let lengthRequired = Code(name: "length_required", status: 411)
        /// The segment is larger than `max_segment_bytes`.
        public static let tooLarge = Code(name: "segment_too_large", status: 413)
        /// The baseline is larger than `max_baseline_bytes`.
        public static let baselineTooLarge = Code(name: "baseline_too_large", status: 413)
        /// The progress record is larger than a record can be (1 MiB).
        public static let progressTooLarge = Code(name: "progress_too_large", status: 413)
        /// The body is not an intact progress record.
        public static let malformedProgress = Code(name: "malformed_progress", status: 400)
        /// The account's storage quota would be exceeded.
        public static let quotaExceeded = Code(name: "quota_exceeded", status: 507)
        /// A limit on concurrent work was reached: retry after the `Retry-After` seconds.
        public static let busy = Code(name: "busy", status: 503)
        /// The relay's storage failed; nothing was stored.
        public static let storage = Code(name: "storage_error", status: 500)
        /// The relay is not ready (storage not open, shutting down).
        public static let unavailable = Code(name: "unavailable", status: 503)
        /// Accounts and tokens administration: the named thing does not exist or already does.
        public static let exists = Code(name: "exists", status: 409)
    }

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

/// The body of every error answer: `{"code": "...", "message": "..."}`.
public struct ErrorBody: Codable, Sendable {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}

extension RelayError: HTTPResponseError {
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: code.status) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        if let allow { headers[.allow] = allow }
        if code == .unauthorized { headers[.wwwAuthenticate] = "Bearer realm=\"sync-relay\"" }
        // A refused upload may still be arriving: close the connection rather than read it.
        if code.status == 413 || code == .lengthRequired || code == .timeout { headers[.connection] = "close" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = (try? encoder.encode(ErrorBody(code: code.name, message: message))) ?? Data()
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
