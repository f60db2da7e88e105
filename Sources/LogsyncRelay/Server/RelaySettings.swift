/// What a relay serves and the limits it holds. Every field has a key in `config/sync-relay.toml`.
public struct RelaySettings: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (tests); the chosen one is printed on stdout.
    public var port = 8443
    public var databasePath = "relay.sqlite"
    /// Where the relay keeps everything: its embedded SQLite file (`databasePath`), or a PostgreSQL
    /// database shared by any number of relays (`postgres`).
    public var backend = RelayBackend.sqlite
    public var postgres = PostgresConnectionSettings()
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

public enum RelayBackend: String, Sendable, CaseIterable {
    case sqlite
    case postgres
}

/// How a relay reaches its PostgreSQL database (`[postgres]` in `sync-relay.toml`). The password is never
/// written here: it is read from `passwordFile` or from the systemd credential `passwordCredential`.
public struct PostgresConnectionSettings: Sendable, Equatable {
    /// A host name or address for TCP; nil with `socketDirectory` set: the Unix socket there.
    public var host: String? = "127.0.0.1"
    public var port = 5432
    /// The folder of the server's Unix socket (`/var/run/postgresql`): preferred over `host` when set.
    public var socketDirectory: String?
    public var user = "sync_relay"
    public var database = "sync_relay"
    /// A file holding the password (its first line), readable by the relay only.
    public var passwordFile: String?
    /// The name of a systemd credential holding the password (`LoadCredential=NAME:PATH`), read from
    /// `$CREDENTIALS_DIRECTORY/NAME`.
    public var passwordCredential: String?
    /// Connections this relay opens at most for requests (its LISTEN session is one more).
    public var maximumConnections = 16
    /// A request that cannot get an answer from the database within this is answered 503 with Retry-After.
    public var operationTimeoutSeconds = 10
    /// Push transactions one relay runs at once, each carrying every push queued meanwhile.
    public var pushWriters = 2
    /// How often every waiting long-poll's account is checked against the database, whatever
    /// notifications said (a lost notification delays a wake-up by at most this much).
    public var recheckMilliseconds = 2_000

    public init() {}
}
