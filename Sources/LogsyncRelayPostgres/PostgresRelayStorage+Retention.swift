import LogsyncCore
import LogsyncRelay
import NIOCore
import PostgresNIO

/// Progress records, baselines and deletions (docs/retention.md), each in a transaction of its own on a
/// pooled connection. Every write that changes an account's usage locks the account's row first, as
/// the push batches do: writers never wait for each other in a cycle.
extension PostgresRelayStorage: RetentionStorage {
    /// Adds `bytes` to the account's usage under its row lock, or refuses past its quota.
    static func charge(
        _ connection: PostgresConnection, account: String, bytes: Int64, defaultQuota: Int64, what: String, logger: Logger
    ) async throws {
        let row = try await connection.first(
            "SELECT used_bytes, quota_bytes FROM accounts WHERE name = \(account) FOR UPDATE", as: (Int64, Int64?).self, logger: logger)
        guard let (used, quota) = row else { throw StorageRefusals.missingAccount(account) }
        let limit = quota ?? defaultQuota
        guard bytes <= 0 || used + bytes <= limit else { throw StorageRefusals.overQuota(account, used + bytes, quota: limit, what: what) }
        try await connection.query("UPDATE accounts SET used_bytes = used_bytes + \(bytes) WHERE name = \(account)", logger: logger)
    }

    public func putProgress(_ put: ProgressPut) async throws(RelayError) {
        let (logger, now) = (self.logger, Self.now())
        try await transaction("storing a progress record") { connection in
            // The account's row first (in charge), then the record's.
            try await Self.charge(connection, account: put.account, bytes: 0, defaultQuota: put.defaultQuotaBytes, what: "progress record", logger: logger)
            let old =
                try await connection.first(
                    "SELECT size FROM progress WHERE account = \(put.account) AND node = \(put.node.rawValue) FOR UPDATE", as: Int64.self, logger: logger) ?? Int64(0)
            try await Self.charge(
                connection, account: put.account, bytes: Int64(put.bytes.count) - old, defaultQuota: put.defaultQuotaBytes, what: "progress record",
                logger: logger)
            try await connection.query(
                """
                INSERT INTO progress(account, node, size, bytes, updated_ms)
                VALUES (\(put.account), \(put.node.rawValue), \(Int64(put.bytes.count)), \(ByteBuffer(bytes: put.bytes)), \(now))
                ON CONFLICT (account, node) DO UPDATE SET size = excluded.size, bytes = excluded.bytes, updated_ms = excluded.updated_ms
                """, logger: logger)
        }
    }

    public func progressRecords(account: String) async throws(RelayError) -> [(node: NodeID, bytes: [UInt8])] {
        try await rows("reading progress records", "SELECT node, bytes FROM progress WHERE account = \(account) ORDER BY node", as: (String, ByteBuffer).self)
            .map { (NodeID($0.0), Array(buffer: $0.1)) }
    }

    public func deleteSegment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) async throws(RelayError) -> Bool {
        let (logger, first, last) = (self.logger, Int64(bitPattern: firstSequence), Int64(bitPattern: lastSequence))
        let deleted = try await transaction("deleting a segment") { connection -> Bool in
            try await Self.charge(connection, account: account, bytes: 0, defaultQuota: 0, what: "deletion", logger: logger)
            guard
                let size = try await connection.first(
                    "DELETE FROM segments WHERE account = \(account) AND node = \(node.rawValue) AND first = \(first) AND last = \(last) RETURNING size",
                    as: Int64.self, logger: logger)
            else { return false }
            try await connection.query(
                "UPDATE accounts SET used_bytes = used_bytes - \(size), segments = segments - 1 WHERE name = \(account)", logger: logger)
            return true
        }
        if deleted { hints.deleted() }
        return deleted
    }

    public func usage(account: String) async throws(RelayError) -> (used: Int64, quota: Int64?)? {
        try await rows("reading an account's usage", "SELECT used_bytes, quota_bytes FROM accounts WHERE name = \(account)", as: (Int64, Int64?).self)
            .first.map { (used: $0.0, quota: $0.1) }
    }

    public func beginBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Int64 {
        let (logger, now) = (self.logger, Self.now())
        let id = try await transaction("starting a baseline upload") { connection in
            try await connection.first(
                "INSERT INTO baseline_uploads(account, node, name, started_ms) VALUES (\(account), \(node.rawValue), \(name), \(now)) RETURNING id",
                as: Int64.self, logger: logger)
        }
        guard let id else { throw RelayError(.storage, "the relay's database gave no id for a new baseline upload") }
        return id
    }

    public func appendBaselineChunk(upload: Int64, index: Int, bytes: [UInt8]) async throws(RelayError) {
        let logger = self.logger
        try await transaction("storing a baseline chunk") { connection in
            try await connection.query(
                "INSERT INTO baseline_chunks(blob, seq, bytes) VALUES (\(upload), \(Int32(index)), \(ByteBuffer(bytes: bytes)))", logger: logger)
            return ()
        }
    }

    public func finishBaseline(_ finish: BaselineFinish) async throws(RelayError) -> Bool {
        let (logger, now) = (self.logger, Self.now())
        return try await transaction("storing a baseline") { connection -> Bool in
            try await Self.charge(connection, account: finish.account, bytes: 0, defaultQuota: finish.defaultQuotaBytes, what: "baseline", logger: logger)
            if let stored = try await connection.first(
                "SELECT digest FROM baselines WHERE account = \(finish.account) AND node = \(finish.node.rawValue) AND name = \(finish.name)",
                as: ByteBuffer.self, logger: logger)
            {
                try await Self.dropUpload(connection, finish.upload, logger: logger)
                guard Array(buffer: stored) == finish.digest else { throw StorageRefusals.otherBaseline(node: finish.node, name: finish.name) }
                return false
            }
            try await Self.charge(
                connection, account: finish.account, bytes: finish.size, defaultQuota: finish.defaultQuotaBytes, what: "baseline", logger: logger)
            try await connection.query(
                """
                INSERT INTO baselines(account, node, name, blob, chunks, digest, size, created_ms)
                VALUES (\(finish.account), \(finish.node.rawValue), \(finish.name), \(finish.upload), \(Int32(finish.chunks)),
                        \(ByteBuffer(bytes: finish.digest)), \(finish.size), \(now))
                """, logger: logger)
            // Its chunks now belong to the baseline: no longer an upload that a start would clear.
            try await connection.query("DELETE FROM baseline_uploads WHERE id = \(finish.upload)", logger: logger)
            return true
        }
    }

    static func dropUpload(_ connection: PostgresConnection, _ upload: Int64, logger: Logger) async throws {
        try await connection.query("DELETE FROM baseline_chunks WHERE blob = \(upload)", logger: logger)
        try await connection.query("DELETE FROM baseline_uploads WHERE id = \(upload)", logger: logger)
    }

    public func abandonBaseline(upload: Int64) async {
        let logger = self.logger
        _ = try? await transaction("dropping a baseline upload") { connection in
            try await Self.dropUpload(connection, upload, logger: logger)
            return ()
        }
    }

    public func baselines(account: String) async throws(RelayError) -> [StoredBaseline] {
        try await rows(
            "listing baselines", "SELECT node, name, size, blob, chunks FROM baselines WHERE account = \(account) ORDER BY node, name",
            as: (String, String, Int64, Int64, Int32).self
        ).map(Self.storedBaseline)
    }

    public func baseline(account: String, node: NodeID, name: String) async throws(RelayError) -> StoredBaseline? {
        try await rows(
            "reading a baseline",
            "SELECT node, name, size, blob, chunks FROM baselines WHERE account = \(account) AND node = \(node.rawValue) AND name = \(name)",
            as: (String, String, Int64, Int64, Int32).self
        ).first.map(Self.storedBaseline)
    }

    public func baselineChunk(blob: Int64, index: Int) async throws(RelayError) -> [UInt8]? {
        try await rows(
            "reading a baseline chunk", "SELECT bytes FROM baseline_chunks WHERE blob = \(blob) AND seq = \(Int32(index))", as: ByteBuffer.self
        ).first.map { Array(buffer: $0) }
    }

    public func deleteBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Bool {
        let logger = self.logger
        return try await transaction("deleting a baseline") { connection -> Bool in
            try await Self.charge(connection, account: account, bytes: 0, defaultQuota: 0, what: "deletion", logger: logger)
            guard
                let (blob, size) = try await connection.first(
                    "DELETE FROM baselines WHERE account = \(account) AND node = \(node.rawValue) AND name = \(name) RETURNING blob, size",
                    as: (Int64, Int64).self, logger: logger)
            else { return false }
            try await connection.query("DELETE FROM baseline_chunks WHERE blob = \(blob)", logger: logger)
            try await connection.query("UPDATE accounts SET used_bytes = used_bytes - \(size) WHERE name = \(account)", logger: logger)
            return true
        }
    }

    private static func storedBaseline(_ row: (String, String, Int64, Int64, Int32)) -> StoredBaseline {
        StoredBaseline(node: NodeID(row.0), name: row.1, size: row.2, blob: row.3, chunks: Int(row.4))
    }
}
