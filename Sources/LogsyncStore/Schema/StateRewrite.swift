import LogsyncCore
import LogsyncSQLite

/// Every row state of one entity, in `_ls_row` and `_ls_live`, decoded as one column layout encodes it,
/// changed, and encoded as another (or the same) encodes it, a bounded batch at a time: for the migrations
/// that change what states hold (``Contraction``, ``TypeChange``), inside the registration's transaction.
struct StateRewrite {
    let connection: Connection
    let entityID: Int64

    /// Rewrites each state for which `change` (given the state and the row's key) returns true.
    func run(from before: Catalog.EntityInfo, to after: Catalog.EntityInfo, _ change: (inout RowState, DatabaseValue) -> Bool) throws {
        for (table, condition) in [("_ls_row", "entity = \(entityID)"), ("_ls_live", SchemaSQL.liveRange(entity: String(entityID)))] {
            var nodes = try NodeTable(connection: connection)
            let update = try connection.prepare("UPDATE \(table) SET state = ? WHERE id = ?")
            var last = Int64.min
            var encoded: [UInt8] = []
            while true {
                let rows = try connection.rows(
                    "SELECT id, cl, state, pk FROM \(table) WHERE \(condition) AND id > ? ORDER BY id LIMIT 4096", [.integer(last)])
                guard !rows.isEmpty else { break }
                for row in rows {
                    guard case .integer(let id) = row[0] else { continue }
                    last = id
                    guard case .integer(let cl) = row[1], case .blob(let bytes) = row[2] else {
                        throw RowStateCoding.corrupt("the state of row \(id) in \(table) is not a causal length and a blob")
                    }
                    var state = try RowStateCoding.decode(bytes, causalLength: UInt64(max(cl, 0)), info: before, nodes: nodes)
                    guard change(&state, row[3]) else { continue }
                    try RowStateCoding.encode(state, info: after, nodes: &nodes, connection: connection, into: &encoded)
                    try update.run([.blob(encoded), .integer(id)])
                }
            }
        }
    }
}
