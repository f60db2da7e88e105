/// A refusal's stable code, which clients act on, and the HTTP status it travels with
/// (docs/relay-openapi.yaml, `Error`). The body is an ``ErrorAnswer``.
public struct RelayErrorCode: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let status: Int
    public var description: String { name }

    public init(name: String, status: Int) {
        self.name = name
        self.status = status
    }

    /// A malformed request: a bad id, a bad query parameter.
    public static let badRequest = RelayErrorCode(name: "bad_request", status: 400)
    /// The body is not a segment, or is a damaged one.
    public static let malformedSegment = RelayErrorCode(name: "malformed_segment", status: 400)
    /// The segment's header names another account, node or range than the route.
    public static let headerMismatch = RelayErrorCode(name: "header_mismatch", status: 400)
    /// No token, or one the relay does not know (wrong or revoked).
    public static let unauthorized = RelayErrorCode(name: "unauthorized", status: 401)
    /// A valid token for another account, or bound to another node.
    public static let forbidden = RelayErrorCode(name: "forbidden", status: 403)
    public static let notFound = RelayErrorCode(name: "not_found", status: 404)
    public static let methodNotAllowed = RelayErrorCode(name: "method_not_allowed", status: 405)
    /// The request body did not arrive within the request timeout.
    public static let timeout = RelayErrorCode(name: "request_timeout", status: 408)
    /// Same segment name, other bytes; or a range overlapping a stored one.
    public static let conflict = RelayErrorCode(name: "conflict", status: 409)
    /// The request needs a Content-Length (segments are sized up front).
    public static let lengthRequired = RelayErrorCode(name: "length_required", status: 411)
    /// The segment is larger than `max_segment_bytes`.
    public static let tooLarge = RelayErrorCode(name: "segment_too_large", status: 413)
    /// The baseline is larger than `max_baseline_bytes`.
    public static let baselineTooLarge = RelayErrorCode(name: "baseline_too_large", status: 413)
    /// The progress record is larger than a record can be (1 MiB).
    public static let progressTooLarge = RelayErrorCode(name: "progress_too_large", status: 413)
    /// The body is not an intact progress record.
    public static let malformedProgress = RelayErrorCode(name: "malformed_progress", status: 400)
    /// The account's storage quota would be exceeded.
    public static let quotaExceeded = RelayErrorCode(name: "quota_exceeded", status: 507)
    /// A limit on concurrent work was reached: retry after the `Retry-After` seconds.
    public static let busy = RelayErrorCode(name: "busy", status: 503)
    /// The relay's storage failed; nothing was stored.
    public static let storage = RelayErrorCode(name: "storage_error", status: 500)
    /// The relay is not ready (storage not open, shutting down).
    public static let unavailable = RelayErrorCode(name: "unavailable", status: 503)
    /// Accounts and tokens administration: the named thing does not exist or already does.
    public static let exists = RelayErrorCode(name: "exists", status: 409)

    /// Every code, as the document's `Error.code` enum lists them.
    public static let all: [RelayErrorCode] = [
        .badRequest, .malformedSegment, .headerMismatch, .unauthorized, .forbidden, .notFound, .methodNotAllowed, .timeout, .conflict,
        .lengthRequired, .tooLarge, .baselineTooLarge, .progressTooLarge, .malformedProgress, .quotaExceeded, .busy, .storage, .unavailable,
        .exists,
    ]
}
