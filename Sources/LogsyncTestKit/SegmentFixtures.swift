import Foundation
import LogsyncCore

/// Real segments made by hand, for tests that carry segments without a store (the relay's).
public enum SegmentFixtures {
    /// A segment of `node` in `account` holding one note insert per sequence from `first` to `last`;
    /// `title` varies the bytes for the same range; `noise` random bytes per transaction make it large
    /// (they do not compress).
    public static func segment(account: String, node: String, first: UInt64, last: UInt64, title: String = "note", noise: Int = 0) throws -> [UInt8] {
        let now = UInt64(Date().timeIntervalSince1970 * 1000) - 1_000
        let transactions = (first...last).map { sequence in
            LogTransaction(
                sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: now, logical: UInt16(truncatingIfNeeded: sequence)),
                author: "fixture", contextName: nil,
                changes: [
                    LogChange(
                        entity: "Note", primaryKey: .text("\(node)-\(sequence)"), kind: .insert, causalLength: 1,
                        values: [
                            "title": .text("\(title) \(sequence)"), "rank": .integer(Int64(sequence)),
                            "body": .blob((0..<noise).map { _ in UInt8.random(in: 0...255) }),
                        ])
                ])
        }
        return try SegmentEncoder.encode(schemaVersion: 1, account: account, node: NodeID(node), transactions: transactions)
    }

    /// A new node id (a lowercase UUID).
    public static func nodeID() -> String { UUID().uuidString.lowercased() }
}
