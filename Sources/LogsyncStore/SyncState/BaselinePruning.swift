import LogsyncCore

/// What retention keeps in the store (`docs/retention.md`): which of this node's published segments are
/// deleted from the transport (pruned), the checksums of other nodes' segments that are forgotten once
/// their node deleted them, and the history token of this node's newest published baseline.
extension SyncLedger {
    /// This node's published segments up to `sequence` that are not yet pruned, oldest first.
    package func publishedSegments(through sequence: UInt64) throws -> [(firstSequence: UInt64, lastSequence: UInt64)] {
        try store.reading { connection in
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
        try store.reading { Int(try $0.int64("SELECT count(*) FROM _ls_outbox WHERE shipped = 1") ?? 0) }
    }

    /// This node's segments up to here were deleted from the transport.
    package func prunedSequence() throws -> UInt64 {
        try store.reading { UInt64(try $0.int64("SELECT value FROM _ls_meta WHERE key = 'pruned_seq'") ?? 0) }
    }

    /// Records that this node's segment ending at `lastSequence` is deleted from the transport: its outbox
    /// row goes, and the pruned mark moves up.
    package func recordPruned(firstSequence: UInt64, lastSequence: UInt64) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute("DELETE FROM _ls_outbox WHERE first_seq = ? AND shipped = 1", [.integer(Int64(firstSequence))])
            try tx.execute(
                "INSERT INTO _ls_meta(key, value) VALUES ('pruned_seq', ?) ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
                [.integer(Int64(lastSequence))])
        }
    }

    /// Forgets the checksums of `node`'s applied segments up to `sequence`: that node deleted them, so
    /// they cannot come back to be checked.
    package func forgetAppliedSegments(of node: NodeID, through sequence: UInt64) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute("DELETE FROM _ls_segment WHERE node = ? AND last_seq <= ?", [.text(node.rawValue), .integer(Int64(sequence))])
        }
    }

    /// Remembers the history token of this node's newest published baseline and its frontier's digest.
    package func recordOwnBaseline(digest: UInt64, historyToken: Int64) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('own_baseline', ?)", [.text(String(digest, radix: 16))])
            try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('own_baseline_token', ?)", [.integer(historyToken)])
        }
    }

    /// The history token recorded with this node's baseline of frontier digest `digest`, if that is the newest.
    package func ownBaselineToken(digest: UInt64) throws -> Int64? {
        try store.reading { connection in
            guard case .text(let recorded)? = try connection.rows("SELECT value FROM _ls_meta WHERE key = 'own_baseline'").first?.first,
                recorded == String(digest, radix: 16)
            else { return nil }
            return try connection.int64("SELECT value FROM _ls_meta WHERE key = 'own_baseline_token'")
        }
    }
}
