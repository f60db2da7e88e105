import Crypto
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayProtocol
import Synchronization
import LogsyncSQLite

/// The relay's storage in one SQLite file (WAL, `synchronous=FULL`): accounts, token digests and the
/// segments themselves. Pushes go through one writer thread that commits whatever is queued in one
/// transaction — one fsync for many acknowledgements (``GroupCommitWriter``); reads use a small pool of
/// connections of their own and never wait for the writer.
public final class SQLiteRelayStorage: MailboxStorage, CredentialStorage, Sendable {
    public let path: String
    let writer: GroupCommitWriter?
    private let readers: [Reader]
    /// Accounts and tokens are changed rarely (by `sync-relay account|token`, often from another process):
    /// on a connection of their own.
    private let admin: Reader
    /// Which reader a request waits for when all are busy (in a class: an `Atomic` stored directly in a type
    /// with a throwing initializer crashes the 6.3 optimizer).
    private let nextReader = ReaderTurn()
    /// Tokens already found valid, by the SHA-256 of their text (no secret is kept), while the credentials
    /// marker (``credentialsMarker``) is unchanged: a request then costs a `stat` instead of a query
    /// and a hash. Revoking a token or deleting an account, from any process, changes the marker, and
    /// the next request looks in the database again.
    private let knownTokens = Mutex<(stamp: ChangeMarker.Stamp?, credentials: [SHA256Digest: Credential])>((nil, [:]))
    static let knownTokensLimit = 4_096
    /// The file next to the database that grows at each revocation or account deletion.
    let credentialsMarker: String
    static func credentialsMarker(_ path: String) -> String { path + "-credentials" }

    /// The schema, created on first open. `user_version` says which version a file has.
    /// Version 2 added progress records and baselines (bounded growth), version 3 the relay's identity
    /// (`relay_meta`, ``RelayEpoch``): only new tables.
    static let schemaVersion: Int64 = 3
    static let schema = """
        CREATE TABLE IF NOT EXISTS accounts(
            name TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, quota_bytes INTEGER,
            used_bytes INTEGER NOT NULL DEFAULT 0, segments INTEGER NOT NULL DEFAULT 0, cursor INTEGER NOT NULL DEFAULT 0) STRICT;
        CREATE TABLE IF NOT EXISTS tokens(
            id TEXT PRIMARY KEY, account TEXT NOT NULL, node TEXT, digest BLOB NOT NULL, created_ms INTEGER NOT NULL) STRICT;
        CREATE INDEX IF NOT EXISTS tokens_by_account ON tokens(account);
        CREATE TABLE IF NOT EXISTS segments(
            account TEXT NOT NULL, arrival INTEGER NOT NULL, node TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
            digest BLOB NOT NULL, size INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY(account, arrival)) STRICT;
        CREATE UNIQUE INDEX IF NOT EXISTS segments_by_node ON segments(account, node, first);
        CREATE TABLE IF NOT EXISTS retired_accounts(name TEXT PRIMARY KEY, cursor INTEGER NOT NULL) STRICT;
        CREATE TABLE IF NOT EXISTS progress(
            account TEXT NOT NULL, node TEXT NOT NULL, size INTEGER NOT NULL, bytes BLOB NOT NULL, updated_ms INTEGER NOT NULL,
            PRIMARY KEY(account, node)) STRICT;
        CREATE TABLE IF NOT EXISTS baseline_uploads(
            id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL, node TEXT NOT NULL, name TEXT NOT NULL, started_ms INTEGER NOT NULL) STRICT;
        CREATE TABLE IF NOT EXISTS baseline_chunks(blob INTEGER NOT NULL, seq INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY(blob, seq)) STRICT;
        CREATE TABLE IF NOT EXISTS baselines(
            account TEXT NOT NULL, node TEXT NOT NULL, name TEXT NOT NULL, blob INTEGER NOT NULL, chunks INTEGER NOT NULL, digest BLOB NOT NULL,
            size INTEGER NOT NULL, created_ms INTEGER NOT NULL, PRIMARY KEY(account, node, name)) STRICT;
        """ + RelayEpoch.table

    /// Which history this database holds (docs/relay-protocol.md, "Identity and epoch"): every pull
    /// answer carries it.
    public let identity: RelayIdentity
    /// Why this start changed the epoch (a serving relay whose database may hold less than it
    /// acknowledged), or nil.
    public let epochChange: String?
    /// What serving relays committed, beside the database (nil for the administration commands).
    private let served: ServedNote?

    /// Opens (creating when needed) the storage at `path`. `serving` starts the group-commit writer and
    /// the reader pool a server needs; the administration commands open it without.
    ///
    /// `path` is resolved first (links, `..`): `serve` and the administration commands then name the
    /// same file and the same credentials marker beside it, whichever path each was given.
    public init(path given: String, serving: Bool = true, readerCount: Int = 4, maximumQueuedPushes: Int = 4_096) throws(RelayError) {
        let path = DurableFiles.resolvingLinks(given)
        self.path = path
        credentialsMarker = Self.credentialsMarker(path)
        var identity = RelayIdentity(id: "", epoch: 0)
        var change: String?
        var commits: Int64 = 0
        do {
            // What the serving relays last committed, read before the database is: nil when there is no note.
            var note: [UInt8]?
            if serving {
                do {
                    if case .bytes(let bytes) = try Directory.readFile(atPath: RelayEpoch.notePath(path), maximumBytes: 4_096) { note = bytes } else { note = [] }
                } catch {
                    note = error.errno == ENOENT ? nil : []
                }
            }
            let admin = try Connection(path: path)
            try Self.configure(admin)
            try admin.execute("BEGIN IMMEDIATE")
            do {
                let version = try admin.int64("PRAGMA user_version") ?? 0
                guard version <= Self.schemaVersion else {
                    throw RelayError(
                        .unavailable,
                        "the relay database \(path) has schema version \(version), newer than this sync-relay understands (\(Self.schemaVersion)): run the newer sync-relay")
                }
                try admin.execute(Self.schema)
                try admin.execute("PRAGMA user_version = \(Self.schemaVersion)")
                let found = try RelayEpoch.identity(admin)
                commits = found.commits
                (identity, change) = (found.identity, nil)
                if serving { (identity, change) = try RelayEpoch.check(admin, found.identity, commits: commits, note: note, database: path) }
                // Uploads of baselines that were in flight when the last server stopped will never finish.
                // Only a server clears them: the administration commands run beside a serving relay.
                if serving {
                    try admin.execute("DELETE FROM baseline_chunks WHERE blob IN (SELECT id FROM baseline_uploads)")
                    try admin.execute("DELETE FROM baseline_uploads")
                }
                try admin.execute("COMMIT")
            } catch {
                try? admin.execute("ROLLBACK")
                throw error
            }
            self.admin = Reader(admin)
            self.identity = identity
            epochChange = change
            var readers: [Reader] = []
            for _ in 0..<(serving ? max(1, readerCount) : 1) {
                let reader = try Connection(path: path, options: [.readWrite])
                try Self.configure(reader)
                try reader.execute("PRAGMA query_only = ON")
                readers.append(Reader(reader))
            }
            self.readers = readers
            if serving {
                try ChangeMarker.create(Self.credentialsMarker(path))
                let served = try ServedNote(database: path, identity: identity, commits: commits)
                self.served = served
                let connection = try Connection(path: path, options: [.readWrite])
                try Self.configure(connection)
                writer = GroupCommitWriter(connection: connection, maximumQueued: maximumQueuedPushes, served: served)
            } else {
                served = nil
                writer = nil
            }
        } catch let error as RelayError {
            throw error
        } catch let error as SystemError {
            throw RelayError(.unavailable, "cannot create \(error.path ?? path) next to the relay database: \(error)")
        } catch {
            throw RelayError(.unavailable, "cannot open the relay database \(path): check the path and its permissions", cause: error as? SQLiteError)
        }
    }

    private static func configure(_ connection: Connection) throws(SQLiteError) {
        try connection.setBusyTimeout(milliseconds: 5_000)
        _ = try connection.rows("PRAGMA journal_mode = WAL")
        // FULL: a commit in WAL mode is on disk when it returns, power loss included.
        try connection.execute("PRAGMA synchronous = FULL")
    }

    /// Stops the writer after what is queued (later pushes fail with 503), and makes the note of what
    /// it committed durable.
    public func close() {
        writer?.stop()
        served?.sync()
    }

    var writerStatistics: GroupCommitWriter.Statistics? { writer?.currentStatistics }

    // MARK: Mailboxes

    public func push(_ push: SegmentPush) async throws(RelayError) -> PushOutcome {
        let digest = Array(SHA256.hash(data: push.bytes))
        guard let writer else { throw RelayError(.unavailable, "this relay storage was opened for administration only") }
        return try await writer.submitPush(bytes: push.bytes.count) { connection, accounts throws(SQLiteError) in
            try MailboxWrites.insertSegment(push, digest: digest, connection, accounts)
        }
    }

    /// Runs a write on the writer thread; returns once it is durable.
    func writing<T: Sendable>(
        bytes: Int, _ work: @escaping @Sendable (Connection) throws(SQLiteError) -> Result<T, RelayError>
    ) async throws(RelayError) -> T {
        guard let writer else { throw RelayError(.unavailable, "this relay storage was opened for administration only") }
        return try await writer.submit(bytes: bytes, work)
    }

    func reading<T>(_ body: (Connection) throws(SQLiteError) -> T) throws(RelayError) -> T {
        // A free connection if there is one, else wait for one in turn.
        let reader =
            readers.first { $0.lock.try() }
            ?? {
                let reader = readers[(nextReader.value.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max) % readers.count]
                reader.lock.lock()
                return reader
            }()
        defer { reader.lock.unlock() }
        do {
            return try body(reader.connection)
        } catch {
            throw RelayError(.storage, "reading the relay database failed", cause: error)
        }
    }

    public func pull(account: String, after cursor: UInt64, limit: Int, maximumBytes: Int) throws(RelayError) -> PullPage {
        try reading { connection throws(SQLiteError) in
            let statement = try connection.cached(
                "SELECT arrival, node, first, last, bytes FROM segments WHERE account = ? AND arrival > ? ORDER BY arrival LIMIT ?")
            try statement.bind([.text(account), .integer(Int64(bitPattern: cursor)), .integer(Int64(limit) + 1)])
            var segments: [StoredSegment] = []
            var bytes = 0
            var more = false
            while try statement.step() {
                let size = statement.withBytes(at: 4) { $0.count }
                if segments.count == limit || (!segments.isEmpty && bytes + size > maximumBytes) {
                    more = true
                    statement.reset()
                    break
                }
                bytes += size
                segments.append(
                    StoredSegment(
                        arrival: UInt64(bitPattern: statement.int64(at: 0)), node: NodeID(statement.text(at: 1) ?? ""),
                        firstSequence: UInt64(bitPattern: statement.int64(at: 2)), lastSequence: UInt64(bitPattern: statement.int64(at: 3)),
                        bytes: statement.withBytes(at: 4) { Array($0.bindMemory(to: UInt8.self)) }))
            }
            return PullPage(segments: segments, cursor: segments.last?.arrival ?? cursor, more: more)
        }
    }

    public func segment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) throws(RelayError) -> [UInt8]? {
        try reading { connection throws(SQLiteError) in
            let statement = try connection.cached("SELECT bytes FROM segments WHERE account = ? AND node = ? AND first = ? AND last = ?")
            try statement.bind([
                .text(account), .text(node.rawValue), .integer(Int64(bitPattern: firstSequence)), .integer(Int64(bitPattern: lastSequence)),
            ])
            guard try statement.step() else { return nil }
            let bytes = statement.withBytes(at: 0) { Array($0.bindMemory(to: UInt8.self)) }
            statement.reset()
            return bytes
        }
    }

    public func latestArrival(account: String) throws(RelayError) -> UInt64 {
        try reading { connection throws(SQLiteError) in
            UInt64(bitPattern: try connection.int64("SELECT cursor FROM accounts WHERE name = ?", [.text(account)]) ?? 0)
        }
    }

    public func nodes(account: String) throws(RelayError) -> [NodeSummary] {
        try reading { connection throws(SQLiteError) in
            try connection.rows(
                "SELECT node, count(*), max(last), sum(size) FROM segments WHERE account = ? GROUP BY node ORDER BY node", [.text(account)]
            ).map { row in
                NodeSummary(node: row[0].text ?? "", segments: Int(row[1].integer ?? 0), lastSequence: UInt64(bitPattern: row[2].integer ?? 0), bytes: row[3].integer ?? 0)
            }
        }
    }

    public func isReady() -> Bool {
        guard writer?.isRunning ?? true else { return false }
        return (try? reading { connection throws(SQLiteError) in try connection.int64("SELECT 1") }) == 1
    }

    // MARK: Accounts and tokens

    private func administering<T>(_ what: String, _ body: (Connection) throws -> T) throws(RelayError) -> T {
        do {
            admin.lock.lock()
            defer { admin.lock.unlock() }
            let connection = admin.connection
            do {
                try connection.execute("BEGIN IMMEDIATE")
                do {
                    let result = try body(connection)
                    try connection.execute("COMMIT")
                    return result
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
            }
        } catch let error as RelayError {
            throw error
        } catch {
            throw RelayError(.storage, "\(what) failed in the relay database \(path)", cause: error as? SQLiteError)
        }
    }

    public func createAccount(_ name: String, quotaBytes: Int64?) throws(RelayError) {
        try StorageRefusals.checkAccountName(name)
        try administering("creating the account") { connection in
            guard try connection.int64("SELECT count(*) FROM accounts WHERE name = ?", [.text(name)]) == 0 else {
                throw StorageRefusals.accountExists(name)
            }
            // A name used before continues its arrival numbers: a node still holding a cursor from the
            // deleted account must not skip the new account's first segments.
            try connection.execute(
                """
                INSERT INTO accounts(name, created_ms, quota_bytes, cursor)
                VALUES(?, ?, ?, coalesce((SELECT cursor FROM retired_accounts WHERE name = ?1), 0))
                """,
                [.text(name), .integer(Self.now()), quotaBytes.map { .integer($0) } ?? .null])
        }
    }

    public func accounts() throws(RelayError) -> [AccountInfo] {
        try administering("listing the accounts") { connection in
            try connection.rows("SELECT name, created_ms, segments, used_bytes, quota_bytes FROM accounts ORDER BY name").map { row in
                AccountInfo(
                    name: row[0].text ?? "", createdAt: Self.iso8601(row[1].integer ?? 0), segments: Int(row[2].integer ?? 0),
                    usedBytes: row[3].integer ?? 0, quotaBytes: row[4].integer)
            }
        }
    }

    public func deleteAccount(_ name: String) throws(RelayError) {
        try administering("deleting the account") { connection in
            guard try connection.int64("SELECT count(*) FROM accounts WHERE name = ?", [.text(name)]) == 1 else {
                throw StorageRefusals.noAccount(name)
            }
            try connection.execute(
                "INSERT OR REPLACE INTO retired_accounts(name, cursor) SELECT name, cursor FROM accounts WHERE name = ?", [.text(name)])
            try connection.execute("DELETE FROM tokens WHERE account = ?", [.text(name)])
            try connection.execute("DELETE FROM segments WHERE account = ?", [.text(name)])
            try connection.execute("DELETE FROM progress WHERE account = ?", [.text(name)])
            try connection.execute(
                "DELETE FROM baseline_chunks WHERE blob IN (SELECT blob FROM baselines WHERE account = ?1 UNION SELECT id FROM baseline_uploads WHERE account = ?1)",
                [.text(name)])
            try connection.execute("DELETE FROM baselines WHERE account = ?", [.text(name)])
            try connection.execute("DELETE FROM baseline_uploads WHERE account = ?", [.text(name)])
            try connection.execute("DELETE FROM accounts WHERE name = ?", [.text(name)])
        }
        try credentialsChanged("deleted the account \(RelayNames.quoted(name))")
    }

    /// Tells running relays (this process's and others') that tokens went away: their next request looks
    /// in the database again. Called after the change committed.
    private func credentialsChanged(_ what: String) throws(RelayError) {
        do {
            try ChangeMarker.mark(credentialsMarker)
        } catch {
            throw RelayError(
                .storage, "\(what), but a running relay may go on accepting its tokens until it restarts: \(error)")
        }
    }

    public func issueToken(account: String, node: NodeID?) throws(RelayError) -> (info: TokenInfo, token: String) {
        try StorageRefusals.checkTokenNode(node)
        return try administering("issuing a token") { connection in
            guard try connection.int64("SELECT count(*) FROM accounts WHERE name = ?", [.text(account)]) == 1 else {
                throw StorageRefusals.noAccountForToken(account)
            }
            let (id, token, digest) = Tokens.generate()
            let now = Self.now()
            try connection.execute(
                "INSERT INTO tokens(id, account, node, digest, created_ms) VALUES(?, ?, ?, ?, ?)",
                [.text(id), .text(account), node.map { .text($0.rawValue) } ?? .null, .blob(digest), .integer(now)])
            return (TokenInfo(id: id, account: account, node: node?.rawValue, createdAt: Self.iso8601(now)), token)
        }
    }

    public func revokeToken(id: String) throws(RelayError) {
        try administering("revoking the token") { connection in
            try connection.execute("DELETE FROM tokens WHERE id = ?", [.text(id)])
            guard connection.changes == 1 else {
                throw StorageRefusals.noToken(id)
            }
        }
        try credentialsChanged("revoked the token \(id)")
    }

    public func tokens(account: String?) throws(RelayError) -> [TokenInfo] {
        try administering("listing the tokens") { connection in
            let rows: [[DatabaseValue]]
            if let account {
                rows = try connection.rows("SELECT id, account, node, created_ms FROM tokens WHERE account = ? ORDER BY created_ms, id", [.text(account)])
            } else {
                rows = try connection.rows("SELECT id, account, node, created_ms FROM tokens ORDER BY account, created_ms, id")
            }
            return rows.map { row in
                TokenInfo(id: row[0].text ?? "", account: row[1].text ?? "", node: row[2].text, createdAt: Self.iso8601(row[3].integer ?? 0))
            }
        }
    }

    public func authenticate(_ bearer: String) throws(RelayError) -> Credential? {
        // The stamp is taken before the database is asked: a revocation that lands after it changes the
        // marker, so what the database says now is never kept past that change.
        let stamp = ChangeMarker.stamp(credentialsMarker)
        var text = bearer
        let key = text.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        if let stamp, let known = knownTokens.withLock({ $0.stamp == stamp ? $0.credentials[key] : nil }) { return known }
        guard let credential = try lookUp(bearer) else { return nil }
        if let stamp {
            knownTokens.withLock { known in
                if known.stamp != stamp || known.credentials.count >= Self.knownTokensLimit { known = (stamp, [:]) }
                known.credentials[key] = credential
            }
        }
        return credential
    }

    /// The token's credential as the database has it now.
    private func lookUp(_ bearer: String) throws(RelayError) -> Credential? {
        guard let (id, secret) = Tokens.parse(bearer) else { return nil }
        let row = try reading { connection throws(SQLiteError) -> [DatabaseValue]? in
            try connection.rows("SELECT account, node, digest FROM tokens WHERE id = ?", [.text(id)]).first
        }
        guard let row, case .blob(let stored) = row[2], Tokens.constantTimeEqual(stored, Tokens.digest(secret)) else { return nil }
        return Credential(tokenID: id, account: row[0].text ?? "", node: row[1].text.map(NodeID.init))
    }

    private final class ReaderTurn: Sendable {
        let value = Atomic<Int>(0)
    }

    /// One reading connection, used by one request at a time.
    private final class Reader: @unchecked Sendable {
        // `connection` is used only while `lock` is held.
        let lock = NSLock()
        let connection: Connection
        init(_ connection: Connection) { self.connection = connection }
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func iso8601(_ milliseconds: Int64) -> String { UTCTime.iso8601(milliseconds: milliseconds) }
}

extension DatabaseValue {
    var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }
}

extension SQLiteRelayStorage: StorageGauges {
    public func gauges() async -> [(name: String, help: String, value: Double)] { commitGauges }

    /// The group commit's counters, for `/metrics`.
    var commitGauges: [(name: String, help: String, value: Double)] {
        guard let statistics = writerStatistics else { return [] }
        return [
            ("relay_commits_total", "Transactions that made pushes durable (one fsync each).", Double(statistics.commits)),
            ("relay_committed_pushes_total", "Writes those transactions carried (pushes, progress records, baseline chunks, deletions).", Double(statistics.pushes)),
            ("relay_commit_seconds_total", "Time spent committing, fsync included.", statistics.commitSeconds),
        ]
    }
}
