import LogsyncCore

/// What the daemon reports about a store's sync state: read-only queries on the reader connection.
extension SyncLedger {
    /// Local history transactions not yet folded into the outbox, and outbox segments not yet published.
    package func pendingExports() throws -> (transactions: Int, segments: Int) {
        try store.reading { connection in
            let exported = try connection.int64("SELECT value FROM _ls_meta WHERE key = 'export_token'") ?? 0
            let transactions = try connection.int64(
                "SELECT count(*) FROM _ls_log WHERE kind = 0 AND origin IS NULL AND seq > ?", [.integer(exported)]) ?? 0
            let segments = try connection.int64("SELECT count(*) FROM _ls_outbox WHERE first_seq >= \(Store.publishedMark) AND shipped = 0") ?? 0
            return (Int(transactions), Int(segments))
        }
    }

    /// Every node this store has applied history from: the last sequence applied and when (ms since 1970).
    package func peerCursors() throws -> [(node: NodeID, appliedSequence: UInt64, appliedAt: Int64, schemaVersion: Int?)] {
        try store.reading { connection in
            try connection.rows(
                "SELECT c.node, c.last_seq, c.applied_at, s.version FROM _ls_cursor c LEFT JOIN _ls_peer_schema s ON s.node = c.node ORDER BY c.node"
            ).compactMap { row in
                guard case .text(let node) = row[0], case .integer(let last) = row[1], case .integer(let at) = row[2] else { return nil }
                guard case .integer(let version) = row[3] else { return (NodeID(node), UInt64(last), at, nil) }
                return (NodeID(node), UInt64(last), at, Int(version))
            }
        }
    }

    /// The most recent `limit` history transactions, oldest first.
    package func recentHistory(limit: Int) throws -> [HistoryTransaction] {
        let start = try store.reading { connection in
            try connection.int64("SELECT seq FROM _ls_log WHERE kind = 0 ORDER BY seq DESC LIMIT 1 OFFSET ?", [.integer(Int64(max(limit, 1)))]) ?? 0
        }
        return try store.history(after: HistoryToken(start), limit: limit)
    }
}
