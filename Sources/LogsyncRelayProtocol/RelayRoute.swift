/// The relay's routes (docs/relay-protocol.md, docs/relay-openapi.yaml): the one list the relay registers
/// from and the client builds its requests from. `RelayProtocolDocumentTests` checks it against the
/// OpenAPI document both ways: a route declared here and not there, or there and not here, fails.
public enum RelayRoute: String, CaseIterable, Sendable {
    // The raw values are the routes' operationId in docs/relay-openapi.yaml.
    case health
    case ready
    case metrics
    case pull
    case nodes
    case push
    case fetch
    case deleteSegment
    case putProgress
    case progress
    case baselines
    case putBaseline
    case getBaseline
    case deleteBaseline

    /// The operationId in docs/relay-openapi.yaml.
    public var operation: String { rawValue }

    public var method: RelayMethod {
        switch self {
        case .health, .ready, .metrics, .pull, .nodes, .fetch, .progress, .baselines, .getBaseline: .get
        case .push, .putProgress, .putBaseline: .put
        case .deleteSegment, .deleteBaseline: .delete
        }
    }

    public var path: RelayPath {
        switch self {
        case .health: .health
        case .ready: .ready
        case .metrics: .metrics
        case .pull: .segments
        case .nodes: .nodes
        case .push, .fetch, .deleteSegment: .segment
        case .putProgress: .nodeProgress
        case .progress: .progress
        case .baselines: .baselines
        case .putBaseline, .getBaseline, .deleteBaseline: .baseline
        }
    }

    /// The JSON body of a successful answer, or nil when it is bytes (a segment, a baseline), text
    /// (`/metrics`) or nothing (204).
    public var answer: (any RelayAnswer.Type)? {
        switch self {
        case .health: HealthAnswer.self
        case .ready: StatusAnswer.self
        case .pull: PullAnswer.self
        case .nodes: NodesAnswer.self
        case .push: PushAnswer.self
        case .progress: ProgressAnswer.self
        case .baselines: BaselinesAnswer.self
        case .putBaseline: BaselineStored.self
        case .metrics, .fetch, .deleteSegment, .putProgress, .getBaseline, .deleteBaseline: nil
        }
    }

    /// The statuses a success is answered with (``RelayStatus``); every refusal is an ``ErrorAnswer``
    /// with the status of its ``RelayErrorCode``.
    public var successes: [Int] {
        switch self {
        case .push, .putBaseline: [RelayStatus.unchanged, RelayStatus.stored]
        case .deleteSegment, .putProgress, .deleteBaseline: [RelayStatus.done]
        case .health, .ready, .metrics, .pull, .nodes, .fetch, .progress, .baselines, .getBaseline: [RelayStatus.ok]
        }
    }

    /// Whether the route needs `Authorization: Bearer <token>` (``RelayHeader``).
    public var needsToken: Bool { path.parameters.contains("account") }

    /// `METHOD /path/{template}`.
    public var description: String { "\(method.rawValue) \(path.template)" }
}

public enum RelayMethod: String, CaseIterable, Sendable {
    case get = "GET"
    case put = "PUT"
    case delete = "DELETE"
}

/// The relay's paths as OpenAPI templates, `{parameter}` standing for one path component (Hummingbird's
/// router takes the same form). A path may answer several methods: ``RelayRoute`` pairs them.
public enum RelayPath: String, CaseIterable, Sendable {
    case health = "/v1/health"
    case ready = "/v1/ready"
    case metrics = "/metrics"
    case segments = "/v1/accounts/{account}/segments"
    case nodes = "/v1/accounts/{account}/nodes"
    case segment = "/v1/accounts/{account}/nodes/{node}/segments/{range}"
    case nodeProgress = "/v1/accounts/{account}/nodes/{node}/progress"
    case progress = "/v1/accounts/{account}/progress"
    case baselines = "/v1/accounts/{account}/baselines"
    case baseline = "/v1/accounts/{account}/nodes/{node}/baselines/{name}"

    public var template: String { rawValue }

    /// The names of the template's parameters, in order.
    public var parameters: [String] {
        template.split(separator: "/").compactMap { component in
            component.hasPrefix("{") && component.hasSuffix("}") ? String(component.dropFirst().dropLast()) : nil
        }
    }

    /// The methods this path answers; any other is answered 405 with these in `Allow`.
    public var methods: [RelayMethod] { RelayRoute.allCases.filter { $0.path == self }.map(\.method) }

    /// The template with its parameters replaced by `values`, in order. The ids are sent as they are:
    /// the relay's names need no escaping (docs/relay-protocol.md, "Conventions").
    public func filled(_ values: String...) -> String {
        precondition(values.count == parameters.count, "\(template) takes \(parameters.count) parameters, not \(values.count)")
        var next = values.makeIterator()
        return "/"
            + template.split(separator: "/").map { component in
                component.hasPrefix("{") ? next.next()! : String(component)
            }.joined(separator: "/")
    }
}

/// Concrete request paths, each built from its ``RelayPath`` template.
public enum RelayRequestPath {
    /// A segment: `PUT` pushes it, `GET` fetches it, `DELETE` deletes it.
    public static func segment(account: String, node: String, first: UInt64, last: UInt64) -> String {
        RelayPath.segment.filled(account, node, "\(first)-\(last)")
    }

    /// A pull: the segments after the arrival `after`, waiting up to `wait` (whole seconds on the wire)
    /// for one, at most `limit` (the relay's own limit when nil).
    public static func pull(account: String, after: UInt64, wait: Duration? = nil, limit: Int? = nil) -> String {
        var path = RelayPath.segments.filled(account) + "?\(RelayQuery.after)=\(after)"
        if let wait { path += "&\(RelayQuery.wait)=\(max(0, wait.components.seconds))" }
        if let limit { path += "&\(RelayQuery.limit)=\(limit)" }
        return path
    }

    public static func nodes(account: String) -> String { RelayPath.nodes.filled(account) }

    /// A node's progress record (`PUT`).
    public static func progress(account: String, node: String) -> String { RelayPath.nodeProgress.filled(account, node) }

    /// Every node's progress record (`GET`).
    public static func progress(account: String) -> String { RelayPath.progress.filled(account) }

    public static func baselines(account: String) -> String { RelayPath.baselines.filled(account) }

    /// A baseline, by its file name `COUNT-DIGEST.lsbase`.
    public static func baseline(account: String, node: String, name: String) -> String {
        RelayPath.baseline.filled(account, node, name)
    }
}

/// The query parameters of a pull (`GET /v1/accounts/{account}/segments`).
public enum RelayQuery {
    /// The cursor: segments that arrived after this arrival number (default 0).
    public static let after = "after"
    /// At most this many segments (default and upper bound: the relay's `max_pull_segments`).
    public static let limit = "limit"
    /// Seconds to wait for an arrival when there is none (shortened to the relay's `max_wait_s`).
    public static let wait = "wait"
    /// What each takes.
    public static let afterRange: ClosedRange<UInt64> = 0...UInt64(Int64.max)
    public static let limitRange: ClosedRange<UInt64> = 1...1_000_000
    public static let waitRange: ClosedRange<UInt64> = 0...3_600
}

/// The statuses of successes. Refusals carry the status of their ``RelayErrorCode``.
public enum RelayStatus {
    /// An answer with a body.
    public static let ok = 200
    /// An upload (segment, baseline) the relay held already with the same bytes: nothing changed.
    public static let unchanged = 200
    /// An upload stored durably now.
    public static let stored = 201
    /// Done, no body: a progress record stored, a deletion (whether the file was there or not).
    public static let done = 204

    /// Any 2xx: what a client that does not need the body takes for done.
    public static func isSuccess(_ status: Int) -> Bool { (200..<300).contains(status) }
}

/// The headers the protocol uses.
public enum RelayHeader {
    /// `Authorization: Bearer <token>` on every route under `/v1/accounts`.
    public static let authorization = "Authorization"
    public static let bearerPrefix = "Bearer "
    /// The challenge of a 401.
    public static let wwwAuthenticate = "WWW-Authenticate"
    public static let bearerChallenge = "Bearer realm=\"sync-relay\""
    public static let contentType = "Content-Type"
    /// Segments, progress records and baselines, both ways.
    public static let octetStream = "application/octet-stream"
    /// Every other answer, errors included.
    public static let json = "application/json"
    /// `/metrics`: Prometheus text format 0.0.4.
    public static let metricsText = "text/plain; version=0.0.4"
    /// Seconds to wait before trying again, with a 503.
    public static let retryAfter = "Retry-After"
    /// The methods a path answers, with a 405.
    public static let allow = "Allow"

    /// The request header line carrying `token` (libcurl's form).
    public static func authorizationLine(token: String) -> String { "\(authorization): \(bearerPrefix)\(token)" }
}
