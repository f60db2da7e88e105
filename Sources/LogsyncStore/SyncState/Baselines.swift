import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

/// Baselines in the store (`docs/retention.md`): writing the merged state at the store's frontier, and
/// merging a baseline's states into the store (bootstrap).
///
/// What the store keeps about them in `_ls_meta`: `covered:<node>`, the last sequence of `<node>` a loaded
/// baseline included (its segments up to there may be gone, and the ones still around were never applied
/// here one by one); `baseline_loading`, set while a baseline's rows are merged over several transactions
/// (the state is then not that of any frontier, so no baseline is written until the load ends).
extension Store {
    /// What ``writeBaseline(account:emit:)`` wrote.
    package struct WrittenBaseline: Sendable {
        package var header: BaselineHeader
        package var rows: UInt64
        package var bytes: UInt64
        /// The newest history transaction the baseline reflects: local history up to it may be purged once
        /// every active node has applied the baseline's frontier.
        package var historyToken: Int64
    }

    /// Why no baseline can be written now.
    package enum BaselineRefusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// A segment is applied only in part (an import stopped between batches): the frontier would fall
        /// inside it.
        case segmentInProgress(NodeID)
        /// A baseline's rows are being merged.
        case loadInProgress
        /// Nothing was ever written or applied.
        case empty

        package var description: String {
            switch self {
            case .segmentInProgress(let node): return "a segment of node \(node) is applied only in part"
            case .loadInProgress: return "a baseline is being loaded"
            case .empty: return "the store holds no history"
            }
        }
    }

    /// The store's frontier: the last sequence applied from each node, and this node's last exported one.
    package func frontier() throws -> Frontier {
        try reading { try Self.frontier(connection: $0, node: node) }
    }

    static func frontier(connection: Connection, node: NodeID) throws -> Frontier {
        var frontier = Frontier()
        for row in try connection.rows("SELECT node, last_seq FROM _ls_cursor") {
            if case .text(let origin) = row[0], case .integer(let last) = row[1] { frontier[NodeID(origin)] = UInt64(last) }
        }
        frontier[node] = UInt64(try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_seq'") ?? 0)
        return frontier
    }

    /// Writes a baseline of the merged state at the store's frontier, as it is now: every row state in key
    /// order, handed to `emit` in chunks as it is encoded. Reads on a connection of its own inside one read
    /// transaction, so writers go on meanwhile and the rows and the frontier agree. Memory holds a row and
    /// a chunk.
    package func writeBaseline(account: String, emit: ([UInt8]) throws -> Void) throws -> WrittenBaseline {
        // Refusals are found on the store's reader first: a store that keeps refusing (a load or a segment
        // in progress) does not open a connection of its own every round to say so.
        if case .failure(let refusal) = try reading({ try Self.baselineFrontier($0, node: node) }) { throw refusal }
        let connection = try Self.openConnection(path, options: options)
        try connection.execute("PRAGMA query_only = 1")
        try connection.execute("BEGIN DEFERRED")
        defer { try? connection.execute("ROLLBACK") }
        // Again inside the read transaction the baseline is written from: the state may have moved since.
        let frontier = try Self.baselineFrontier(connection, node: node).get()
        let historyToken = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log WHERE kind = 0") ?? 0
        let nodes = try NodeTable(connection: connection)
        let header = BaselineHeader(schemaVersion: schema.version, account: account, frontier: frontier)
        let encoder = try BaselineEncoder(header: header)
        var sinceEmit = 0
        for info in catalog.byName.values.sorted(by: { $0.entity.name < $1.entity.name }) {
            try forEachState(of: info, connection: connection, nodes: nodes) { key, state in
                try encoder.append(BaselineRow(key: RowKey(info.entity.name, key), state: state))
                sinceEmit += 1
                if sinceEmit >= 4_096 {
                    sinceEmit = 0
                    let chunk = encoder.takeOutput()
                    if !chunk.isEmpty { try emit(chunk) }
                }
            }
        }
        let head = encoder.takeOutput()
        if !head.isEmpty { try emit(head) }
        try emit(try encoder.finish())
        return WrittenBaseline(header: header, rows: encoder.rowCount, bytes: encoder.byteCount, historyToken: historyToken)
    }

    /// The frontier a baseline written from what `connection` sees would have, or why none can be written.
    private static func baselineFrontier(_ connection: Connection, node: NodeID) throws -> Result<Frontier, BaselineRefusal> {
        if try connection.int64("SELECT 1 FROM _ls_meta WHERE key = 'baseline_loading'") != nil { return .failure(.loadInProgress) }
        if case .text(let partial)? = try connection.rows(
            """
            SELECT c.node FROM _ls_cursor c JOIN _ls_segment s ON s.node = c.node
            WHERE s.first_seq <= c.last_seq AND c.last_seq < s.last_seq LIMIT 1
            """
        ).first?.first {
            return .failure(.segmentInProgress(NodeID(partial)))
        }
        let frontier = try frontier(connection: connection, node: node)
        return frontier.transactionCount > 0 ? .success(frontier) : .failure(.empty)
    }

    /// Every state of `info`'s rows in key order: those in `_ls_row` and those in `_ls_live` (found
    /// through the table's rows), merged when a key has both.
    private func forEachState(
        of info: Catalog.EntityInfo, connection: Connection, nodes: NodeTable, _ body: (DatabaseValue, RowState) throws -> Void
    ) throws {
        let stored = try connection.prepare("SELECT pk, cl, state FROM _ls_row WHERE entity = ? ORDER BY pk")
        try stored.bind(info.id, at: 1)
        let table = SchemaSQL.quote(info.entity.name)
        let key = SchemaSQL.quote(info.entity.primaryKey?.name ?? "id")
        let live = try connection.prepare(
            "SELECT t.\(key), l.cl, l.state FROM \(table) t JOIN _ls_live l ON l.id = \(SchemaSQL.liveID(entity: "?1", rowID: "t.rowid")) AND l.pk = t.\(key) ORDER BY t.\(key)")
        try live.bind(info.id, at: 1)
        func next(_ statement: Statement) throws -> (DatabaseValue, RowState)? {
            guard try statement.step() else { return nil }
            guard let state = try RowStateCoding.decode(statement, at: 1, info: info, nodes: nodes) else {
                throw RowStateCoding.corrupt("a state that is not a blob")
            }
            return (statement.value(at: 0), state)
        }
        var a = try next(stored)
        var b = try next(live)
        while a != nil || b != nil {
            if let (keyA, stateA) = a, let (keyB, stateB) = b {
                let order = keyA.sqliteOrder(comparedTo: keyB)
                if order < 0 {
                    try body(keyA, stateA)
                    a = try next(stored)
                } else if order > 0 {
                    try body(keyB, stateB)
                    b = try next(live)
                } else {
                    var merged = stateA
                    merged.merge(stateB)
                    try body(keyA, merged)
                    a = try next(stored)
                    b = try next(live)
                }
            } else if let (keyA, stateA) = a {
                try body(keyA, stateA)
                a = try next(stored)
            } else if let (keyB, stateB) = b {
                try body(keyB, stateB)
                b = try next(live)
            }
        }
    }

    /// What a baseline load did.
    package struct BaselineLoad: Sendable {
        package var rows = 0
        package var batches = 0
        /// Rows written as prepared first inserts (``BaselineInserts``).
        package var prepared = 0
    }

    /// Merges a baseline's rows into the store, joining each with the row's state here (merging is a join,
    /// so what this store has applied and unexported local changes all stay), re-projects them, and moves
    /// the cursors up to the baseline's frontier: afterwards the store holds what it held plus everything
    /// the frontier includes. Local history is folded into the outbox first in every batch, as imports
    /// do. Batches of `batchRows` rows, fewer once they took `batchBytes` in the baseline (by default
    /// ``baselineBatchBytes`` in a store with a write-ahead log, no bound with a rollback journal), each
    /// one SQLite transaction, projected every `chunkRows` rows, and decoded on another thread `aheadRows`
    /// at a time (fewer when they took `aheadBytes` in the baseline); a crash between batches leaves
    /// `baseline_loading` set, and loading the same (or any covering) baseline again finishes the job.
    ///
    /// With `preparesInserts`, the decoding thread prepares rows the merge would simply insert
    /// (``BaselineInserts``), which are written `runRows` at a time with one statement where they can be.
    ///
    /// The caller has checked the baseline's bytes (``BaselineDecoder/checkBytes(limits:source:)``); rows
    /// are decoded as they are merged, and a malformed one ends the load with an error (its batch rolls
    /// back). The trailer is checked before the last batch moves the cursors.
    package func loadBaseline(
        _ decoder: BaselineDecoder, account: String, maximumChanges: Int = 2_000, limits: SegmentLimits = .default,
        batchRows: Int = 20_000, batchBytes: UInt64? = nil, chunkRows: Int = 4_096, aheadRows: Int = BaselineRowsAhead.chunkRows,
        aheadBytes: UInt64 = BaselineRowsAhead.chunkBytes, preparesInserts: Bool = true, runRows: Int = BaselineInserts.runLength,
        isCancelled: () -> Bool = { false },
        progress: (BaselineLoad) -> Void = { _ in }
    ) throws -> BaselineLoad {
        let header = decoder.header
        guard header.account == account else {
            throw StoreError(.schema, "the baseline belongs to account '\(header.account)', not '\(account)'", path: path)
        }
        guard header.schemaVersion <= schema.version else {
            throw StoreError(
                .schema, "the baseline was written with schema version \(header.schemaVersion), newer than this store's \(schema.version): it is kept and loaded once this node's app registers that schema",
                path: path)
        }
        let exported = try exportedSequence()
        guard header.frontier[node] <= exported else {
            throw StoreError(
                .schema,
                "the baseline includes sequences of this node up to \(header.frontier[node]), but this store exported only up to \(exported): another machine uses this node's id, or the store was restored from an older copy",
                path: path)
        }
        var load = BaselineLoad()
        let rows = BaselineRowsAhead(
            decoder, chunkRows: max(aheadRows, 1), chunkBytes: aheadBytes,
            preparer: preparesInserts ? BaselineInsertPreparer(catalog: catalog, published: knownNodeIndexes) : nil)
        defer { rows.finish() }
        var finished = false
        while !finished {
            if isCancelled() { throw CancellationError() }
            // As for imports: with no local writer to compete with, the batch's pages are copied into the
            // database file on the checkpoint thread while the next batch is merged.
            let localWriters = (try? localHistoryWaits()) ?? false
            finished = try syncTransaction(checkpointInBackground: !localWriters) { state, _ in
                try foldIntoOutbox(&state, account: account, maximumChanges: maximumChanges, limits: limits)
                let connection = state.connection
                let maximumBytes = try batchBytes ?? (connection.scalar("PRAGMA journal_mode") == .text("wal") ? Self.baselineBatchBytes : .max)
                try connection.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('baseline_loading', ?)", [.text(header.frontier.description)])
                let before = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log") ?? 0
                try captureMergeHistoryDirectly(&state)
                // The indexes of the nodes whose clocks the baseline holds (every one is in its frontier),
                // for the decoding thread to encode prepared rows' states with.
                if preparesInserts {
                    for (origin, _) in header.frontier.sorted { try publishNodeIndex(&state.nodes, of: origin, connection: connection) }
                }
                let writer = MergeWriter(state: state, catalog: catalog)
                // Inserts a batch that failed had packed are not recorded: its transaction rolled back.
                writer.statements.packedInserts = nil
                // The decoder hands out rows in strictly increasing key order, so each key comes once, and
                // rows are projected every `chunkRows` rows rather than once per batch: memory holds a
                // chunk's states, whatever the batch's size. Projecting part of a batch is what the end of
                // a batch does anyway: every row whose projection depends on a changed row is projected
                // again with it.
                var merged = MergedRows(capacity: min(batchRows, chunkRows), keysAreDistinct: true)
                var entitiesWithStates: [Int64: Bool] = [:]
                var newest = HLCTimestamp.zero
                var count = 0
                var end = false
                let startBytes = rows.bytesHandedOut
                // Prepared rows (``BaselineInserts``) are written in runs of up to `runRows` rows (or one by
                // one), the others merged into `merged` and written when it is projected. So that rows are
                // written in the baseline's order, a run is written before a merged row, and `merged` is
                // projected before a prepared row is written. Prepared inserts packed in history are
                // recorded before anything else writes history or projects, and every `chunkRows` rows.
                var inserts = BaselineInserts()
                var insertsChunk = -1
                var insertsMatch = false
                var run: [Int] = []
                var runLength = 1
                // Once a run found a row in the table (a store holding part of the history), the batch's
                // prepared rows are written one by one: a failed run has inserted its rows before it fails.
                // Once several prepared rows had a state after all, the batch's prepared rows are merged as
                // the others: each would be tried, decoded and projected on its own.
                var runsFail = false
                var insertFailures = 0
                var packed = 0
                var prepared = 0
                func recordPrepared() throws {
                    if packed > 0 { try writer.recordPackedInserts() }
                    packed = 0
                }
                func project() throws {
                    try writer.refresh(merged, nodes: &state.nodes)
                    merged.removeAll()
                }
                func merge(_ row: BaselineRow) throws {
                    try recordPrepared()
                    guard let info = catalog.byName[row.key.entity] else {
                        throw StoreError(.schema, "the baseline holds rows of entity '\(row.key.entity)', which this store's schema does not declare", path: path)
                    }
                    if let deleted = row.state.deletedAt { newest = max(newest, deleted.timestamp) }
                    for register in row.state.columns.values { newest = max(newest, register.clock.timestamp) }
                    try mergeBaselineRow(row, info: info, into: &merged, writer: writer, nodes: &state.nodes, entitiesWithStates: &entitiesWithStates)
                    if merged.rows.count >= chunkRows { try project() }
                }
                func wrote(_ index: Int) throws {
                    newest = max(newest, inserts.inserts[index].newest)
                    prepared += 1
                    packed += 1
                    if packed >= chunkRows { try recordPrepared() }
                }
                /// Writes prepared row `index` on its own, or merges it when it has a state after all.
                func writeOne(_ index: Int) throws {
                    if !merged.rows.isEmpty { try project() }
                    if try writer.insertPrepared(index, of: inserts, nodes: &state.nodes, entitiesWithStates: &entitiesWithStates) {
                        try wrote(index)
                    } else {
                        insertFailures += 1
                        try merge(try inserts.row(index, nodes: state.nodes))
                    }
                }
                /// Writes the prepared rows of `run`, which arrived one after another with nothing merged
                /// since: all at once when they are a whole run, else (or when one is in the table) one by one.
                func writeRun() throws {
                    guard !run.isEmpty else { return }
                    defer { run.removeAll(keepingCapacity: true) }
                    if run.count == runLength, runLength > 1 {
                        if try writer.insertPreparedRun(run[...], of: inserts, nodes: &state.nodes) {
                            for index in run { try wrote(index) }
                            return
                        }
                        runsFail = true
                    }
                    for index in run { try writeOne(index) }
                }
                // At least a row per batch, whatever the bounds: an empty batch would never end the load.
                while count < max(batchRows, 1), count == 0 || rows.bytesHandedOut - startBytes < maximumBytes {
                    guard let item = try rows.next() else {
                        end = true
                        break
                    }
                    count += 1
                    switch item {
                    case .row(let row):
                        try writeRun()
                        try merge(row)
                    case .prepared(let index):
                        if insertsChunk != rows.chunkNumber {
                            try writeRun()
                            inserts = rows.inserts
                            insertsChunk = rows.chunkNumber
                            insertsMatch = inserts.matches(state.nodes)
                        }
                        guard insertsMatch, insertFailures < 8 else {
                            try writeRun()
                            try merge(try inserts.row(index, nodes: insertsMatch ? state.nodes : NodeTable(indexes: inserts.nodeIndexes)))
                            continue
                        }
                        let info = inserts.infos[inserts.inserts[index].entity]
                        if try writer.entityHasStoredStates(info, entitiesWithStates: &entitiesWithStates) {
                            // Each row's state is looked up first: one at a time.
                            try writeRun()
                            try writeOne(index)
                            continue
                        }
                        if let first = run.first, inserts.inserts[first].entity != inserts.inserts[index].entity { try writeRun() }
                        if run.isEmpty {
                            if !merged.rows.isEmpty { try project() }
                            // No more rows than SQLite takes parameters for (999 at the least, whatever its build).
                            runLength = runsFail ? 1 : max(1, min(runRows, 999 / (info.columns.count + 1)))
                        }
                        run.append(index)
                        if run.count >= runLength { try writeRun() }
                    }
                }
                try writeRun()
                try recordPrepared()
                try writer.refresh(merged, nodes: &state.nodes)
                _ = try appendMarker(
                    Marker(origin: Origin.mergeStorageValue, timestamp: newest == .zero ? nil : newest), ifLogGrewPast: before, state: &state)
                if end { try finishLoad(header.frontier, connection: connection) }
                try skipOwnMergeHistory(&state)
                load.rows += count
                load.prepared += prepared
                load.batches += 1
                return end
            }
            progress(load)
        }
        return load
    }

    /// How many bytes of a baseline's rows (inflated, as ``BaselineDecoder/rowBytes`` counts them) a batch
    /// of ``loadBaseline(_:account:maximumChanges:limits:batchRows:batchBytes:chunkRows:aheadRows:aheadBytes:preparesInserts:runRows:isCancelled:progress:)``
    /// takes in a store with a write-ahead log: it ends once its rows took this many, the row that crosses
    /// the bound included. A batch whose pages outgrow the page cache spills
    /// them into the WAL before it commits, and SQLite then reads every frame the transaction wrote back
    /// to rewrite its checksum. 2 MiB is about 23,000 `Note` rows of the benchmarks, whose pages (about
    /// 7 MiB: the table, its key index, row states and history) stay well inside the default 32 MiB
    /// cache. A baseline's keys arrive in order, so small batches do not write index pages again as an
    /// import's random keys would. A 1M-row load in a rebuild's batches of 250,000 rows made 361,600
    /// `pwrite` and 205,700 `pread` calls; bounded by bytes, 284,000 and 125,100, and it was faster in 6
    /// of 7 alternating runs, by 8 % on average (`docs/BENCHMARKS-history.md`, bootstrap). A rollback journal
    /// has no such rereading, and its commits each sync twice, so a store being built keeps the caller's
    /// batches (measured in `docs/BENCHMARKS-history.md`, bootstrap).
    package static let baselineBatchBytes: UInt64 = 2 << 20

    /// Merges one baseline row into its row's state, as a remote change is merged (`RemoteApply.swift`).
    /// Its key is not among those `merged` holds (a baseline's keys strictly increase).
    private func mergeBaselineRow(
        _ row: BaselineRow, info: Catalog.EntityInfo, into merged: inout MergedRows, writer: MergeWriter, nodes: inout NodeTable,
        entitiesWithStates: inout [Int64: Bool]
    ) throws {
        let key = row.key
        // Keep only registers of columns this schema knows; an older baseline lacks newer columns, which
        // then show their defaults, as for a row whose insert has not arrived.
        var incoming = row.state
        if incoming.columns.keys.contains(where: { info.bit(of: $0) == nil }) {
            incoming.columns = incoming.columns.filter { info.bit(of: $0.key) != nil }
        }
        let isFresh = incoming.causalLength == 1 && incoming.deletedAt == nil
        // A row in the table already (its state in `_ls_live`) makes the projection's insert fail, which
        // then merges the two states, as for remote inserts.
        if info.isIsolated, isFresh, try !writer.hasStoredState(key.primaryKey, info: info, entitiesWithStates: &entitiesWithStates) {
            merged.record(key, info: info, state: incoming, at: nil, isNew: true, structural: true, savesWithRow: true)
            return
        }
        let previous = try writer.loadState(key.primaryKey, info: info, nodes: nodes)
        var next = previous ?? RowState()
        next.merge(incoming)
        guard next != previous else { return }
        try writer.saveState(next, primaryKey: key.primaryKey, info: info, previous: previous, nodes: &nodes)
        merged.record(key, info: info, state: next, at: nil, isNew: previous == nil, structural: writer.isStructural(info, from: previous, to: next))
    }

    /// The last batch of a load: cursors up to the frontier, and what it covers recorded.
    private func finishLoad(_ frontier: Frontier, connection: Connection) throws {
        let now = Int64(WallClock.milliseconds())
        for (origin, sequence) in frontier.sorted where origin != node {
            let value = DatabaseValue.text(origin.rawValue)
            let current = UInt64(try connection.int64("SELECT last_seq FROM _ls_cursor WHERE node = ?", [value]) ?? 0)
            if sequence > current {
                try connection.execute(
                    "INSERT OR REPLACE INTO _ls_cursor(node, last_seq, last_hlc, applied_at) VALUES (?, ?, ifnull((SELECT last_hlc FROM _ls_cursor WHERE node = ?1), 0), ?)",
                    [value, .integer(Int64(sequence)), .integer(now)])
            }
            try connection.execute(
                "INSERT INTO _ls_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
                [.text("covered:" + origin.rawValue), .integer(Int64(sequence))])
        }
        try connection.execute("DELETE FROM _ls_meta WHERE key = 'baseline_loading'")
    }

    /// Whether a baseline load was interrupted (its rows are merged in part).
    package func baselineLoadInProgress() throws -> Bool {
        try reading { try $0.int64("SELECT 1 FROM _ls_meta WHERE key = 'baseline_loading'") != nil }
    }

    /// The last sequence of `node` that a loaded baseline included: segments up to there were never
    /// applied here one by one, so they have no checksum to compare with.
    package func coveredByBaseline(_ node: NodeID) throws -> UInt64 {
        try reading { UInt64(try $0.int64("SELECT value FROM _ls_meta WHERE key = ?", [.text("covered:" + node.rawValue)]) ?? 0) }
    }

    // MARK: Pruning

    /// This node's published segments up to `sequence` that are not yet pruned, oldest first.
    package func publishedSegments(through sequence: UInt64) throws -> [(firstSequence: UInt64, lastSequence: UInt64)] {
        try reading { connection in
            try connection.rows(
                "SELECT first_seq, last_seq FROM _ls_outbox WHERE shipped = 1 AND last_seq <= ? ORDER BY first_seq", [.integer(Int64(sequence))]
            ).compactMap { row in
                guard case .integer(let first) = row[0], case .integer(let last) = row[1] else { return nil }
                return (UInt64(first), UInt64(last))
            }
        }
    }

    /// How many of this node's published segments are not pruned.
    package func retainedSegmentCount() throws -> Int {
        try reading { Int(try $0.int64("SELECT count(*) FROM _ls_outbox WHERE shipped = 1") ?? 0) }
    }

    /// This node's segments up to here were deleted from the transport.
    package func prunedSequence() throws -> UInt64 {
        try reading { UInt64(try $0.int64("SELECT value FROM _ls_meta WHERE key = 'pruned_seq'") ?? 0) }
    }

    /// Records that this node's segment ending at `lastSequence` is deleted from the transport: its outbox
    /// row goes, and the pruned mark moves up.
    package func recordPruned(firstSequence: UInt64, lastSequence: UInt64) throws {
        _ = try perform(marker: Marker()) { tx in
            try tx.execute("DELETE FROM _ls_outbox WHERE first_seq = ? AND shipped = 1", [.integer(Int64(firstSequence))])
            try tx.execute(
                "INSERT INTO _ls_meta(key, value) VALUES ('pruned_seq', ?) ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
                [.integer(Int64(lastSequence))])
        }
    }

    /// Forgets the checksums of `node`'s applied segments up to `sequence`: that node deleted them, so
    /// they cannot come back to be checked.
    package func forgetAppliedSegments(of node: NodeID, through sequence: UInt64) throws {
        _ = try perform(marker: Marker()) { tx in
            try tx.execute("DELETE FROM _ls_segment WHERE node = ? AND last_seq <= ?", [.text(node.rawValue), .integer(Int64(sequence))])
        }
    }

    /// Remembers the history token of this node's newest published baseline and its frontier's digest.
    package func recordOwnBaseline(digest: UInt64, historyToken: Int64) throws {
        _ = try perform(marker: Marker()) { tx in
            try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('own_baseline', ?)", [.text(String(digest, radix: 16))])
            try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('own_baseline_token', ?)", [.integer(historyToken)])
        }
    }

    /// The history token recorded with this node's baseline of frontier digest `digest`, if that is the newest.
    package func ownBaselineToken(digest: UInt64) throws -> Int64? {
        try reading { connection in
            guard case .text(let recorded)? = try connection.rows("SELECT value FROM _ls_meta WHERE key = 'own_baseline'").first?.first,
                recorded == String(digest, radix: 16)
            else { return nil }
            return try connection.int64("SELECT value FROM _ls_meta WHERE key = 'own_baseline_token'")
        }
    }
}

/// A baseline's rows, decoded a chunk ahead on another thread while the loader merges the chunk before:
/// inflating and parsing is about a quarter of a load's work, and runs on the second core instead of
/// adding to the time the write lock is held (as imports decode the next segment, `Prefetch`).
///
/// The decoder is used by one chunk's work at a time, and not at all once ``finish()`` returned. A
/// decoding error reaches the loader with the chunk that holds it, so the rows before it in that chunk
/// are not merged: the batch fails, and its transaction rolls back, either way.
final class BaselineRowsAhead {
    /// Rows per chunk by default: two chunks (the one merged, the one decoded) are in memory at a time.
    /// Each chunk is one hand-over to the decoding thread and one wait for it: with 1,024 rows a load of
    /// 1M rows took 28 % longer on average on a 2-core VM (8 ABBA pairs, docs/BENCHMARKS-history.md); 32,768 was
    /// no faster than 8,192 and held 30 MB more.
    static let chunkRows = 8_192
    /// A chunk also ends once its rows took this many bytes in the baseline, by default: rows may hold
    /// large values. (A Note row takes about 90.)
    static let chunkBytes: UInt64 = 8 << 20

    private let chunkRows: Int
    private let chunkBytes: UInt64

    /// A row as ``next()`` hands it out: decoded, or prepared as a first insert (an index in
    /// ``inserts``).
    enum Item {
        case row(BaselineRow)
        case prepared(Int)
    }

    /// Hands the decoder to one chunk's work at a time: never two at once, and not after ``finish()``.
    private final class Source: @unchecked Sendable {
        let decoder: BaselineDecoder
        let preparer: BaselineInsertPreparer?
        init(_ decoder: BaselineDecoder, preparer: BaselineInsertPreparer?) {
            self.decoder = decoder
            self.preparer = preparer
        }

        /// Up to `count` rows, fewer once they took `bytes`, the baseline's row bytes up to the end of
        /// each, and whether they are the last. Rows the preparer takes are handed out prepared.
        func chunk(_ count: Int, bytes: UInt64) -> Result<Chunk, any Error> {
            Result {
                var chunk = Chunk()
                chunk.items.reserveCapacity(min(count, BaselineRowsAhead.chunkRows))
                chunk.ends.reserveCapacity(min(count, BaselineRowsAhead.chunkRows))
                if let preparer { chunk.inserts = preparer.start() }
                var scratch: [UInt8] = []
                let end = decoder.rowBytes + bytes
                while chunk.items.count < count, decoder.rowBytes < end {
                    guard let row = try decoder.next() else {
                        chunk.last = true
                        return chunk
                    }
                    if let preparer, preparer.prepare(row, into: &chunk.inserts, scratch: &scratch) {
                        chunk.items.append(.prepared(chunk.inserts.inserts.count - 1))
                    } else {
                        chunk.items.append(.row(row))
                    }
                    chunk.ends.append(decoder.rowBytes)
                }
                return chunk
            }
        }
    }

    private struct Chunk {
        var items: [Item] = []
        /// Per row, ``BaselineDecoder/rowBytes`` once it was decoded.
        var ends: [UInt64] = []
        var inserts = BaselineInserts()
        var last = false
    }

    private let source: Source
    private var ahead: Prefetch<Result<Chunk, any Error>>?
    private var current = Chunk()
    private var index = 0
    private var ended = false
    /// The baseline's row bytes up to the end of the last row ``next()`` returned.
    private(set) var bytesHandedOut: UInt64 = 0
    /// The prepared rows of the chunk the last row ``next()`` returned is in.
    var inserts: BaselineInserts { current.inserts }
    /// Counts the chunks ``next()`` has taken rows from: a new number, new ``inserts``.
    private(set) var chunkNumber = 0

    /// `preparer`: prepares the rows it can as first inserts (``BaselineInserts``); without one, every
    /// row is handed out decoded.
    init(_ decoder: BaselineDecoder, chunkRows: Int, chunkBytes: UInt64, preparer: BaselineInsertPreparer? = nil) {
        source = Source(decoder, preparer: preparer)
        self.chunkRows = chunkRows
        self.chunkBytes = chunkBytes
        ahead = start()
    }

    private func start() -> Prefetch<Result<Chunk, any Error>> {
        let (source, count, bytes) = (source, chunkRows, chunkBytes)
        return Prefetch { source.chunk(count, bytes: bytes) }
    }

    /// The next row, or nil after the last.
    func next() throws -> Item? {
        if index == current.items.count {
            guard !ended, let pending = ahead else { return nil }
            ahead = nil
            // A failed chunk ends the rows, as the last one does. Any other holds at least one row.
            ended = true
            current = try pending.value().get()
            chunkNumber += 1
            index = 0
            if !current.last {
                ended = false
                ahead = start()
            }
            if current.items.isEmpty { return nil }
        }
        defer { index += 1 }
        bytesHandedOut = current.ends[index]
        return current.items[index]
    }

    /// Waits for the chunk being decoded, if any: afterwards nothing uses the decoder.
    func finish() {
        _ = ahead?.value()
        ahead = nil
    }
}
