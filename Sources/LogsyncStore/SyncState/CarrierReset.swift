import LogsyncCore

/// What a store keeps to push its segments again when its carrier lost them (a relay restored from an
/// older backup, or given a new database; docs/relay-protocol.md, "Identity and epoch"): the identity of
/// the carrier it last published through (`carrier` in `_ls_meta`), and the bytes of its published
/// segments, which stay in the outbox until pruning deletes them (``markPublished(firstSequence:)``).
extension SyncLedger {
    /// The carrier identity recorded by ``recordCarrierIdentity(_:)``, if any.
    package func carrierIdentity() throws -> String? {
        try store.reading { connection in
            guard case .text(let identity)? = try connection.scalar("SELECT value FROM _ls_meta WHERE key = 'carrier'") else { return nil }
            return identity
        }
    }

    package func recordCarrierIdentity(_ identity: String) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('carrier', ?)", [.text(identity)])
        }
    }

    /// Marks every published segment of this node that pruning has not deleted as unpublished again, so
    /// that the next publish pushes it again (the same bytes: a carrier that still has it answers that it
    /// has). Returns how many were marked, and the ranges whose bytes the outbox no longer holds (published
    /// by a version of logsync that dropped them): those cannot be pushed again.
    package func markRetainedUnpublished() throws -> (count: Int, withoutBytes: [(firstSequence: UInt64, lastSequence: UInt64)]) {
        try store.perform(marker: Store.Marker()) { tx -> (count: Int, withoutBytes: [(firstSequence: UInt64, lastSequence: UInt64)]) in
            let withoutBytes = try tx.rows("SELECT first_seq, last_seq FROM _ls_outbox WHERE shipped = 1 AND length(bytes) = 0 ORDER BY first_seq")
                .compactMap { row -> (firstSequence: UInt64, lastSequence: UInt64)? in
                    guard case .integer(let first) = row[0], case .integer(let last) = row[1] else { return nil }
                    return (UInt64(first), UInt64(last))
                }
            try tx.execute("UPDATE _ls_outbox SET shipped = 0 WHERE shipped = 1 AND length(bytes) > 0")
            let count = try tx.rows("SELECT changes()").first.flatMap { row -> Int? in
                if case .integer(let count) = row[0] { return Int(count) }
                return nil
            } ?? 0
            // Unpublished segments are looked for from the published mark on: move it down to the first.
            try tx.execute(
                """
                UPDATE _ls_meta SET value = (SELECT min(first_seq) FROM _ls_outbox WHERE shipped = 0)
                WHERE key = 'published_seq' AND EXISTS (SELECT 1 FROM _ls_outbox WHERE shipped = 0 AND first_seq < _ls_meta.value)
                """)
            return (count, withoutBytes)
        }.result
    }
}
