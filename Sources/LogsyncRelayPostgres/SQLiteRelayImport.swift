import Foundation
import Logging
import LogsyncCore
import LogsyncRelay
import LogsyncSQLite
import NIOCore
import PostgresNIO

/// `sync-relay migrate`: copies a SQLite relay's database into an empty PostgreSQL one, with every
/// arrival number, account cursor (retired accounts' too), token digest, progress record and baseline
/// as it was, and the relay's identity and epoch: nodes keep their cursors and notice nothing but the
/// new address. The SQLite file is read inside one read transaction (a consistent snapshot, even if a
/// relay still serves it); the copy is one PostgreSQL transaction, so a failed copy leaves nothing.
public enum SQLiteRelayImport {
    public struct Summary: Sendable, Codable, Equatable {
        public var accounts = 0
        public var retiredAccounts = 0
        public var tokens = 0
        public var segments = 0
        public var segmentBytes: Int64 = 0
        public var progressRecords = 0
        public var baselines = 0
        public var baselineChunks = 0
        public var identity = ""
    }

    /// Rows of segments or chunks sent per statement, and the bytes that end a batch early.
    static let batchRows = 500
    static let batchBytes = 32 << 20

    public static func copy(from path: String, into storage: PostgresRelayStorage) async throws(RelayError) -> Summary {
        guard FileManager.default.fileExists(atPath: path) else {
            throw RelayError(.unavailable, "there is no SQLite relay database at \(path) (sync-relay migrate --from FILE)")
        }
        let source: Connection
        do {
            source = try Connection(path: path, options: [.readOnly])
            try source.setBusyTimeout(milliseconds: 5_000)
            try source.execute("BEGIN")
        } catch {
            throw RelayError(.unavailable, "cannot open the SQLite relay database \(path): check the path (sync-relay migrate --from FILE)", cause: error)
        }
        let reader = SQLiteReader(source)
        let logger = storage.logger
        return try await storage.transaction("copying the SQLite relay database", timeout: 24 * 3_600) { connection in
            try await copy(reader, path: path, connection, logger: logger)
        }
    }

    /// The source connection, used by one copy at a time (the copy's transaction runs on one task).
    final class SQLiteReader: @unchecked Sendable {
        let connection: Connection
        init(_ connection: Connection) { self.connection = connection }
    }

    private static func copy(_ reader: SQLiteReader, path: String, _ target: PostgresConnection, logger: Logger) async throws -> Summary {
        let source = reader.connection
        var summary = Summary()
        let existing = try await target.first("SELECT count(*) FROM accounts", as: Int64.self, logger: logger) ?? Int64(0)
        guard existing == 0 else {
            throw RelayError(
                .exists,
                "the PostgreSQL database holds \(existing) accounts already: migrate copies into an empty relay database only (create a new one, or drop its tables)")
        }
        let version = try source.int64("PRAGMA user_version") ?? 0
        guard version >= 1, version <= 3 else {
            throw RelayError(.unavailable, "\(path) has relay schema version \(version); this sync-relay copies versions 1 to 3")
        }
        let hasProgress = version >= 2
        let hasMeta = version >= 3

        for row in try source.rows("SELECT name, created_ms, quota_bytes, used_bytes, segments, cursor FROM accounts ORDER BY name") {
            try await target.query(
                """
                INSERT INTO accounts(name, created_ms, quota_bytes, used_bytes, segments, cursor)
                VALUES (\(row[0].textValue), \(row[1].integerValue), \(row[2].optionalInteger), \(row[3].integerValue), \(row[4].integerValue), \(row[5].integerValue))
                """, logger: logger)
            summary.accounts += 1
        }
        for row in try source.rows("SELECT name, cursor FROM retired_accounts") {
            try await target.query(
                "INSERT INTO retired_accounts(name, cursor) VALUES (\(row[0].textValue), \(row[1].integerValue))", logger: logger)
            summary.retiredAccounts += 1
        }
        for row in try source.rows("SELECT id, account, node, digest, created_ms FROM tokens") {
            try await target.query(
                """
                INSERT INTO tokens(id, account, node, digest, created_ms)
                VALUES (\(row[0].textValue), \(row[1].textValue), \(row[2].optionalText), \(ByteBuffer(bytes: row[3].blobValue)), \(row[4].integerValue))
                """, logger: logger)
            summary.tokens += 1
        }

        // Segments, streamed in batches of bounded bytes.
        let segments = try source.cached("SELECT account, arrival, node, first, last, digest, size, bytes FROM segments ORDER BY account, arrival")
        var batch = SegmentColumns()
        while try segments.step() {
            batch.append(segments)
            if batch.count >= batchRows || batch.bytes >= batchBytes {
                summary.segments += batch.count
                summary.segmentBytes += Int64(batch.bytes)
                try await batch.insert(target, logger: logger)
                batch = SegmentColumns()
            }
        }
        summary.segments += batch.count
        summary.segmentBytes += Int64(batch.bytes)
        try await batch.insert(target, logger: logger)

        if hasProgress {
            for row in try source.rows("SELECT account, node, size, bytes, updated_ms FROM progress") {
                try await target.query(
                    """
                    INSERT INTO progress(account, node, size, bytes, updated_ms)
                    VALUES (\(row[0].textValue), \(row[1].textValue), \(row[2].integerValue), \(ByteBuffer(bytes: row[3].blobValue)), \(row[4].integerValue))
                    """, logger: logger)
                summary.progressRecords += 1
            }
            for row in try source.rows("SELECT account, node, name, blob, chunks, digest, size, created_ms FROM baselines") {
                try await target.query(
                    """
                    INSERT INTO baselines(account, node, name, blob, chunks, digest, size, created_ms)
                    VALUES (\(row[0].textValue), \(row[1].textValue), \(row[2].textValue), \(row[3].integerValue), \(Int32(row[4].integerValue)),
                            \(ByteBuffer(bytes: row[5].blobValue)), \(row[6].integerValue), \(row[7].integerValue))
                    """, logger: logger)
                summary.baselines += 1
            }
            // Only the chunks of stored baselines: uploads in flight are not carried over.
            let chunks = try source.cached("SELECT blob, seq, bytes FROM baseline_chunks WHERE blob IN (SELECT blob FROM baselines) ORDER BY blob, seq")
            while try chunks.step() {
                let (blob, seq) = (chunks.int64(at: 0), Int32(chunks.int64(at: 1)))
                let bytes = chunks.withBytes(at: 2) { ByteBuffer(bytes: $0) }
                try await target.query("INSERT INTO baseline_chunks(blob, seq, bytes) VALUES (\(blob), \(seq), \(bytes))", logger: logger)
                summary.baselineChunks += 1
            }
            // New uploads get ids past every copied baseline's.
            try await target.query(
                "SELECT setval('baseline_uploads_id_seq', greatest((SELECT coalesce(max(blob), 0) FROM baselines), 1))", logger: logger)
        }

        if hasMeta, case .text(let id)? = try source.scalar("SELECT value FROM relay_meta WHERE key = 'id'"),
            let epoch = try source.int64("SELECT value FROM relay_meta WHERE key = 'epoch'")
        {
            try await target.query(
                """
                INSERT INTO relay_meta(key, value) VALUES ('id', \(id)), ('epoch', \(String(epoch)))
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """, logger: logger)
            summary.identity = "\(id)/\(epoch)"
        }
        // The copy is the database the relays will serve: its first start is no restore.
        let fingerprint = try await PostgresIdentity.fingerprint(target, logger: logger)
        try await target.query(
            "INSERT INTO relay_meta(key, value) VALUES ('fingerprint', \(fingerprint)) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            logger: logger)
        return summary
    }

    /// A batch of segment rows as the columns `unnest` takes.
    private struct SegmentColumns {
        var accounts: [String] = []
        var arrivals: [Int64] = []
        var nodes: [String] = []
        var firsts: [Int64] = []
        var lasts: [Int64] = []
        var digests: [ByteBuffer] = []
        var sizes: [Int64] = []
        var contents: [ByteBuffer] = []
        var bytes = 0
        var count: Int { accounts.count }

        mutating func append(_ row: Statement) {
            accounts.append(row.text(at: 0) ?? "")
            arrivals.append(row.int64(at: 1))
            nodes.append(row.text(at: 2) ?? "")
            firsts.append(row.int64(at: 3))
            lasts.append(row.int64(at: 4))
            digests.append(row.withBytes(at: 5) { ByteBuffer(bytes: $0) })
            sizes.append(row.int64(at: 6))
            let content = row.withBytes(at: 7) { ByteBuffer(bytes: $0) }
            bytes += content.readableBytes
            contents.append(content)
        }

        func insert(_ target: PostgresConnection, logger: Logger) async throws {
            guard count > 0 else { return }
            try await target.query(
                """
                INSERT INTO segments(account, arrival, node, first, last, digest, size, bytes)
                SELECT * FROM unnest(\(accounts)::text[], \(arrivals)::bigint[], \(nodes)::text[], \(firsts)::bigint[], \(lasts)::bigint[],
                                     \(digests)::bytea[], \(sizes)::bigint[], \(contents)::bytea[])
                """, logger: logger)
        }
    }
}

extension DatabaseValue {
    fileprivate var textValue: String {
        if case .text(let value) = self { return value }
        return ""
    }

    fileprivate var optionalText: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    fileprivate var integerValue: Int64 {
        if case .integer(let value) = self { return value }
        return 0
    }

    fileprivate var optionalInteger: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    fileprivate var blobValue: [UInt8] {
        if case .blob(let value) = self { return value }
        return []
    }
}
