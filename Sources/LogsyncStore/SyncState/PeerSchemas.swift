import LogsyncCore
import LogsyncSQLite

/// The schema version each peer writes with (`_ls_peer_schema`, `docs/schema-evolution.md`): from its
/// progress record, which says what its app registered, as soon as it registers it and before it writes
/// anything; and from the header of each segment applied from it. A progress record sets the version (the
/// peer's latest word on itself, which also corrects a record a broken build wrote); a segment only raises
/// it, since an older segment applied later (pulled again from a restored relay) says nothing about what
/// the peer runs now.
extension SyncLedger {
    /// The newest schema version any peer writes with; nil before any is known.
    package func newestPeerSchemaVersion() throws -> Int? {
        try store.reading { connection in try connection.int64("SELECT max(version) FROM _ls_peer_schema").map(Int.init) }
    }

    /// Notes the versions peers' progress records give; writes only what changed.
    package func notePeerSchemaVersions(_ versions: [NodeID: Int]) throws {
        let known = try store.reading { connection in
            var known: [NodeID: Int] = [:]
            for row in try connection.rows("SELECT node, version FROM _ls_peer_schema") {
                if case .text(let node) = row[0], case .integer(let version) = row[1] { known[NodeID(node)] = Int(version) }
            }
            return known
        }
        let changed = versions.filter { known[$0.key] != $0.value }.sorted { $0.key.rawValue < $1.key.rawValue }
        guard !changed.isEmpty else { return }
        _ = try store.perform(marker: Store.Marker()) { tx in
            for (node, version) in changed {
                try tx.execute("INSERT OR REPLACE INTO _ls_peer_schema(node, version) VALUES (?, ?)", [.text(node.rawValue), .integer(Int64(version))])
            }
        }
    }
}

extension SegmentImport {
    /// Notes, in an import's transaction, the version a segment of `origin` was written under: raises the
    /// peer's version, never lowers it.
    static func notePeerSchema(_ origin: DatabaseValue, version: Int, connection: Connection) throws {
        try connection.execute(
            "INSERT INTO _ls_peer_schema(node, version) VALUES (?1, ?2) ON CONFLICT(node) DO UPDATE SET version = max(version, ?2)",
            [origin, .integer(Int64(version))])
    }
}
