import Synchronization

/// The schema version each node of each account last pushed a segment under (its header says), for
/// `/metrics`: per account, the oldest and newest version its nodes write with — a fleet that has not
/// finished an app upgrade shows two (`docs/schema-evolution.md`). What this relay process saw since it
/// started: several relays on one database each report the pushes they served. At most
/// ``maximumNodes`` nodes are remembered; more are counted, not kept.
final class SchemaVersions: Sendable {
    static let maximumNodes = 100_000

    private let state = Mutex<(versions: [String: [String: Int]], nodes: Int, dropped: Int)>(([:], 0, 0))

    /// Notes that `node` of `account` pushed a segment written under `version` (`fromProgress` false: it only
    /// raises the node's version, since a segment pushed again says nothing of what the node runs now), or a
    /// progress record that says it runs `version` (its latest word on itself: it sets it).
    func record(account: String, node: String, version: Int, fromProgress: Bool = false) {
        state.withLock { state in
            if let known = state.versions[account]?[node] {
                if fromProgress ? known != version : known < version { state.versions[account]![node] = version }
                return
            }
            guard state.nodes < Self.maximumNodes else {
                state.dropped += 1
                return
            }
            state.versions[account, default: [:]][node] = version
            state.nodes += 1
        }
    }

    /// Per account, in name order: the oldest and newest version its nodes pushed under.
    var perAccount: [(account: String, oldest: Int, newest: Int)] {
        state.withLock { state in
            state.versions.keys.sorted().compactMap { account in
                let versions = state.versions[account]!.values
                guard let oldest = versions.min(), let newest = versions.max() else { return nil }
                return (account, oldest, newest)
            }
        }
    }

    /// Nodes not remembered because ``maximumNodes`` were.
    var dropped: Int { state.withLock { $0.dropped } }
}
