import LogsyncCore
import LogsyncSQLite

/// A baseline's first inserts, prepared on the thread that decodes the baseline (``BaselineRowsAhead``):
/// for each row that the merge would simply insert, its key, its column values and its encoded state,
/// side by side in one buffer per chunk of rows, so that the loader only binds and steps.
///
/// Most rows of a baseline are such rows: a row of an isolated entity that nothing refers to, in its
/// first life (causal length 1, never deleted), every register for a column this store knows, and
/// written by nodes whose `_ls_node` index the writer has published. Merging one as a ``BaselineRow``
/// built a state, looked its registers up by name, encoded them and copied it twice, and each row's
/// strings and arrays, made on the decoding thread, were retained, released and freed on the loader's:
/// that was most of a load's time on the loader's thread (`docs/BENCHMARKS-history.md`, bootstrap). Prepared
/// rows are bytes: nothing per row crosses between the threads but a range.
///
/// What the loader writes for a prepared row is what the merge writes for the same ``BaselineRow``
/// (``MergeWriter/insertPrepared(_:of:nodes:entitiesWithStates:)``); where it cannot (the row is in the table already, the
/// entity has states in `_ls_row`, the node indexes moved), the row is decoded back
/// (``row(_:nodes:)``) and merged as any other.
struct BaselineInserts {
    /// One prepared row: ranges of ``bytes``.
    struct Insert {
        /// In ``infos``.
        var entity: Int
        /// The primary key, one value as ``RowStateCoding/appendValue(_:to:)`` writes it.
        var key: Range<Int>
        /// Every column in bit order (defaults where the row has no register), each likewise.
        var values: Range<Int>
        /// The state as `_ls_live` stores it, encoded with ``nodeIndexes``; causal length 1.
        var state: Range<Int>
        /// The latest clock's timestamp among the row's registers.
        var newest: HLCTimestamp
    }

    /// How many prepared rows the loader writes with one statement by default, when it can
    /// (``MergeWriter/insertPreparedRun(_:of:nodes:)``). In alternating 1M-row bootstraps, 32 was faster
    /// than 8 in 4 of 4 pairs (2.15–2.24 s against 2.32–2.39 s), and 96 no faster than 32
    /// (`docs/BENCHMARKS-history.md`, bootstrap).
    static let runLength = 32

    var bytes: [UInt8] = []
    var inserts: [Insert] = []
    var infos: [Catalog.EntityInfo] = []
    /// The node indexes the states were encoded with: those the writer had published when the chunk began.
    var nodeIndexes: [NodeID: Int64] = [:]

    /// Whether the states can be stored as they are encoded, with the writer's node indexes.
    func matches(_ nodes: NodeTable) -> Bool {
        nodeIndexes.allSatisfy { nodes.knownIndex(of: $0.key) == $0.value }
    }

    /// The prepared row `index` as the baseline held it. `nodes` gives the indexes its state was encoded
    /// with (the writer's, if they ``matches(_:)``, else a table of ``nodeIndexes``).
    func row(_ index: Int, nodes: NodeTable) throws -> BaselineRow {
        let insert = inserts[index]
        let info = infos[insert.entity]
        return try bytes.withUnsafeBytes { bytes in
            var key = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[insert.key]))
            let primaryKey = try key.value()
            let state = try RowStateCoding.decode(UnsafeRawBufferPointer(rebasing: bytes[insert.state]), causalLength: 1, info: info, nodes: nodes)
            return BaselineRow(key: RowKey(info.entity.name, primaryKey), state: state)
        }
    }
}

/// Prepares a baseline's first inserts on the decoding thread, from the store's catalog and the node
/// indexes its writer published; nothing else of the store.
struct BaselineInsertPreparer: Sendable {
    let catalog: Catalog
    let published: PublishedNodeIndexes

    /// Starts a chunk's inserts: with the node indexes published now, less any index published for two
    /// nodes (a writer's transaction that rolled back can have handed out an index that a later one gave
    /// another node): rows of those nodes are not prepared, and a prepared state always decodes to the
    /// nodes it was encoded with.
    func start() -> BaselineInserts {
        BaselineInserts(nodeIndexes: Self.unambiguous(published.withLock { $0 }))
    }

    static func unambiguous(_ indexes: [NodeID: Int64]) -> [NodeID: Int64] {
        var nodes: [Int64: Int] = [:]
        for index in indexes.values { nodes[index, default: 0] += 1 }
        return indexes.filter { nodes[$0.value] == 1 }
    }

    /// Appends `row` to `inserts` if it can be prepared; false (and nothing appended) otherwise.
    /// `scratch` is a buffer reused across rows.
    func prepare(_ row: BaselineRow, into inserts: inout BaselineInserts, scratch: inout [UInt8]) -> Bool {
        let state = row.state
        guard state.causalLength == 1, state.deletedAt == nil else { return false }
        let entity: Int
        if let last = inserts.infos.indices.last, inserts.infos[last].entity.name == row.key.entity {
            entity = last
        } else if let found = inserts.infos.firstIndex(where: { $0.entity.name == row.key.entity }) {
            entity = found
        } else {
            guard let info = catalog.byName[row.key.entity] else { return false }
            inserts.infos.append(info)
            entity = inserts.infos.count - 1
        }
        let info = inserts.infos[entity]
        guard info.isIsolated, !info.isReferenced, RowStateCoding.encodesInColumnOrder(info) else { return false }
        // Each register looked up by name once, into its column's place.
        return withUnsafeTemporaryAllocation(of: Register?.self, capacity: info.columns.count) { byBit in
            byBit.initialize(repeating: nil)
            defer { byBit.deinitialize() }
            var newest = HLCTimestamp.zero
            // Among a few columns, comparing names costs less than hashing one.
            let searches = info.columns.count <= 16
            for (name, register) in state.columns {
                // A column this store does not know: the merge filters the state, so it is merged.
                guard let bit = searches ? info.columns.firstIndex(of: name) : info.bit(of: name) else { return false }
                byBit[bit] = register
                newest = max(newest, register.clock.timestamp)
            }
            struct UnpublishedNode: Error {}
            let indexes = inserts.nodeIndexes
            var last: (node: NodeID, index: Int64)?
            do {
                try RowStateCoding.encode(byBit: UnsafeBufferPointer(byBit), count: state.columns.count, info: info, into: &scratch) { node in
                    if let last, last.node == node { return last.index }
                    guard let index = indexes[node] else { throw UnpublishedNode() }
                    last = (node, index)
                    return index
                }
            } catch {
                return false
            }
            let keyStart = inserts.bytes.count
            RowStateCoding.appendValue(row.key.primaryKey, to: &inserts.bytes)
            let valuesStart = inserts.bytes.count
            for bit in byBit.indices {
                RowStateCoding.appendValue(byBit[bit]?.value ?? info.defaults[bit], to: &inserts.bytes)
            }
            let stateStart = inserts.bytes.count
            inserts.bytes.append(contentsOf: scratch)
            inserts.inserts.append(
                BaselineInserts.Insert(
                    entity: entity, key: keyStart..<valuesStart, values: valuesStart..<stateStart, state: stateStart..<inserts.bytes.count, newest: newest))
            return true
        }
    }
}

extension MergeWriter {
    /// Inserts prepared row `index` of `inserts` into its table, records the insert in history, and stores
    /// its state in `_ls_live`, as the merge does for the same row as a new row (``writeIsolated(_:info:state:isNew:savesWithRow:nodes:fresh:)``).
    /// The caller has checked that the states match `nodes`. Returns false, writing nothing, when the row
    /// has a state already, in `_ls_row` (looked up as ``hasStoredState(_:info:entitiesWithStates:)``
    /// does) or in `_ls_live` (its row is in the table, so the insert fails): the caller merges it as any
    /// other row.
    ///
    /// Inserts recorded in history stay packed until ``recordPackedInserts()``, which the caller runs
    /// before anything else writes history or re-projects (``refresh(_:nodes:)`` drops packed inserts).
    func insertPrepared(
        _ index: Int, of inserts: BaselineInserts, nodes: inout NodeTable, entitiesWithStates: inout [Int64: Bool]
    ) throws -> Bool {
        let insert = inserts.inserts[index]
        let info = inserts.infos[insert.entity]
        let hasStates = try entityHasStoredStates(info, entitiesWithStates: &entitiesWithStates)
        return try inserts.bytes.withUnsafeBytes { bytes in
            if hasStates {
                let stored = try statements.loadState()
                try stored.bind(info.id, at: 1)
                var reader = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[insert.key]))
                try reader.bindValue(to: stored, at: 2)
                defer { stored.reset() }
                if try stored.step() { return false }
            }
            let statement = try statements.rows(of: info).insert
            try bindPrepared(insert, bytes, to: statement, from: 1, columns: info.columns.count)
            do {
                try statement.run()
            } catch let error as SQLiteError where error.isConstraint {
                return false
            }
            try storePrepared(index, of: inserts, bytes, info: info, rowID: connection.lastInsertedRowID, nodes: &nodes)
            return true
        }
    }

    /// Inserts `indices` (prepared rows of one entity, which has no state in `_ls_row`) with one
    /// statement, and their states with another: SQLite's work per statement (opening cursors, halting,
    /// resetting) is then shared. Returns false, writing nothing, when a row is in the table already: the
    /// caller writes them one by one. A rowid table gives rows inserted without a rowid the largest rowid
    /// plus one, in order, so the run's rows normally have the rowids up to the last one; the first row's
    /// rowid is checked, and where it is not the expected one (a table at the largest rowid numbers rows
    /// at random; an app's trigger may insert rows of its own in between), each row's rowid is looked up.
    func insertPreparedRun(_ indices: ArraySlice<Int>, of inserts: BaselineInserts, nodes: inout NodeTable) throws -> Bool {
        precondition(!indices.isEmpty)
        let info = inserts.infos[inserts.inserts[indices.first!].entity]
        let columns = info.columns.count
        let (rows, states, rowIDLookup) = try statements.insertRuns(of: info, count: indices.count)
        return try inserts.bytes.withUnsafeBytes { bytes in
            for (position, index) in indices.enumerated() {
                try bindPrepared(inserts.inserts[index], bytes, to: rows, from: Int32(position * (columns + 1) + 1), columns: columns)
            }
            do {
                try rows.run()
            } catch let error as SQLiteError where error.isConstraint {
                return false
            }
            func rowID(of index: Int) throws -> Int64? {
                var reader = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[inserts.inserts[index].key]))
                try reader.bindValue(to: rowIDLookup, at: 1)
                defer { rowIDLookup.reset() }
                return try rowIDLookup.step() ? rowIDLookup.int64(at: 0) : nil
            }
            let last = connection.lastInsertedRowID
            var rowIDs = Array((last - Int64(indices.count) + 1)...last)
            if try rowID(of: indices.first!) != rowIDs[0] {
                rowIDs = try indices.map { index in
                    guard let found = try rowID(of: index) else { throw RowStateCoding.corrupt("a row inserted by a run of prepared rows is not in its table") }
                    return found
                }
            }
            let ids = rowIDs.map { SchemaSQL.liveID(entity: info.id, rowID: $0) }
            if capturesHistory {
                for index in indices {
                    try recordInsert(encodedKey: UnsafeRawBufferPointer(rebasing: bytes[inserts.inserts[index].key]), info: info)
                }
            }
            if ids.allSatisfy({ $0 != nil }) {
                for (position, index) in indices.enumerated() {
                    try bindLiveState(inserts.inserts[index], bytes, id: ids[position]!, to: states, from: Int32(position * 4 + 1))
                }
                do {
                    try states.run()
                    return true
                } catch let error as SQLiteError where error.isConstraint {
                    // An orphan holds one of the ids: each state is stored on its own below.
                }
            }
            for (index, rowID) in zip(indices, rowIDs) {
                try storePrepared(index, of: inserts, bytes, info: info, rowID: rowID, nodes: &nodes, recordsHistory: false)
            }
            return true
        }
    }

    /// Binds the key and values of `insert` to `statement`'s parameters from `first` on.
    private func bindPrepared(
        _ insert: BaselineInserts.Insert, _ bytes: UnsafeRawBufferPointer, to statement: Statement, from first: Int32, columns: Int
    ) throws {
        var reader = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[insert.key]))
        try reader.bindValue(to: statement, at: first)
        reader = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[insert.values]))
        for bit in 0..<columns {
            try reader.bindValue(to: statement, at: first + Int32(bit) + 1)
        }
    }

    /// Binds `insert`'s state to `statement`'s parameters from `first` on, as `_ls_live` takes it: the live
    /// id, the key, causal length 1, the encoded state.
    private func bindLiveState(
        _ insert: BaselineInserts.Insert, _ bytes: UnsafeRawBufferPointer, id: Int64, to statement: Statement, from first: Int32
    ) throws {
        try statement.bind(id, at: first)
        var reader = RowStateCoding.ByteReader(UnsafeRawBufferPointer(rebasing: bytes[insert.key]))
        try reader.bindValue(to: statement, at: first + 1)
        try statement.bind(Int64(1), at: first + 2)
        try statement.bind(bytes: UnsafeRawBufferPointer(rebasing: bytes[insert.state]), at: first + 3)
    }

    /// After prepared row `index` was inserted at `rowID`: its insert recorded in history (unless
    /// `recordsHistory` is false: the caller did), and its state stored in `_ls_live`.
    private func storePrepared(
        _ index: Int, of inserts: BaselineInserts, _ bytes: UnsafeRawBufferPointer, info: Catalog.EntityInfo, rowID: Int64,
        nodes: inout NodeTable, recordsHistory: Bool = true
    ) throws {
        let insert = inserts.inserts[index]
        if capturesHistory, recordsHistory { try recordInsert(encodedKey: UnsafeRawBufferPointer(rebasing: bytes[insert.key]), info: info) }
        guard let id = SchemaSQL.liveID(entity: info.id, rowID: rowID) else {
            let row = try inserts.row(index, nodes: nodes)
            try saveState(row.state, primaryKey: row.key.primaryKey, info: info, previous: nil, nodes: &nodes)
            return
        }
        try insertingLiveState(at: id, info: info, nodes: &nodes) { _ in
            let live = try statements.insertLiveState()
            try bindLiveState(insert, bytes, id: id, to: live, from: 1)
            try live.run()
        }
    }
}
