import Foundation
import LogsyncCore

/// A store restored from an older backup (or copied from another node's) is behind its own node's history
/// on the carrier: what its node exported after the backup is there, and is not here. Writing on under the
/// same node id would number new transactions with sequences the carrier already holds under other content
/// — a fork every other node refuses. Instead the store takes a new node id (`docs/operations.md`,
/// "Restoring a store from a backup"): its old node becomes one more node it imports from, from the last
/// sequence it exported on (what the old node wrote after the backup comes back that way), and its
/// unexported local history is exported under the new id from sequence 1. Nothing is lost and nothing forks.
extension SyncLedger {
    /// Gives the store a new node id, in one transaction, and returns it with the old one. The store must
    /// be closed and opened again before it is used further (``Store/nodeID`` is read at open).
    ///
    /// `checksum` is the one segments applied from other nodes are recorded with: the old node's segments
    /// still in the outbox are recorded as applied with it, so the same segments read from the carrier are
    /// recognised, not taken for a second history.
    package func takeNewIdentity(checksum: ([UInt8]) -> UInt64) throws -> (old: NodeID, new: NodeID) {
        let old = store.node
        let new = NodeID(UUID().uuidString.lowercased())
        _ = try store.perform(marker: Store.Marker()) { tx in
            func integer(_ sql: String) throws -> Int64 {
                if case .integer(let value)? = try tx.rows(sql).first?.first { return value }
                return 0
            }
            let exported = try integer("SELECT value FROM _ls_meta WHERE key = 'export_seq'")
            let pruned = try integer("SELECT value FROM _ls_meta WHERE key = 'pruned_seq'")
            let newestClock = try integer("SELECT max(hlc) FROM _ls_log WHERE kind = 0 AND origin IS NULL")
            let oldValue = DatabaseValue.text(old.rawValue)
            // What the old node exported is applied here: its segments still held are recorded as applied.
            for row in try tx.rows("SELECT first_seq, last_seq, bytes FROM _ls_outbox WHERE length(bytes) > 0") {
                guard case .blob(let bytes) = row[2] else { continue }
                try tx.execute(
                    "INSERT OR REPLACE INTO _ls_segment(node, first_seq, last_seq, checksum) VALUES (?, ?, ?, ?)",
                    [oldValue, row[0], row[1], .integer(Int64(bitPattern: checksum(bytes)))])
            }
            try tx.execute(
                "INSERT OR REPLACE INTO _ls_cursor(node, last_seq, last_hlc, applied_at) VALUES (?, ?, ?, ?)",
                [oldValue, .integer(exported), .integer(newestClock), .integer(Int64(Date().timeIntervalSince1970 * 1000))])
            // Segments the old node pruned were deleted from the carrier: a copy seen again is covered here.
            if pruned > 0 {
                try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES (?, ?)", [.text("covered:" + old.rawValue), .integer(pruned)])
            }
            try tx.execute("DELETE FROM _ls_outbox")
            try tx.execute("DELETE FROM _ls_meta WHERE key IN ('export_seq', 'published_seq', 'pruned_seq', 'own_baseline', 'own_baseline_token')")
            try tx.execute("UPDATE _ls_meta SET value = ? WHERE key = 'node'", [.text(new.rawValue)])
        }
        return (old, new)
    }
}
