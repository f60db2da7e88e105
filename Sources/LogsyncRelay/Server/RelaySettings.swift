/// What a relay serves and the limits it holds. Every field has a key in `config/sync-relay.toml`.
public struct RelaySettings: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (tests); the chosen one is printed on stdout.
    public var port = 8443
    public var databasePath = "relay.sqlite"
    /// PEM certificate chain and private key: with both, the relay serves HTTPS; SIGHUP reloads them.
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// A push larger than this is refused with 413.
    public var maximumSegmentBytes = 16 << 20
    /// A baseline larger than this is refused with 413 (its upload is streamed to storage, not held in memory).
    public var maximumBaselineBytes = 512 << 20
    /// An account whose own quota is not set may hold this many bytes of segments, baselines and progress
    /// records; past it, 507.
    public var defaultQuotaBytes: Int64 = 1 << 30
    /// A request body must arrive within this many seconds (408 otherwise).
    public var requestTimeoutSeconds = 30
    /// A connection with nothing to read or write for this long is closed.
    public var idleTimeoutSeconds = 75
    /// Connections served at once; further ones are answered 503 with Retry-After and closed.
    public var maximumConnections = 4_096
    /// Long-polls waiting at once; past it, 503 with Retry-After.
    public var maximumWaitingPolls = 4_096
    /// The longest a long-poll waits (a larger `wait` is shortened to it).
    public var maximumWaitSeconds = 30
    /// At most this many segments, and past the first at most this many bytes, per pull.
    public var maximumPullSegments = 1_000
    public var maximumPullBytes = 8 << 20
    /// Request bodies held in memory at once, in bytes; a push that would go past it gets 503.
    public var maximumBufferedBytes = 256 << 20
    /// Pushes waiting for the disk at once; past it, 503.
    public var maximumQueuedPushes = 4_096
    public var logLevel = "info"

    public init() {}

    public var servesTLS: Bool { tlsCertificatePath != nil && tlsKeyPath != nil }
}
