import LogsyncCore

/// What this store has applied from other nodes: per node, the last sequence applied (`_ls_cursor`), and
/// per applied segment, the checksum of its bytes (`_ls_segment`).
extension SyncLedger {
    /// The last sequence applied from `node` (0 when none).
    package func appliedSequence(from node: NodeID) throws -> UInt64 {
        try store.reading { connection in
            UInt64(try connection.int64("SELECT last_seq FROM _ls_cursor WHERE node = ?", [.text(node.rawValue)]) ?? 0)
        }
    }

    /// Every node this store has applied segments from, with the last sequence applied.
    package func appliedSequences() throws -> [NodeID: UInt64] {
        try store.reading { connection in
            var result: [NodeID: UInt64] = [:]
            for row in try connection.rows("SELECT node, last_seq FROM _ls_cursor") {
                if case .text(let node) = row[0], case .integer(let last) = row[1] { result[NodeID(node)] = UInt64(last) }
            }
            return result
        }
    }

    /// The checksum recorded when the segment starting at `firstSequence` from `node` was applied, with
    /// its last sequence; nil if no segment starting there was applied.
    package func appliedSegment(from node: NodeID, firstSequence: UInt64) throws -> (lastSequence: UInt64, checksum: UInt64)? {
        try store.reading { connection in
            guard let row = try connection.rows(
                "SELECT last_seq, checksum FROM _ls_segment WHERE node = ? AND first_seq = ?", [.text(node.rawValue), .integer(Int64(firstSequence))]).first,
                case .integer(let last) = row[0], case .integer(let checksum) = row[1]
            else { return nil }
            return (UInt64(last), UInt64(bitPattern: checksum))
        }
    }
}
