import Foundation
import Logging
import LogsyncRelay
import LogsyncRelayProtocol
import PostgresNIO

/// The relay's identity and epoch in PostgreSQL (docs/relay-protocol.md, "Identity and epoch"). Relays
/// on PostgreSQL keep nothing beside the database, so the SQLite relay's note of what it committed has no
/// place here; what tells a restored or replaced database from the one the relays served is PostgreSQL's
/// own: the cluster's system identifier (a new cluster: `initdb`, a `pg_dump` restored elsewhere), its
/// WAL timeline (a point-in-time recovery, a promoted replica) and the database's oid (a dump restored
/// into a new database of the same cluster). Each serving relay compares them with those recorded at
/// the last start; any difference in a database that holds arrivals changes the epoch, so every node
/// pulls again from the start and pushes again what the database lost. A failover to a replica that lost
/// nothing changes it too: that costs a pull from the start, never a lost segment.
enum PostgresIdentity {
    static func check(_ connection: PostgresConnection, serving: Bool, logger: Logger) async throws -> (RelayIdentity, String?) {
        var meta: [String: String] = [:]
        for try await (key, value) in try await connection.query("SELECT key, value FROM relay_meta", logger: logger).decode((String, String).self) {
            meta[key] = value
        }
        var identity: RelayIdentity
        if let id = meta["id"], id.utf8.count == 32, let epoch = meta["epoch"].flatMap(UInt64.init), epoch > 0 {
            identity = RelayIdentity(id: id, epoch: epoch)
        } else {
            var generator = SystemRandomNumberGenerator()
            identity = RelayIdentity(id: (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined(), epoch: 1)
            try await connection.query(
                "INSERT INTO relay_meta(key, value) VALUES ('id', \(identity.id)), ('epoch', '1') ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                logger: logger)
        }
        guard serving else { return (identity, nil) }
        let current = try await fingerprint(connection, logger: logger)
        var change: String?
        if let recorded = meta["fingerprint"], recorded != current {
            let arrivals =
                try await connection.first(
                    "SELECT coalesce(max(cursor), 0) FROM (SELECT cursor FROM accounts UNION ALL SELECT cursor FROM retired_accounts) AS c", as: Int64.self,
                    logger: logger) ?? Int64(0)
            if arrivals > 0 {
                let previous = identity.epoch
                identity.epoch = max(identity.epoch + 1, UInt64(Date().timeIntervalSince1970 * 1000))
                try await connection.query("UPDATE relay_meta SET value = \(String(identity.epoch)) WHERE key = 'epoch'", logger: logger)
                change =
                    "the database may hold less than its relays acknowledged: it is not the one they served (cluster, timeline and database were \(recorded), are \(current): a restored backup, a dump loaded elsewhere, or a failover); epoch \(previous) -> \(identity.epoch), so that every node pulls again from the start and pushes again what it still has"
            }
        }
        if meta["fingerprint"] != current {
            try await connection.query(
                "INSERT INTO relay_meta(key, value) VALUES ('fingerprint', \(current)) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                logger: logger)
        }
        return (identity, change)
    }

    /// `SYSTEM-ID/TIMELINE/DATABASE-OID` of the database this connection is on.
    static func fingerprint(_ connection: PostgresConnection, logger: Logger) async throws -> String {
        try await connection.first(
            """
            SELECT (SELECT system_identifier::text FROM pg_control_system()) || '/' ||
                   substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' ||
                   (SELECT oid::text FROM pg_database WHERE datname = current_database())
            """, as: String.self, logger: logger) ?? ""
    }
}
