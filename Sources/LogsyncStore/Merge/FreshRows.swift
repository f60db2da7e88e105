import LogsyncCore
import Synchronization
import LogsyncSQLite

/// The first insert of a row of an isolated entity, prepared off the writer's thread: what the merge's
/// fast path for a new row (`RemoteApply.swift`) computes and the projection writes, done while the
/// segment before is applied, so that the writer only binds and steps.
///
/// A store's first imports (a new node, an account's store being built) are almost all such inserts;
/// building their states, looking their values up by column name and encoding the states was about a
/// fifth of a rebuild's time on the writer's thread. Prepared on the prefetching thread, a 1M-change
/// rebuild took 7.1–10.3 s against 7.5–11.5 s in alternating runs (`docs/BENCHMARKS-history.md`, rebuild). A
/// baseline load does not prepare its rows: its decoding thread already inflates and parses them, and
/// preparing them there too made loads slower (`docs/decisions.md`).
///
/// A class: it is handed through the merge and the projection, and one reference costs less to pass on
/// than the three buffers it holds.
final class FreshRow: Sendable {
    /// The row's state after the insert: the merge of the change into an empty state.
    let state: RowState
    /// The row's columns in the entity's column order, with the defaults the insert did not set.
    let values: [DatabaseValue]
    /// `state` as `_ls_live` stores it, encoded with ``FreshRows/nodeIndex``.
    let encodedState: [UInt8]

    init(state: RowState, values: [DatabaseValue], encodedState: [UInt8]) {
        self.state = state
        self.values = values
        self.encodedState = encodedState
    }
}

/// A segment's prepared inserts (``FreshRow``), per transaction and change.
struct FreshRows: Sendable {
    /// The segment's node, and the index its clocks were encoded with. The writer uses the rows only
    /// while its ``NodeTable`` gives the node the same index (a rolled-back transaction may have handed an
    /// index out that it then forgot).
    let node: NodeID
    let nodeIndex: Int64
    /// Per transaction of the segment, per change: the prepared insert, or nil where the merge works it out.
    let rows: [[FreshRow?]]

    /// Whether the states can be stored as they are encoded, with the writer's node indexes.
    func matches(_ nodes: NodeTable) -> Bool {
        nodes.knownIndex(of: node) == nodeIndex
    }
}

/// Node indexes a store's writer has handed out, published for the threads that prepare imports.
final class PublishedNodeIndexes: Sendable {
    private let indexes = Mutex<[NodeID: Int64]>([:])

    func withLock<T>(_ body: (inout [NodeID: Int64]) -> T) -> T {
        indexes.withLock { body(&$0) }
    }
}

/// Prepares first inserts (``FreshRow``) off the writer's thread: the store's catalog and the node indexes
/// its writer published, nothing else. It holds no connection and does not keep the store open, so a
/// prefetch still running after an import stopped does not hold up closing it.
package struct FreshRowPreparer: Sendable {
    let catalog: Catalog
    let published: PublishedNodeIndexes

    /// Prepares the segment's first inserts of rows of isolated entities, if the writer has published
    /// the index of the segment's node (``Store/publishNodeIndex(_:of:connection:)``).
    package func prepare(_ segment: inout SegmentImport) {
        let origin = segment.header.node
        guard let originIndex = published.withLock({ $0[origin] }) else { return }
        struct OtherNode: Error {}
        var buffer: [UInt8] = []
        var entity: Catalog.EntityInfo?
        var prepared = 0
        let rows = segment.transactions.map { transaction in
            let clock = Clock(transaction.timestamp, origin)
            return transaction.changes.map { change -> FreshRow? in
                guard change.kind == .insert, change.causalLength == 1 else { return nil }
                if entity?.entity.name != change.entity { entity = catalog.byName[change.entity] }
                guard let info = entity, info.isIsolated else { return nil }
                var state = RowState()
                guard state.merge(change, at: clock) else { return nil }
                let values = info.columns.indices.map { info.value(at: $0, of: state) }
                do {
                    try RowStateCoding.encode(state, info: info, into: &buffer) { node in
                        guard node == origin else { throw OtherNode() }
                        return originIndex
                    }
                } catch {
                    return nil
                }
                prepared += 1
                return FreshRow(state: state, values: values, encodedState: buffer)
            }
        }
        if prepared > 0 { segment.fresh = FreshRows(node: origin, nodeIndex: originIndex, rows: rows) }
    }
}

extension SyncLedger {
    /// What prepares this store's imports on other threads.
    package var freshRowPreparer: FreshRowPreparer { FreshRowPreparer(catalog: store.catalog, published: store.knownNodeIndexes) }
}

extension Store {
    /// Inside a write transaction: makes sure `node` has an index and publishes it for
    /// ``FreshRowPreparer`` on other threads.
    func publishNodeIndex(_ nodes: inout NodeTable, of node: NodeID, connection: Connection) throws {
        let index = try nodes.index(of: node, connection: connection)
        knownNodeIndexes.withLock { $0[node] = index }
    }
}
