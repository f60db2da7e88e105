import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

/// What ``SyncLedger/writeBaseline(account:emit:)`` wrote.
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
    /// Parts of other nodes' transactions are kept for a newer schema (``SyncLedger/applyKeptChanges(limits:)``):
    /// a baseline would claim their segments without those parts. Nodes on that schema write baselines.
    case keptForNewerSchema(Int)

    package var description: String {
        switch self {
        case .segmentInProgress(let node): return "a segment of node \(node) is applied only in part"
        case .loadInProgress: return "a baseline is being loaded"
        case .empty: return "the store holds no history"
        case .keptForNewerSchema(let count):
            return "\(count) transactions of other nodes are kept in part for a newer schema, which a baseline of this store would leave out"
        }
    }
}

extension SyncLedger {
    /// The store's frontier: the last sequence applied from each node, and this node's last exported one.
    package func frontier() throws -> Frontier {
        try store.reading { try BaselineWriter.frontier(connection: $0, node: store.node) }
    }

    /// Writes a baseline of the merged state at the store's frontier (``BaselineWriter``).
    package func writeBaseline(account: String, emit: ([UInt8]) throws -> Void) throws -> WrittenBaseline {
        try BaselineWriter(store: store).write(account: account, emit: emit)
    }
}

/// Writes a baseline of a store (`docs/retention.md`): the merged state at the store's frontier.
struct BaselineWriter {
    let store: Store

    /// The frontier as `connection` sees it: the last sequence applied from each node, and `node`'s last
    /// exported one.
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
    func write(account: String, emit: ([UInt8]) throws -> Void) throws -> WrittenBaseline {
        // Refusals are found on the store's reader first: a store that keeps refusing (a load or a segment
        // in progress) does not open a connection of its own every round to say so.
        if case .failure(let refusal) = try store.reading({ try Self.baselineFrontier($0, node: store.node) }) { throw refusal }
        let connection = try Store.openConnection(store.path, options: store.options)
        try connection.execute("PRAGMA query_only = 1")
        try connection.execute("BEGIN DEFERRED")
        defer { try? connection.execute("ROLLBACK") }
        // Again inside the read transaction the baseline is written from: the state may have moved since.
        let frontier = try Self.baselineFrontier(connection, node: store.node).get()
        let historyToken = try connection.int64("SELECT ifnull(max(seq), 0) FROM _ls_log WHERE kind = 0") ?? 0
        let nodes = try NodeTable(connection: connection)
        let header = BaselineHeader(schemaVersion: store.schema.version, account: account, frontier: frontier)
        let encoder = try BaselineEncoder(header: header)
        var sinceEmit = 0
        // In the order of the names rows carry in the baseline, the log's: a renamed entity keeps its first name.
        for info in store.catalog.byName.values.sorted(by: { $0.entity.logName < $1.entity.logName }) {
            try forEachState(of: info, connection: connection, nodes: nodes) { key, state in
                try encoder.append(store.changeRules.names.log(BaselineRow(key: RowKey(info.entity.name, key), state: state)))
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
        if let kept = try connection.int64("SELECT count(*) FROM _ls_kept"), kept > 0 { return .failure(.keptForNewerSchema(Int(kept))) }
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
}
