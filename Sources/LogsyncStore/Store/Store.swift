import Foundation
import LogsyncCore
import LogsyncPlatform
import Synchronization
import LogsyncSQLite

/// A local SQLite store whose synced tables record persistent history.
///
/// Every committed insert, update or delete on a synced table is appended to the store's history log by
/// triggers, in the same SQLite transaction as the change, whichever connection or process made it.
/// Writes through ``write(author:context:_:)`` carry an author and context name; writes by other
/// processes are sealed into history transactions of their own (see `docs/history.md`).
///
/// A `Store` is safe to share between threads and tasks: it owns one writer connection and one reader
/// connection, each behind its own lock, and one more that copies the WAL into the database file
/// (``Checkpoints``).
public final class Store: Sendable {
    public let path: String
    public let schema: Schema
    /// This store's node id, created with the store and kept for its lifetime.
    public let nodeID: String
    public let options: StoreOptions

    let catalog: Catalog
    /// What a change from another node must be to be merged here (``ChangeRules``; the sync engine reads
    /// them through ``SyncLedger/changeRules``).
    let changeRules: ChangeRules
    private let writer: Locked<WriterState>
    private let reader: Locked<Connection>
    private let checkpoints: Checkpoints
    /// Lets a long import know that a writer waits (see ``WriterIntent``).
    let intent: WriterIntent
    /// Node indexes the writer has handed out, for preparing imports on other threads (``FreshRows``).
    let knownNodeIndexes = PublishedNodeIndexes()

    /// WAL frames (pages) after which a write transaction is followed by a checkpoint: SQLite's own
    /// automatic-checkpoint threshold. See ``Checkpoints``.
    static let checkpointFrames = 1_000
    /// WAL frames (about 40 MiB) after which a sync transaction's checkpoint makes sure that the WAL starts
    /// over, even while local writers keep appending to it. See ``Checkpoints``.
    static let restartFrames = 10_000
    /// WAL frames (about 80 MiB) after which the writer checkpoints inside its commit, as SQLite would by
    /// itself: only reached when the checkpoints after transactions do not keep up (or cannot: another
    /// process's readers or writers), or one transaction is that large.
    static let writerCheckpointFrames: Int32 = 2 * Int32(restartFrames)

    struct WriterState {
        let connection: Connection
        var clock: HybridLogicalClock
        var nodes: NodeTable
        /// The merge's per-row statements on this connection.
        let mergeStatements: MergeStatements
        /// The schema cookie at which this connection last made sure `_ls_live` has no orphans.
        var liveStatesCheckedAt: Int64?
        /// The schema cookie at which the synced tables last matched the registered schema (``SchemaDrift``).
        var schemaCheckedAt: Int64?
        /// The connection's triggers: off while the merge or the library's write helpers record the history
        /// of their writes themselves (``CaptureTriggers``).
        let triggers: CaptureTriggers
        /// History of writes through ``WriteTransaction``'s helpers, recorded with triggers off.
        let localCapture: LocalCapture
        /// Calls of ``Store/durably(_:)`` under way: the first sets `synchronous=FULL`, the last sets back
        /// what the connection had.
        var durableCalls = 0
        var synchronousBeforeDurable: Int64 = 1

        init(connection: Connection, clock: HybridLogicalClock, nodes: NodeTable) {
            self.connection = connection
            self.clock = clock
            self.nodes = nodes
            self.mergeStatements = MergeStatements(connection: connection)
            self.triggers = CaptureTriggers(connection: connection)
            self.localCapture = LocalCapture(connection: connection, triggers: triggers, statements: mergeStatements)
        }
    }

    /// Opens the store at `path`, creating it if needed, and registers `schema`: tables are created or
    /// additively migrated and history capture installed.
    ///
    /// Fails with a ``StoreError`` that names the path and the problem when the schema is invalid, the
    /// directory is missing or read-only, or the file is not a usable database. A failed open of a new
    /// store leaves no file behind.
    public init(path: String, schema: Schema, options: StoreOptions = StoreOptions()) throws(StoreError) {
        do {
            try schema.validate()
        } catch {
            throw StoreError(.schema, "invalid schema: \(error.location): \(error.message)", cause: error)
        }
        let existed = try Self.checkLocation(path)
        if !existed { try Self.checkCreation(path, options: options) }
        self.path = path
        self.schema = schema
        self.options = options
        self.intent = WriterIntent(storePath: path)
        do {
            let connection = try Self.openConnection(path, options: options)
            try connection.execute("BEGIN IMMEDIATE")
            let catalog: Catalog
            do {
                catalog = try SchemaRegistration(connection: connection, schema: schema).run()
                try connection.execute("COMMIT")
                // A switch that retired the path while this store was being made there: it goes again.
                if !existed { try Self.checkCreation(path, options: options) }
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
            guard case .text(let node)? = try connection.scalar("SELECT value FROM _ls_meta WHERE key = 'node'") else {
                throw StoreError(.incompatibleFormat, "the store has no node id", path: path)
            }
            connection.trackWALFrames(fallbackFrames: Self.writerCheckpointFrames)
            let readerConnection = try Self.openConnection(path, options: options)
            try readerConnection.execute("PRAGMA query_only = 1")
            self.catalog = catalog
            self.changeRules = ChangeRules(schema)
            self.nodeID = node
            let writer = Locked(
                WriterState(connection: connection, clock: HybridLogicalClock(), nodes: try NodeTable(connection: connection)))
            self.writer = writer
            self.reader = Locked(readerConnection)
            self.checkpoints = Checkpoints(
                open: { [path, options] in try Self.openConnection(path, options: options) },
                // Weak: the writer connection must close with the store, not whenever the checkpoint thread
                // lets go of this closure.
                holdingWriterLock: { [weak writer] work in try writer?.withLock { _ in try work() } })
        } catch {
            if !existed { Self.removeFiles(of: path) }
            throw Self.mapped(error, path: path, doing: "opening the store")
                ?? StoreError(.sqlite, "opening the store failed", path: path, cause: error)
        }
    }

    /// Whether the writer connection's triggers are off now (``CaptureTriggers``).
    var writerTriggersAreOff: Bool { writer.withLock { $0.triggers.areOff } }

    /// Waits until the checkpoints handed to the checkpoint thread so far have run (see ``Checkpoints``).
    func waitForBackgroundCheckpoints() {
        checkpoints.waitForBackground()
    }

    deinit {
        // The checkpoint thread's connection is closed before the store's own: when the store is gone, no
        // connection to its file is left open.
        checkpoints.stop()
    }

    // MARK: - Writing

    /// Runs `body` in one write transaction. Changes it makes to synced tables become one history
    /// transaction with `author` and `context`, committed atomically with them. If `body` throws, nothing
    /// is written.
    ///
    /// Waits up to the busy timeout for other writers, then fails with ``StoreError/Code/busy``.
    @discardableResult
    public func write<T>(
        author: String? = nil, context: String? = nil, _ body: (WriteTransaction) throws -> T
    ) throws -> T {
        try perform(marker: .init(author: author, context: context, origin: nil, timestamp: nil), body).result
    }

    /// Like ``write(author:context:_:)``, and also returns the token of the history transaction the write
    /// became: nil when it changed nothing in synced tables. Contexts use it to recognise their own saves
    /// when history comes back to them.
    public func recordedWrite<T>(
        author: String? = nil, context: String? = nil, _ body: (WriteTransaction) throws -> T
    ) throws -> (result: T, token: HistoryToken?) {
        try perform(marker: .init(author: author, context: context, origin: nil, timestamp: nil), body)
    }

    /// What a commit marker records about the transaction it closes.
    struct Marker {
        var author: String? = nil
        var context: String? = nil
        /// The node the transaction came from (or ``Origin/mergeStorageValue``); nil for local transactions.
        var origin: String? = nil
        /// The transaction's clock when it was imported; nil to take the next local tick.
        var timestamp: HLCTimestamp? = nil
    }

    /// The write path shared by local writes and imports: seal whatever foreign writers left, run the
    /// body, and close its changes with a marker, all in one transaction.
    func perform<T>(marker: Marker, _ body: (WriteTransaction) throws -> T) throws -> (result: T, token: HistoryToken?) {
        try intent.announced { try write(marker: marker, body) }
    }

    private func write<T>(marker: Marker, _ body: (WriteTransaction) throws -> T) throws -> (result: T, token: HistoryToken?) {
        try withWriter(sync: false) { state in
            do {
                if try state.connection.beginImmediateUnlessBusy() { return try write(marker: marker, state: &state, body) }
            } catch {
                throw Self.storeError(error, path: path, doing: "starting a write transaction")
            }
            // Another connection writes (an import in another process, perhaps): say so, and wait.
            return try intent.announcedToAll {
                do {
                    try state.connection.run("BEGIN IMMEDIATE")
                } catch {
                    throw Self.storeError(error, path: path, doing: "starting a write transaction")
                }
                return try write(marker: marker, state: &state, body)
            }
        }
    }

    /// The rest of a local write, once its transaction has begun.
    private func write<T>(
        marker: Marker, state: inout WriterState, _ body: (WriteTransaction) throws -> T
    ) throws -> (result: T, token: HistoryToken?) {
        let connection = state.connection
        do {
            let before = try sealPending(&state)
            state.localCapture.begin()
            let result = try body(
                WriteTransaction(connection: connection, catalog: catalog, path: path, capture: state.localCapture))
            try state.localCapture.finish(catalog)
            let token = try appendMarker(marker, ifLogGrewPast: before, state: &state)
            try connection.run("COMMIT")
            return (result, token)
        } catch {
            try? connection.execute("ROLLBACK")
            throw Self.storeError(error, path: path, doing: "writing")
        }
    }

    /// Runs `body` holding the writer lock, then, when the WAL has grown past ``checkpointFrames``, a
    /// checkpoint (see ``Checkpoints``): on this thread once the lock is released if the turn is free,
    /// else, after a sync transaction, on the checkpoint thread. `inBackground`: a sync transaction that no
    /// local writer competes with, whose checkpoint goes to the checkpoint thread in any case.
    private func withWriter<T>(sync: Bool, inBackground: Bool = false, _ body: (inout WriterState) throws -> T) throws -> T {
        var walFrames = 0
        var claimed = false
        let result = try writer.withLock { state in
            // A sync transaction starts with triggers on (the merge turns them off where it records history
            // itself). A local write leaves them as the last one did: its raw SQL turns them on, its helpers
            // off (``CaptureTriggers``).
            if sync { try restoreTriggers(&state) }
            let result = try body(&state)
            walFrames = state.connection.walFrames
            if !inBackground { claimed = checkpoints.claim(walFrames: walFrames) }
            return result
        }
        if claimed {
            checkpoints.run(walFrames: walFrames, restart: sync)
        } else if sync {
            checkpoints.checkpointInBackground(walFrames: walFrames)
        }
        return result
    }

    /// Inside a write transaction: closes changes left by foreign writers with a marker of their own, so
    /// they precede the caller's changes in history, and brings the clock past the newest marker.
    /// Returns the last `seq` in the log afterwards.
    func sealPending(_ state: inout WriterState) throws -> Int64 {
        let connection = state.connection
        let newest = try connection.cached("SELECT seq, kind, hlc FROM _ls_log ORDER BY seq DESC LIMIT 1")
        guard try newest.step() else { return 0 }
        let (seq, kind, hlc) = (newest.int64(at: 0), newest.int64(at: 1), newest.isNull(at: 2) ? nil : newest.int64(at: 2))
        newest.reset()
        if kind == 0 {
            if let hlc { state.clock.observe(HLCTimestamp(storageValue: hlc), physicalMilliseconds: WallClock.milliseconds()) }
            return seq
        }
        if let hlc = try connection.int64("SELECT hlc FROM _ls_log WHERE kind = 0 ORDER BY seq DESC LIMIT 1") {
            state.clock.observe(HLCTimestamp(storageValue: hlc), physicalMilliseconds: WallClock.milliseconds())
        }
        // The newest row is a pending change (kind != 0), so the log has grown past the row before it.
        return try appendMarker(Marker(), ifLogGrewPast: seq - 1, state: &state)?.rawValue ?? seq
    }

    /// Runs `body` in a write transaction for the sync engine: foreign changes are sealed first, and the
    /// merging flag is set so delete-rule triggers leave the projection to the merge. `body` appends its
    /// own markers. Rolled back entirely if anything throws.
    ///
    /// `checkpointInBackground`: no local writer competes with this transaction, so the checkpoint that may
    /// follow it can run alongside the caller's next one (see ``Checkpoints``).
    func syncTransaction<T>(
        checkpointInBackground: Bool = false, _ body: (inout WriterState, _ lastSeq: Int64) throws -> T
    ) throws -> T {
        try withWriter(sync: true, inBackground: checkpointInBackground) { state in
            let connection = state.connection
            do {
                try connection.execute("BEGIN IMMEDIATE")
            } catch {
                throw Self.storeError(error, path: path, doing: "starting a sync transaction")
            }
            do {
                let last = try sealPending(&state)
                try checkSchemaIfChanged(&state)
                // Notes of rows a statement might have replaced are needed only until that statement ends.
                try connection.execute("DELETE FROM _ls_displaced")
                try rehomeLiveStatesIfSchemaChanged(&state)
                try connection.execute("UPDATE _ls_state SET merging = 1 WHERE id = 1")
                let result = try body(&state, last)
                try restoreTriggers(&state)
                try connection.execute("UPDATE _ls_state SET merging = 0 WHERE id = 1")
                try connection.execute("COMMIT")
                return result
            } catch {
                try? connection.execute("ROLLBACK")
                try? restoreTriggers(&state)
                try? state.nodes.reload(connection: connection)
                state.liveStatesCheckedAt = nil
                throw Self.storeError(error, path: path, doing: "syncing")
            }
        }
    }

    /// Before anything is exported or imported: when another connection changed the file's schema since the
    /// last check, the synced tables must still match the registered schema (``SchemaDrift``).
    private func checkSchemaIfChanged(_ state: inout WriterState) throws {
        let cookie = try state.connection.int64("PRAGMA schema_version") ?? 0
        guard state.schemaCheckedAt != cookie else { return }
        try SchemaDrift(connection: state.connection, schema: schema, catalog: catalog).check(checkingTriggers: true)
        state.schemaCheckedAt = cookie
    }

    /// Closes the changes appended after `seq` with a marker, in one statement that appends nothing when
    /// there are none. Returns the new transaction's token, or nil when no synced row changed.
    func appendMarker(_ marker: Marker, ifLogGrewPast seq: Int64, state: inout WriterState) throws -> HistoryToken? {
        let now = WallClock.milliseconds()
        let timestamp: HLCTimestamp
        if let imported = marker.timestamp {
            state.clock.observe(imported, physicalMilliseconds: now)
            timestamp = imported
        } else {
            timestamp = state.clock.tick(physicalMilliseconds: now)
        }
        // Bound in place: this runs once per write, one-row commits included.
        let statement = try state.connection.cached(
            "INSERT INTO _ls_log(kind, hlc, author, context, origin) SELECT 0, ?, ?, ?, ? WHERE (SELECT max(seq) FROM _ls_log) > ?")
        try statement.bind(timestamp.storageValue, at: 1)
        func bind(_ text: String?, at index: Int32) throws {
            if let text { try statement.bind(.text(text), at: index) } else { try statement.bindNull(at: index) }
        }
        try bind(marker.author, at: 2)
        try bind(marker.context, at: 3)
        try bind(marker.origin, at: 4)
        try statement.bind(seq, at: 5)
        try statement.run()
        guard state.connection.changes > 0 else { return nil }
        return HistoryToken(state.connection.lastInsertedRowID)
    }

    /// Seals changes committed by processes that write the file without logsync into history
    /// transactions, and returns the current token. Called by the commit monitor; cheap when there is
    /// nothing to seal.
    @discardableResult
    public func sealPendingChanges() throws -> HistoryToken {
        if try hasPendingChanges() {
            _ = try perform(marker: Marker()) { _ in }
        }
        return try readCurrentToken()
    }

    private func hasPendingChanges() throws -> Bool {
        try reading { connection in
            try connection.int64("SELECT kind FROM _ls_log ORDER BY seq DESC LIMIT 1").map { $0 != 0 } ?? false
        }
    }

    // MARK: - Reading

    /// The token of the newest history transaction; `.zero` for an empty history.
    public func currentToken() throws -> HistoryToken {
        try sealPendingChanges()
    }

    private func readCurrentToken() throws -> HistoryToken {
        try reading { connection in
            HistoryToken(try connection.int64("SELECT seq FROM _ls_log WHERE kind = 0 ORDER BY seq DESC LIMIT 1") ?? 0)
        }
    }

    /// History transactions after `token`, oldest first, at most `limit` of them, keeping those that pass
    /// `filter` (with their changes narrowed to the filter's entities).
    public func history(
        after token: HistoryToken = .zero, filter: HistoryFilter = HistoryFilter(), limit: Int = 1_000
    ) throws -> [HistoryTransaction] {
        try sealPendingChanges()
        return try reading { connection in
            try HistoryReader(connection: connection, catalog: catalog).transactions(after: token, filter: filter, limit: limit)
        }
    }

    /// Removes history transactions older than `token`. The newest transaction is always kept, so tokens
    /// keep increasing; and once the store syncs, history not yet exported is kept too, so purging never
    /// loses a change other nodes have not received. Returns how many transactions were removed.
    @discardableResult
    public func purgeHistory(before token: HistoryToken) throws -> Int {
        try sealPendingChanges()
        return try writer.withLock { state in
            let connection = state.connection
            do {
                try connection.execute("BEGIN IMMEDIATE")
                let newest = try connection.int64("SELECT seq FROM _ls_log WHERE kind = 0 ORDER BY seq DESC LIMIT 1") ?? 0
                var bound = min(token.rawValue, newest)
                if let exported = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_token'") {
                    bound = min(bound, exported + 1)
                }
                let cut = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log WHERE kind = 0 AND seq < ?", [.integer(bound)]) ?? 0
                let removed = try connection.int64("SELECT count(*) FROM _ls_log WHERE kind = 0 AND seq <= ?", [.integer(cut)]) ?? 0
                try connection.execute("DELETE FROM _ls_log WHERE seq <= ?", [.integer(cut)])
                try connection.execute("COMMIT")
                return Int(removed)
            } catch {
                try? connection.execute("ROLLBACK")
                throw Self.storeError(error, path: path, doing: "purging history")
            }
        }
    }

    /// Rows of a read-only query on the store's reader connection.
    public func read(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        try reading { try $0.rows(sql, arguments) }
    }

    func reading<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try reader.withLock { try body($0) }
        } catch {
            throw Self.storeError(error, path: path, doing: "reading")
        }
    }

    /// SQLite's `PRAGMA data_version` on the reader connection: it changes whenever another connection or
    /// process commits.
    func dataVersion() throws -> Int64 {
        try reading { try $0.int64("PRAGMA data_version") ?? 0 }
    }

    /// Runs `body` with `synchronous=FULL`, so its commits are on disk before it returns.
    func durably<T>(_ body: () throws -> T) throws -> T {
        guard options.durability != .full else { return try body() }
        // Counted, so that overlapping calls end with what the connection had before the first: NORMAL,
        // or FULL while a store is built with a rollback journal.
        try writer.withLock { state in
            if state.durableCalls == 0 {
                state.synchronousBeforeDurable = try state.connection.int64("PRAGMA synchronous") ?? 1
                try state.connection.execute("PRAGMA synchronous = FULL")
            }
            state.durableCalls += 1
        }
        defer {
            writer.withLock { state in
                state.durableCalls -= 1
                if state.durableCalls == 0 { _ = try? state.connection.execute("PRAGMA synchronous = \(state.synchronousBeforeDurable)") }
            }
        }
        return try body()
    }

    /// Copies the WAL into the database file (`PRAGMA wal_checkpoint(TRUNCATE)`).
    public func checkpoint() throws {
        try writer.withLock { state in
            do {
                try state.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            } catch {
                throw Self.storeError(error, path: path, doing: "checkpointing")
            }
        }
    }

    /// Ends the build of a store opened with a rollback journal (``StoreOptions/Journal/rollback``):
    /// switches it to WAL, as every store apps open is, and empties the WAL. For a store already in WAL
    /// mode, only the checkpoint. No other connection may be in a transaction on it.
    public func finishBuilding() throws {
        try writer.withLock { state in
            do {
                guard case .text(let mode)? = try state.connection.scalar("PRAGMA journal_mode = wal"), mode.lowercased() == "wal" else {
                    throw StoreError(.sqlite, "could not switch the built store \(path) to WAL mode; it is built again", path: path)
                }
                try state.connection.execute("PRAGMA synchronous = \(options.synchronous(wal: true))")
                try state.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            } catch {
                throw Self.storeError(error, path: path, doing: "switching the built store to WAL")
            }
        }
    }

    /// Writes a consistent copy of the store to a new file at `path` (`VACUUM INTO`), for a logout that
    /// keeps an account's data as the local store. An existing file at `path` is replaced.
    public func copy(to path: String) throws {
        for file in AccountStores.files(of: path) { try? DurableFiles.remove(file) }
        try writer.withLock { state in
            do {
                try state.connection.execute("VACUUM INTO '\(path.replacingOccurrences(of: "'", with: "''"))'")
            } catch {
                throw Self.storeError(error, path: self.path, doing: "copying the store to \(path)")
            }
        }
    }

    // MARK: - Opening

    /// Whether a store may be created at `path`, which holds none (``StoreOptions/creation``).
    private static func checkCreation(_ path: String, options: StoreOptions) throws(StoreError) {
        switch options.creation {
        case .always: return
        case .never: throw StoreError(.retired, "\(path) does not exist (an account switch may have retired it)", path: path)
        case .unlessRetired:
            guard let state = accountStateRetiring(path) else { return }
            throw StoreError(
                .retired,
                "\(path) does not exist, and no new store is made there: an account switch retired that path (\(state)); "
                    + "the active store is the one 'syncctl account status' names, and an app finds it through syncd's configuration",
                path: path)
        }
    }

    /// Checks the directory and any existing file before SQLite touches them; returns whether the file exists.
    private static func checkLocation(_ path: String) throws(StoreError) -> Bool {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            throw StoreError(
                .directoryMissing, "cannot open store \(path): directory \(directory) does not exist; create it first",
                path: directory)
        }
        guard isDirectory.boolValue else {
            throw StoreError(.directoryMissing, "cannot open store \(path): \(directory) is not a directory", path: directory)
        }
        if let refusal = DurableFiles.refusal(of: directory, W_OK | X_OK) {
            throw StoreError(
                .notWritable,
                "cannot open store \(path): directory \(directory) is not writable (the store needs to create its -wal and -shm files there)",
                path: directory, cause: refusal)
        }
        // A file that exists but is empty (another program opened the path and wrote nothing) is no store yet.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return false }
        if (attributes[.size] as? NSNumber)?.intValue == 0 { return false }
        if let refusal = DurableFiles.refusal(of: path, R_OK | W_OK) {
            throw StoreError(.notWritable, "cannot open store \(path): the file is not readable and writable", path: path, cause: refusal)
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StoreError(.notWritable, "cannot read store file \(path)", path: path)
        }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if !header.isEmpty && header != Data("SQLite format 3\0".utf8) {
            throw StoreError(
                .notADatabase,
                "\(path) is not a SQLite database (its header is not 'SQLite format 3'); it may be corrupt or another kind of file. Move it aside or choose another path",
                path: path)
        }
        return true
    }

    static func openConnection(_ path: String, options: StoreOptions) throws -> Connection {
        let connection = try Connection(path: path)
        try connection.setBusyTimeout(milliseconds: options.busyTimeoutMilliseconds)
        // A store built with a rollback journal stays in WAL mode once its build switched it there.
        let journal = try options.journal == .wal || connection.scalar("PRAGMA journal_mode") == .text("wal") ? "wal" : "truncate"
        guard case .text(let mode)? = try connection.scalar("PRAGMA journal_mode = \(journal)"), mode.lowercased() == journal else {
            throw StoreError(.sqlite, "could not switch \(path) to journal mode \(journal)", path: path)
        }
        // Recursive triggers make a REPLACE fire the delete trigger of each row it deletes, so this
        // connection needs none of the displacement triggers that catch those rows for other programs.
        try connection.ignoreColumnReads(inTriggers: SchemaSQL.isDisplacementTrigger)
        try connection.execute(
            """
            PRAGMA synchronous = \(options.synchronous(wal: journal == "wal"));
            PRAGMA foreign_keys = ON;
            PRAGMA recursive_triggers = ON;
            PRAGMA cache_size = -\(options.cacheKibibytes);
            PRAGMA mmap_size = \(options.mmapBytes);
            """)
        return connection
    }

    private static func removeFiles(of path: String) {
        for suffix in ["", "-wal", "-shm", "-journal", "-writers"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }

    /// SQLite failures become store errors that say what was being done; a caller's own errors pass through.
    static func storeError(_ error: any Error, path: String, doing action: String) -> any Error {
        mapped(error, path: path, doing: action) ?? error
    }

    static func mapped(_ error: any Error, path: String, doing action: String) -> StoreError? {
        switch error {
        case let error as StoreError:
            return error
        case let error as SQLiteError:
            if error.isNotADatabase {
                return StoreError(
                    .notADatabase,
                    "\(action): \(path) is not a usable SQLite database (it is corrupt or not a database); move it aside or restore it from a backup",
                    path: path, cause: error)
            }
            if error.isConstraint, error.message.contains(retiredMessage) {
                return StoreError(.retired, "\(action) was refused: \(error.message)", path: path, cause: error)
            }
            if error.isConstraint {
                return StoreError(.constraint, "\(action) was refused: \(error.message)", path: path, cause: error)
            }
            return StoreError.wrapping(error, path: path, doing: action)
        default:
            return nil
        }
    }
}
