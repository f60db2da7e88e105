import LogsyncCore
import LogsyncSQLite

/// The schema version each peer writes with (`_ls_peer_schema`, `docs/schema-evolution.md`): from the
/// header of each segment applied from it, and from its progress record, which says it as soon as its app
/// registers a new version, before it writes anything. A version only goes up: an older segment applied
/// later (pulled again from a restored relay) says nothing about what the peer runs now.
extension SyncLedger {
    /// The newest schema version any peer writes with; nil before any is known.
    package func newestPeerSchemaVersion() throws -> Int? {
        try store.reading { connection in try connection.int64("SELECT max(version) FROM _ls_peer_schema").map(Int.init) }
    }

    /// Notes the versions peers' progress records give.
    package func notePeerSchemaVersions(_ versions: [NodeID: Int]) throws {
        guard !versions.isEmpty else { return }
        _ = try store.perform(marker: Store.Marker()) { tx in
            for (node, version) in versions.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                try tx.execute(SegmentImport.notePeerSchemaSQL, [.text(node.rawValue), .integer(Int64(version))])
            }
        }
    }
}

extension SegmentImport {
    static let notePeerSchemaSQL =
        "INSERT INTO _ls_peer_schema(node, version) VALUES (?1, ?2) ON CONFLICT(node) DO UPDATE SET version = max(version, ?2)"

    /// Notes, in an import's transaction, the version a segment of `origin` was written under.
    static func notePeerSchema(_ origin: DatabaseValue, version: Int, connection: Connection) throws {
        try connection.execute(notePeerSchemaSQL, [origin, .integer(Int64(version))])
    }
}
