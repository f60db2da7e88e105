import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

/// Loading a baseline into the store (`docs/retention.md`, bootstrap): merging its states into the store's.
///
/// What the store keeps about them in `_ls_meta`: `covered:<node>`, the last sequence of `<node>` a loaded
/// baseline included (its segments up to there may be gone, and the ones still around were never applied
/// here one by one); `baseline_loading`, set while a baseline's rows are merged over several transactions
/// (the state is then not that of any frontier, so no baseline is written until the load ends).
extension SyncLedger {
    /// Merges a baseline's rows into the store, joining each with the row's state here (merging is a join,
    /// so what this store has applied and unexported local changes all stay), re-projects them, and moves
    /// the cursors up to the baseline's frontier: afterwards the store holds what it held plus everything
    /// the frontier includes. Local history is folded into the outbox first in every batch, as imports
    /// do. Batches of `options.batchRows` rows, fewer once they took `options.batchBytes` in the baseline
    /// (by default ``BaselineLoadOptions/walBatchBytes`` in a store with a write-ahead log, no bound with a
    /// rollback journal), each one SQLite transaction, projected every `options.chunkRows` rows, and decoded
    /// on another thread `options.aheadRows` at a time (fewer when they took `options.aheadBytes` in the
    /// baseline); a crash between batches leaves `baseline_loading` set, and loading the same (or any
    /// covering) baseline again finishes the job.
    ///
    /// With `options.preparesInserts`, the decoding thread prepares rows the merge would simply insert
    /// (``BaselineInserts``), which are written `options.runRows` at a time with one statement where they
    /// can be.
    ///
    /// The caller has checked the baseline's bytes (``BaselineDecoder/checkBytes(limits:source:)``); rows
    /// are decoded as they are merged, and a malformed one ends the load with an error (its batch rolls
    /// back). The trailer is checked before the last batch moves the cursors.
    package func loadBaseline(
        _ decoder: BaselineDecoder, account: String, options: BaselineLoadOptions = BaselineLoadOptions(),
        isCancelled: () -> Bool = { false }, progress: (BaselineLoad) -> Void = { _ in }
    ) throws -> BaselineLoad {
        try BaselineLoader(store: store, account: account, options: options).load(decoder, isCancelled: isCancelled, progress: progress)
    }

    /// Whether a baseline load was interrupted (its rows are merged in part).
    package func baselineLoadInProgress() throws -> Bool {
        try store.reading { try $0.int64("SELECT 1 FROM _ls_meta WHERE key = 'baseline_loading'") != nil }
    }

    /// The last sequence of `node` that a loaded baseline included: segments up to there were never
    /// applied here one by one, so they have no checksum to compare with.
    package func coveredByBaseline(_ node: NodeID) throws -> UInt64 {
        try store.reading { UInt64(try $0.int64("SELECT value FROM _ls_meta WHERE key = ?", [.text("covered:" + node.rawValue)]) ?? 0) }
    }
}

/// What a baseline load did.
package struct BaselineLoad: Sendable {
    package var rows = 0
    package var batches = 0
    /// Rows written as prepared first inserts (``BaselineInserts``).
    package var prepared = 0
}

/// How ``SyncLedger/loadBaseline(_:account:options:isCancelled:progress:)`` goes about a load.
package struct BaselineLoadOptions: Sendable {
    /// Local history is folded into the outbox first in every batch, at most this many changes per
    /// segment, within `limits`, as imports do.
    package var maximumChanges: Int
    package var limits: SegmentLimits
    /// Rows per batch (one SQLite transaction), fewer once they took `batchBytes` in the baseline: by
    /// default (nil) ``walBatchBytes`` in a store with a write-ahead log, no bound with a rollback journal.
    package var batchRows: Int
    package var batchBytes: UInt64?
    /// Rows merged between two projections.
    package var chunkRows: Int
    /// Rows decoded ahead on another thread at a time, fewer when they took `aheadBytes` in the baseline.
    package var aheadRows: Int
    package var aheadBytes: UInt64
    /// Whether the decoding thread prepares rows the merge would simply insert (``BaselineInserts``),
    /// written `runRows` at a time with one statement where they can be.
    package var preparesInserts: Bool
    package var runRows: Int

    package init(
        maximumChanges: Int = 2_000, limits: SegmentLimits = .default, batchRows: Int = 20_000, batchBytes: UInt64? = nil,
        chunkRows: Int = 4_096, aheadRows: Int = BaselineRowsAhead.chunkRows, aheadBytes: UInt64 = BaselineRowsAhead.chunkBytes,
        preparesInserts: Bool = true, runRows: Int = BaselineInserts.runLength
    ) {
        self.maximumChanges = maximumChanges
        self.limits = limits
        self.batchRows = batchRows
        self.batchBytes = batchBytes
        self.chunkRows = chunkRows
        self.aheadRows = aheadRows
        self.aheadBytes = aheadBytes
        self.preparesInserts = preparesInserts
        self.runRows = runRows
    }

    /// How many bytes of a baseline's rows (inflated, as ``BaselineDecoder/rowBytes`` counts them) a batch
    /// of a load takes in a store with a write-ahead log: it ends once its rows took this many, the row
    /// that crosses the bound included. A batch whose pages outgrow the page cache spills them into the
    /// WAL before it commits, and SQLite then reads every frame the transaction wrote back
    /// to rewrite its checksum. 2 MiB is about 23,000 `Note` rows of the benchmarks, whose pages (about
    /// 7 MiB: the table, its key index, row states and history) stay well inside the default 32 MiB
    /// cache. A baseline's keys arrive in order, so small batches do not write index pages again as an
    /// import's random keys would. A 1M-row load in a rebuild's batches of 250,000 rows made 361,600
    /// `pwrite` and 205,700 `pread` calls; bounded by bytes, 284,000 and 125,100, and it was faster in 6
    /// of 7 alternating runs, by 8 % on average (`docs/BENCHMARKS-history.md`, bootstrap). A rollback journal
    /// has no such rereading, and its commits each sync twice, so a store being built keeps the caller's
    /// batches (measured in `docs/BENCHMARKS-history.md`, bootstrap).
    package static let walBatchBytes: UInt64 = 2 << 20
}

/// Merges a baseline's rows into a store (``SyncLedger/loadBaseline(_:account:options:isCancelled:progress:)``).
struct BaselineLoader {
    let store: Store
    let account: String
    let options: BaselineLoadOptions

    func load(_ decoder: BaselineDecoder, isCancelled: () -> Bool, progress: (BaselineLoad) -> Void) throws -> BaselineLoad {
        let header = decoder.header
        guard header.account == account else {
            throw StoreError(.schema, "the baseline belongs to account '\(header.account)', not '\(account)'", path: store.path)
        }
        guard header.schemaVersion <= store.schema.version else {
            throw StoreError(
                .schema, "the baseline was written with schema version \(header.schemaVersion), newer than this store's \(store.schema.version): it is kept and loaded once this node's app registers that schema",
                path: store.path)
        }
        let exported = try store.sync.exportedSequence()
        guard header.frontier[store.node] <= exported else {
            throw StoreError(
                .schema,
                "the baseline includes sequences of this node up to \(header.frontier[store.node]), but this store exported only up to \(exported): another machine uses this node's id, or the store was restored from an older copy",
                path: store.path)
        }
        var load = BaselineLoad()
        let rows = BaselineRowsAhead(
            decoder, chunkRows: max(options.aheadRows, 1), chunkBytes: options.aheadBytes,
            preparer: options.preparesInserts ? BaselineInsertPreparer(catalog: store.catalog, published: store.knownNodeIndexes) : nil,
            names: store.changeRules.names)
        defer { rows.finish() }
        var finished = false
        while !finished {
            if isCancelled() { throw CancellationError() }
            // As for imports: with no local writer to compete with, the batch's pages are copied into the
            // database file on the checkpoint thread while the next batch is merged.
            let localWriters = (try? store.localHistoryWaits()) ?? false
            finished = try store.syncTransaction(checkpointInBackground: !localWriters) { state, _ in
                try mergeBatch(&state, header: header, rows: rows, load: &load)
            }
            progress(load)
        }
        return load
    }

    /// Inside a sync transaction: merges the next batch of `rows` (see ``load(_:isCancelled:progress:)``),
    /// and adds what it did to `load`. Returns whether it was the last.
    private func mergeBatch(
        _ state: inout Store.WriterState, header: BaselineHeader, rows: BaselineRowsAhead, load: inout BaselineLoad
    ) throws -> Bool {
        try store.foldIntoOutbox(&state, account: account, maximumChanges: options.maximumChanges, limits: options.limits)
        let connection = state.connection
        let maximumBytes =
            try options.batchBytes ?? (connection.scalar("PRAGMA journal_mode") == .text("wal") ? BaselineLoadOptions.walBatchBytes : .max)
        try connection.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('baseline_loading', ?)", [.text(header.frontier.description)])
        let before = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log") ?? 0
        try store.captureMergeHistoryDirectly(&state)
        // The indexes of the nodes whose clocks the baseline holds (every one is in its frontier),
        // for the decoding thread to encode prepared rows' states with.
        if options.preparesInserts {
            for (origin, _) in header.frontier.sorted { try store.publishNodeIndex(&state.nodes, of: origin, connection: connection) }
        }
        let writer = MergeWriter(state: state, catalog: store.catalog)
        // Inserts a batch that failed had packed are not recorded: its transaction rolled back.
        writer.statements.packedInserts = nil
        var batch = BaselineBatch(writer: writer, catalog: store.catalog, path: store.path, options: options)
        var count = 0
        var end = false
        let startBytes = rows.bytesHandedOut
        // At least a row per batch, whatever the bounds: an empty batch would never end the load.
        while count < max(options.batchRows, 1), count == 0 || rows.bytesHandedOut - startBytes < maximumBytes {
            guard let item = try rows.next() else {
                end = true
                break
            }
            count += 1
            try batch.add(item, from: rows, nodes: &state.nodes)
        }
        try batch.finish(nodes: &state.nodes)
        let newest = batch.newest
        _ = try store.appendMarker(
            Store.Marker(origin: Origin.mergeStorageValue, timestamp: newest == .zero ? nil : newest), ifLogGrewPast: before, state: &state)
        if end { try finishLoad(header.frontier, connection: connection) }
        try store.skipOwnMergeHistory(&state)
        load.rows += count
        load.prepared += batch.prepared
        load.batches += 1
        return end
    }

    /// The last batch of a load: cursors up to the frontier, and what it covers recorded.
    private func finishLoad(_ frontier: Frontier, connection: Connection) throws {
        let now = Int64(WallClock.milliseconds())
        for (origin, sequence) in frontier.sorted where origin != store.node {
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
}

/// One batch of a baseline load: the rows it merged and not yet projected, and the prepared rows
/// (``BaselineInserts``) it writes.
///
/// The decoder hands out rows in strictly increasing key order, so each key comes once, and rows are
/// projected every `chunkRows` rows rather than once per batch: memory holds a chunk's states, whatever
/// the batch's size. Projecting part of a batch is what the end of a batch does anyway: every row whose
/// projection depends on a changed row is projected again with it.
///
/// Prepared rows are written in runs of up to `runRows` rows (or one by one), the others merged into
/// `merged` and written when it is projected. So that rows are written in the baseline's order, a run is
/// written before a merged row, and `merged` is projected before a prepared row is written. Prepared
/// inserts packed in history are recorded before anything else writes history or projects, and every
/// `chunkRows` rows.
private struct BaselineBatch {
    let writer: MergeWriter
    let catalog: Catalog
    let path: String
    let options: BaselineLoadOptions
    var merged: MergedRows
    var entitiesWithStates: [Int64: Bool] = [:]
    /// The latest clock's timestamp among the rows written.
    var newest = HLCTimestamp.zero
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
    /// Rows written as prepared first inserts.
    var prepared = 0

    init(writer: MergeWriter, catalog: Catalog, path: String, options: BaselineLoadOptions) {
        self.writer = writer
        self.catalog = catalog
        self.path = path
        self.options = options
        merged = MergedRows(capacity: min(options.batchRows, options.chunkRows), keysAreDistinct: true)
    }

    /// Merges or writes the next row `rows` handed out.
    mutating func add(_ item: BaselineRowsAhead.Item, from rows: BaselineRowsAhead, nodes: inout NodeTable) throws {
        switch item {
        case .row(let row):
            try writeRun(nodes: &nodes)
            try merge(row, nodes: &nodes)
        case .prepared(let index):
            if insertsChunk != rows.chunkNumber {
                try writeRun(nodes: &nodes)
                inserts = rows.inserts
                insertsChunk = rows.chunkNumber
                insertsMatch = inserts.matches(nodes)
            }
            guard insertsMatch, insertFailures < 8 else {
                try writeRun(nodes: &nodes)
                let row = try inserts.row(index, nodes: insertsMatch ? nodes : NodeTable(indexes: inserts.nodeIndexes))
                try merge(row, nodes: &nodes)
                return
            }
            let info = inserts.infos[inserts.inserts[index].entity]
            if try writer.entityHasStoredStates(info, entitiesWithStates: &entitiesWithStates) {
                // Each row's state is looked up first: one at a time.
                try writeRun(nodes: &nodes)
                try writeOne(index, nodes: &nodes)
                return
            }
            if let first = run.first, inserts.inserts[first].entity != inserts.inserts[index].entity { try writeRun(nodes: &nodes) }
            if run.isEmpty {
                if !merged.rows.isEmpty { try project(nodes: &nodes) }
                // No more rows than SQLite takes parameters for (999 at the least, whatever its build).
                runLength = runsFail ? 1 : max(1, min(options.runRows, 999 / (info.columns.count + 1)))
            }
            run.append(index)
            if run.count >= runLength { try writeRun(nodes: &nodes) }
        }
    }

    /// Writes what is left: the open run, the record of packed inserts, the merged rows' projection.
    mutating func finish(nodes: inout NodeTable) throws {
        try writeRun(nodes: &nodes)
        try recordPrepared()
        try writer.refresh(merged, nodes: &nodes)
    }

    private mutating func recordPrepared() throws {
        if packed > 0 { try writer.recordPackedInserts() }
        packed = 0
    }

    private mutating func project(nodes: inout NodeTable) throws {
        try writer.refresh(merged, nodes: &nodes)
        merged.removeAll()
    }

    private mutating func merge(_ row: BaselineRow, nodes: inout NodeTable) throws {
        try recordPrepared()
        guard let info = catalog.byName[row.key.entity] else {
            throw StoreError(.schema, "the baseline holds rows of entity '\(row.key.entity)', which this store's schema does not declare", path: path)
        }
        if let deleted = row.state.deletedAt { newest = max(newest, deleted.timestamp) }
        for register in row.state.columns.values { newest = max(newest, register.clock.timestamp) }
        try Self.mergeBaselineRow(row, info: info, into: &merged, writer: writer, nodes: &nodes, entitiesWithStates: &entitiesWithStates)
        if merged.rows.count >= options.chunkRows { try project(nodes: &nodes) }
    }

    private mutating func wrote(_ index: Int) throws {
        newest = max(newest, inserts.inserts[index].newest)
        prepared += 1
        packed += 1
        if packed >= options.chunkRows { try recordPrepared() }
    }

    /// Writes prepared row `index` on its own, or merges it when it has a state after all.
    private mutating func writeOne(_ index: Int, nodes: inout NodeTable) throws {
        if !merged.rows.isEmpty { try project(nodes: &nodes) }
        if try writer.insertPrepared(index, of: inserts, nodes: &nodes, entitiesWithStates: &entitiesWithStates) {
            try wrote(index)
        } else {
            insertFailures += 1
            let row = try inserts.row(index, nodes: nodes)
            try merge(row, nodes: &nodes)
        }
    }

    /// Writes the prepared rows of `run`, which arrived one after another with nothing merged
    /// since: all at once when they are a whole run, else (or when one is in the table) one by one.
    private mutating func writeRun(nodes: inout NodeTable) throws {
        guard !run.isEmpty else { return }
        defer { run.removeAll(keepingCapacity: true) }
        if run.count == runLength, runLength > 1 {
            if try writer.insertPreparedRun(run[...], of: inserts, nodes: &nodes) {
                for index in run { try wrote(index) }
                return
            }
            runsFail = true
        }
        for index in run { try writeOne(index, nodes: &nodes) }
    }

    /// Merges one baseline row into its row's state, as a remote change is merged (`RemoteApply.swift`).
    /// Its key is not among those `merged` holds (a baseline's keys strictly increase).
    private static func mergeBaselineRow(
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
}
