import LogsyncCore

extension SegmentHeader {
    /// The header of a segment holding exactly `transactions` (consecutive sequences, in order) from
    /// `node`: for tests that import transactions they made by hand.
    package static func covering(
        _ transactions: [LogTransaction], from node: NodeID, account: String = "default", schemaVersion: Int = 1
    ) -> SegmentHeader {
        let timestamps = transactions.map(\.timestamp)
        return SegmentHeader(
            schemaVersion: schemaVersion, account: account, node: node, firstSequence: transactions[0].sequence,
            lastSequence: transactions[transactions.count - 1].sequence, minTimestamp: timestamps.min()!,
            maxTimestamp: timestamps.max()!, transactionCount: transactions.count)
    }
}
