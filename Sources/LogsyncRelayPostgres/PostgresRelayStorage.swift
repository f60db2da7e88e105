import Crypto
import Foundation
import Logging
import LogsyncCore
import LogsyncPlatform
import LogsyncRelay
import LogsyncRelayProtocol
import NIOCore
import PostgresNIO
import Synchronization

/// The relay's storage in a PostgreSQL database that any number of relays share (docs/relay-protocol.md,
/// "Several relays on one database"): the same tables and answers as ``SQLiteRelayStorage``, through a
/// bounded pool of connections. Pushes are group-committed per relay (``PushBatches``) and take their
/// account's arrival numbers under its row lock, so that arrival order is commit order on every relay;
/// other relays hear of them through LISTEN/NOTIFY hints backed by a periodic re-check
/// (``ArrivalHints``, ``deliverArrivals(to:)``).
public final class PostgresRelayStorage: MailboxStorage, StorageGauges, ArrivalSource, Sendable {
    public let identity: RelayIdentity
    /// Why this start changed the epoch, or nil.
    public let epochChange: String?
    let settings: PostgresConnectionSettings
    let client: PostgresClient
    let connection: PostgresConnection.Configuration
    let logger: Logger
    private let background: Task<Void, Never>
    private let batches: PushBatches?
    let hints = ArrivalHints()
    let wakes = WakeStatistics()
    /// Requests holding a pooled connection now, and the most at once.
    private let leased = Mutex<(now: Int, peak: Int, waits: Int)>((0, 0, 0))
    /// Tokens found valid, by the SHA-256 of their text: forgotten at every revocation or account
    /// deletion any relay or command makes (notification `c`), at every (re)LISTEN and every re-check.
    let knownTokens = Mutex<[[UInt8]: Credential]>([:])
    static let knownTokensLimit = 4_096
    /// Uploads of baselines older than this are abandoned: cleared at a relay's start.
    static let abandonedUploadMilliseconds: Int64 = 24 * 3_600_000

    private init(
        identity: RelayIdentity, epochChange: String?, settings: PostgresConnectionSettings, client: PostgresClient,
        connection: PostgresConnection.Configuration, logger: Logger, background: Task<Void, Never>, batches: PushBatches?
    ) {
        self.identity = identity
        self.epochChange = epochChange
        self.settings = settings
        self.client = client
        self.connection = connection
        self.logger = logger
        self.background = background
        self.batches = batches
        _ = hints
    }

    /// Connects, applies missing schema migrations and reads (or makes) the relay's identity. `serving`
    /// starts the push writers and the notification sender a server needs, and checks whether the
    /// database was replaced or restored since relays last served it; the administration commands open
    /// it without. Waits up to `startTimeout` for a database that is not up yet.
    public static func open(
        settings: PostgresConnectionSettings, serving: Bool, maximumQueuedPushes: Int = 4_096, logger: Logger,
        startTimeout: Duration = .seconds(30), environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(RelayError) -> PostgresRelayStorage {
        let password = try PostgresPassword.read(settings, environment: environment)
        let (clientConfiguration, connection) = configurations(settings, password: password)
        let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)
        let running = Task { await client.run() }
        let deadline = ContinuousClock.now + startTimeout
        var attempt = 0
        while true {
            attempt += 1
            do {
                // A connection of its own, not the pool's: the pool retries a failed connection for ever,
                // and a wrong password or a missing database must say so at once.
                let (identity, change) = try await PostgresFailures.withDeadline(seconds: max(5, settings.operationTimeoutSeconds)) {
                    let connection = try await PostgresConnection.connect(configuration: connection, id: 1, logger: logger)
                    defer { Task { try? await connection.close() } }
                    return try await PostgresSchema.migrate(connection, logger: logger) { connection in
                            let found = try await PostgresIdentity.check(connection, serving: serving, logger: logger)
                            if serving {
                                try await connection.query(
                                    "DELETE FROM baseline_chunks WHERE blob IN (SELECT id FROM baseline_uploads WHERE started_ms < \(now() - abandonedUploadMilliseconds))",
                                    logger: logger)
                                try await connection.query("DELETE FROM baseline_uploads WHERE started_ms < \(now() - abandonedUploadMilliseconds)", logger: logger)
                            }
                        return found
                    }
                }
                var batches: PushBatches?
                if serving {
                    batches = PushBatches(maximumQueued: maximumQueuedPushes) { batch in
                        try await PostgresFailures.withDeadline(seconds: settings.operationTimeoutSeconds) {
                            try await PushBatches.store(batch, client: client, logger: logger)
                        }
                    }
                }
                let storage = PostgresRelayStorage(
                    identity: identity, epochChange: change, settings: settings, client: client, connection: connection, logger: logger,
                    background: running, batches: batches)
                storage.startBackground()
                return storage
            } catch {
                let failure = PostgresFailures.relayError(error, "opening the relay's database")
                guard failure.code == .unavailable, failure.retryAfter != nil, ContinuousClock.now < deadline else {
                    running.cancel()
                    throw RelayError(
                        .unavailable,
                        "cannot open the relay's PostgreSQL database \(settings.database) as \(settings.user) at \(settings.address): \(failure.message)",
                        cause: failure)
                }
                if attempt == 1 { logger.warning("waiting for the relay's PostgreSQL database at \(settings.address): \(failure.message)") }
                try? await Task.sleep(for: .milliseconds(min(1_000, 100 * attempt)))
            }
        }
    }

    private let tasks = Mutex<[Task<Void, Never>]>([])

    private func startBackground() {
        guard let batches else { return }
        let writers = settings.pushWriters
        let (hints, client, logger) = (self.hints, self.client, self.logger)
        tasks.withLock {
            $0.append(Task { await batches.run(writers: writers) })
            $0.append(Task { await hints.run(client: client, logger: logger) })
        }
    }

    /// Stops taking pushes, answers those queued, and closes the connections.
    public func close() async {
        batches?.stop()
        let tasks = self.tasks.withLock { $0 }
        // The writers end once what was queued is answered; the sender gets a moment for the last hints.
        if let writers = tasks.first { await writers.value }
        try? await Task.sleep(for: .milliseconds(20))
        for task in tasks { task.cancel() }
        background.cancel()
    }

    static func configurations(
        _ settings: PostgresConnectionSettings, password: String?
    ) -> (PostgresClient.Configuration, PostgresConnection.Configuration) {
        var client: PostgresClient.Configuration
        var connection: PostgresConnection.Configuration
        if let directory = settings.socketDirectory {
            let path = "\(directory)/.s.PGSQL.\(settings.port)"
            client = .init(unixSocketPath: path, username: settings.user, password: password, database: settings.database)
            connection = .init(unixSocketPath: path, username: settings.user, password: password, database: settings.database)
        } else {
            let host = settings.host ?? "127.0.0.1"
            client = .init(host: host, port: settings.port, username: settings.user, password: password, database: settings.database, tls: .disable)
            connection = .init(host: host, port: settings.port, username: settings.user, password: password, database: settings.database, tls: .disable)
        }
        client.options.maximumConnections = max(1, settings.maximumConnections)
        client.options.minimumConnections = min(2, max(1, settings.maximumConnections) - 1)
        client.options.connectTimeout = .seconds(Int64(max(1, min(settings.operationTimeoutSeconds, 5))))
        client.options.keepAliveBehavior = .init(frequency: .seconds(10))
        client.options.additionalStartupParameters = [("application_name", "sync-relay")]
        connection.options.additionalStartupParameters = [("application_name", "sync-relay listen")]
        return (client, connection)
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: The pool

    /// Runs `body` on a pooled connection within ``PostgresConnectionSettings/operationTimeoutSeconds``.
    func using<T: Sendable>(
        _ what: String, timeout: Int? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(RelayError) -> T {
        do {
            return try await PostgresFailures.withDeadline(seconds: timeout ?? settings.operationTimeoutSeconds) { [self] in
                try await client.withConnection { connection in
                    leased.withLock { state in
                        state.now += 1
                        state.peak = max(state.peak, state.now)
                    }
                    defer { leased.withLock { $0.now -= 1 } }
                    return try await body(connection)
                }
            }
        } catch {
            throw PostgresFailures.relayError(error, what)
        }
    }

    /// Runs `body` in a transaction on a pooled connection.
    func transaction<T: Sendable>(
        _ what: String, timeout: Int? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(RelayError) -> T {
        let logger = self.logger
        return try await using(what, timeout: timeout) { connection in try await connection.inTransaction(logger: logger, body) }
    }

    /// Every row of `query`, decoded. Only for reads: a write on its own would be answered before its
    /// commit (see ``PushBatches/store(_:client:logger:)``); writes go through ``transaction(_:timeout:_:)``.
    func rows<each Column: PostgresDecodable & Sendable>(
        _ what: String, _ query: PostgresQuery, as types: (repeat each Column).Type
    ) async throws(RelayError) -> [(repeat each Column)] {
        let logger = self.logger
        return try await using(what) { connection in
            var rows: [(repeat each Column)] = []
            for try await row in try await connection.query(query, logger: logger).decode((repeat each Column).self) { rows.append(row) }
            return rows
        }
    }

    // MARK: Mailboxes

    public func push(_ push: SegmentPush) async throws(RelayError) -> PushOutcome {
        guard let batches else { throw RelayError(.unavailable, "this relay storage was opened for administration only") }
        let outcome = try await batches.submit(push)
        if case .stored(let arrival) = outcome { hints.arrived(account: push.account, arrival: arrival) }
        return outcome
    }

    public func pull(account: String, after cursor: UInt64, limit: Int, maximumBytes: Int) async throws(RelayError) -> PullPage {
        // Which rows fit (sizes only, never the bytes of a row left out), then those rows' bytes.
        let after = Int64(bitPattern: cursor)
        let rows = try await rows(
            "pulling segments",
            """
            SELECT s.arrival, s.node, s.first, s.last, s.bytes, t.total FROM (
                SELECT arrival, row_number() OVER w AS n, sum(size) OVER w AS running, count(*) OVER () AS total
                  FROM (SELECT arrival, size FROM segments WHERE account = \(account) AND arrival > \(after) ORDER BY arrival LIMIT \(limit + 1)) AS c
                WINDOW w AS (ORDER BY arrival)
            ) AS t JOIN segments s ON s.account = \(account) AND s.arrival = t.arrival
            WHERE t.n <= \(limit) AND (t.n = 1 OR t.running <= \(Int64(maximumBytes)))
            ORDER BY s.arrival
            """, as: (Int64, String, Int64, Int64, ByteBuffer, Int64).self)
        let segments = rows.map { row in
            StoredSegment(
                arrival: UInt64(row.0), node: NodeID(row.1), firstSequence: UInt64(bitPattern: row.2), lastSequence: UInt64(bitPattern: row.3),
                bytes: Array(buffer: row.4))
        }
        let total = rows.first?.5 ?? 0
        return PullPage(segments: segments, cursor: segments.last?.arrival ?? cursor, more: total > Int64(segments.count))
    }

    public func segment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) async throws(RelayError) -> [UInt8]? {
        let (first, last) = (Int64(bitPattern: firstSequence), Int64(bitPattern: lastSequence))
        return try await rows(
            "reading a segment",
            "SELECT bytes FROM segments WHERE account = \(account) AND node = \(node.rawValue) AND first = \(first) AND last = \(last)",
            as: ByteBuffer.self
        ).first.map { Array(buffer: $0) }
    }

    public func latestArrival(account: String) async throws(RelayError) -> UInt64 {
        let cursor: Int64? = try await rows("reading an account's latest arrival", "SELECT cursor FROM accounts WHERE name = \(account)", as: Int64.self).first
        return UInt64(cursor ?? 0)
    }

    public func nodes(account: String) async throws(RelayError) -> [NodeSummary] {
        try await rows(
            "listing an account's nodes",
            "SELECT node, count(*), max(last), sum(size)::bigint FROM segments WHERE account = \(account) GROUP BY node ORDER BY node",
            as: (String, Int64, Int64, Int64).self
        ).map { NodeSummary(node: $0.0, segments: Int($0.1), lastSequence: UInt64(bitPattern: $0.2), bytes: $0.3) }
    }

    public func isReady() async -> Bool {
        guard batches == nil || !(tasks.withLock { $0.isEmpty }) else { return false }
        let answer: [Int32]? = try? await rows("checking readiness", "SELECT 1", as: Int32.self)
        return answer == [1]
    }

    // MARK: Wake-ups across relays

    public func deliverArrivals(to sink: any ArrivalSink) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen(sink) }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(max(50, self.settings.recheckMilliseconds)))
                    await self.recheck(sink)
                }
            }
        }
    }

    /// Keeps one LISTEN session open (its own connection, not the pool's), reconnecting after any loss;
    /// each time it is listening again, every waiting account is re-checked.
    private func listen(_ sink: any ArrivalSink) async {
        guard FaultPoints.fault != "no-listen" else { return }
        var failures = 0
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration: self.connection, id: 0, logger: logger)
                do {
                    try await connection.listen(on: ArrivalChannel.name) { notifications in
                        wakes.listening(true)
                        if failures > 0 { logger.notice("listening for the other relays' arrivals again") }
                        failures = 0
                        // Whatever was sent while not listening: read from the database.
                        sink.noteDeletion()
                        await recheck(sink)
                        for try await notification in notifications { heard(notification.payload, sink) }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                wakes.listening(false)
                failures += 1
                if !Task.isCancelled, failures == 1 || failures % 60 == 0 {
                    logger.warning("lost the LISTEN session for the other relays' arrivals (\(failures) attempts); long-polls are re-checked every \(settings.recheckMilliseconds) ms meanwhile: \(PostgresFailures.relayError(error, "listening"))")
                }
            }
            if !Task.isCancelled { try? await Task.sleep(for: .milliseconds(min(1_000, 50 * max(1, failures)))) }
        }
        wakes.listening(false)
    }

    func heard(_ payload: String, _ sink: any ArrivalSink) {
        let parsed = ArrivalChannel.parse(payload)
        if let sent = parsed.sentMicroseconds, !parsed.arrivals.isEmpty { wakes.heard(sentMicroseconds: sent) }
        for (account, arrival) in parsed.arrivals { sink.announce(account: account, arrival: arrival) }
        if parsed.deleted { sink.noteDeletion() }
        if parsed.credentials { knownTokens.withLock { $0 = [:] } }
    }

    /// Announces the latest arrival of every account with waiting long-polls, as the database has it.
    func recheck(_ sink: any ArrivalSink) async {
        knownTokens.withLock { $0 = [:] }
        let accounts = sink.waitingAccounts
        guard !accounts.isEmpty,
            let latest = try? await rows(
                "re-checking waiting accounts", "SELECT name, cursor FROM accounts WHERE name = ANY(\(accounts))", as: (String, Int64).self)
        else {
            wakes.rechecked(announced: 0)
            return
        }
        for (account, cursor) in latest { sink.announce(account: account, arrival: UInt64(cursor)) }
        wakes.rechecked(announced: latest.count)
    }

    // MARK: Metrics

    public func gauges() async -> [(name: String, help: String, value: Double)] {
        let statistics = batches?.statistics ?? .init()
        let pool = leased.withLock { $0 }
        var gauges: [(name: String, help: String, value: Double)] = [
            ("relay_commits_total", "Transactions that made pushes durable (one commit each).", Double(statistics.commits)),
            ("relay_committed_pushes_total", "Pushes those transactions carried.", Double(statistics.pushes)),
            ("relay_commit_seconds_total", "Time spent in those transactions, commit included.", statistics.commitSeconds),
            ("relay_pool_connections_in_use", "Pooled PostgreSQL connections held by requests now.", Double(pool.now)),
            ("relay_pool_connections_peak", "The most pooled connections held at once since start.", Double(pool.peak)),
            ("relay_pool_connections_max", "The pool's bound ([postgres] max_connections).", Double(settings.maximumConnections)),
            ("relay_notifications_sent_total", "NOTIFY payloads sent to the other relays.", Double(hints.sentNotifications)),
        ]
        gauges += wakes.gauges
        if let usage = try? await rows("reading the notification queue", "SELECT pg_notification_queue_usage()", as: Double.self).first {
            gauges.append(("relay_notification_queue_usage", "PostgreSQL's notification queue in use (0 to 1): pg_notification_queue_usage().", usage))
        }
        return gauges
    }
}

extension PostgresConnectionSettings {
    /// Where the database is, for messages.
    var address: String { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } ?? "\(host ?? "127.0.0.1"):\(port)" }
}

/// The database password, from a file or a systemd credential; never from the configuration itself.
enum PostgresPassword {
    static func read(_ settings: PostgresConnectionSettings, environment: [String: String]) throws(RelayError) -> String? {
        var path: String?
        if let name = settings.passwordCredential {
            guard let directory = environment["CREDENTIALS_DIRECTORY"] else {
                throw RelayError(
                    .unavailable,
                    "postgres.password_credential names the systemd credential \(RelayNames.quoted(name)), but $CREDENTIALS_DIRECTORY is not set: add LoadCredential=\(name):PATH to the unit, or use postgres.password_file")
            }
            path = "\(directory)/\(name)"
        } else {
            path = settings.passwordFile
        }
        guard let path else { return nil }
        guard let permissions = DurableFiles.permissions(of: path), let data = FileManager.default.contents(atPath: path) else {
            throw RelayError(.unavailable, "cannot read the PostgreSQL password file \(path): check that it exists and the relay may read it")
        }
        // A systemd credential is guarded by systemd (only the service may read it); a file of one's own must
        // be readable by its owner alone.
        guard settings.passwordCredential != nil || permissions & 0o077 == 0 else {
            throw RelayError(
                .unavailable, "the PostgreSQL password file \(path) may be read by others (mode \(String(permissions & 0o777, radix: 8))): chmod 600 it")
        }
        let text = String(decoding: data, as: UTF8.self)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
}
