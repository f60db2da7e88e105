import LogsyncCore
import LogsyncPlatform

/// A segment that must not be applied: the same node and sequence with different content.
package struct QuarantineRecord: Sendable, Hashable {
    package var node: NodeID
    package var firstSequence: UInt64
    package var lastSequence: UInt64
    package var reason: String
    package var location: String

    package init(node: NodeID, firstSequence: UInt64, lastSequence: UInt64, reason: String, location: String) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.reason = reason
        self.location = location
    }
}

extension SyncLedger {
    /// Records a divergent segment so it is reported, never applied. Recording the same one twice is a no-op.
    package func quarantine(_ record: QuarantineRecord) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute(
                "INSERT OR IGNORE INTO _ls_quarantine(node, first_seq, last_seq, reason, location, at) VALUES (?, ?, ?, ?, ?, ?)",
                [.text(record.node.rawValue), .integer(Int64(record.firstSequence)), .integer(Int64(record.lastSequence)),
                 .text(record.reason), .text(record.location), .integer(Int64(WallClock.milliseconds()))])
        }
    }

    package func quarantined() throws -> [QuarantineRecord] {
        try store.reading { connection in
            try connection.rows("SELECT node, first_seq, last_seq, reason, location FROM _ls_quarantine ORDER BY id").compactMap { row in
                guard case .text(let node) = row[0], case .integer(let first) = row[1], case .integer(let last) = row[2],
                    case .text(let reason) = row[3], case .text(let location) = row[4]
                else { return nil }
                return QuarantineRecord(node: NodeID(node), firstSequence: UInt64(first), lastSequence: UInt64(last), reason: reason, location: location)
            }
        }
    }
}
