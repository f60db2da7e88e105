import LogsyncCore
import LogsyncSQLite

/// Progress records and baselines in the relay's database. A baseline is kept as chunks of at most
/// ``RelayAPI/baselineChunkBytes`` (one row each), written as its upload arrives and read back one at a
/// time, so that neither an upload nor a download holds a whole baseline in memory.
extension SQLiteRelayStorage: RetentionStorage {
    public func putProgress(_ put: ProgressPut) async throws(RelayError) {
        try await writing(bytes: put.bytes.count) { connection throws(SQLiteError) in try MailboxWrites.putProgress(put, connection) }
    }

    public func progressRecords(account: String) throws(RelayError) -> [(node: NodeID, bytes: [UInt8])] {
        try reading { connection throws(SQLiteError) in
            try connection.rows("SELECT node, bytes FROM progress WHERE account = ? ORDER BY node", [.text(account)]).map { row in
                guard case .blob(let bytes) = row[1] else { return (NodeID(row[0].text ?? ""), []) }
                return (NodeID(row[0].text ?? ""), bytes)
            }
        }
    }

    public func deleteSegment(account: String, node: NodeID, firstSequence: UInt64, lastSequence: UInt64) async throws(RelayError) -> Bool {
        try await writing(bytes: 0) { connection throws(SQLiteError) in
            try MailboxWrites.deleteSegment(account: account, node: node, first: firstSequence, last: lastSequence, connection)
        }
    }

    public func usage(account: String) throws(RelayError) -> (used: Int64, quota: Int64?)? {
        try reading { connection throws(SQLiteError) in
            guard let row = try connection.rows("SELECT used_bytes, quota_bytes FROM accounts WHERE name = ?", [.text(account)]).first else { return nil }
            return (row[0].integer ?? 0, row[1].integer)
        }
    }

    public func beginBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Int64 {
        try await writing(bytes: 0) { connection throws(SQLiteError) in
            try MailboxWrites.beginBaseline(account: account, node: node, name: name, connection)
        }
    }

    public func appendBaselineChunk(upload: Int64, index: Int, bytes: [UInt8]) async throws(RelayError) {
        try await writing(bytes: bytes.count) { connection throws(SQLiteError) in
            try MailboxWrites.appendBaselineChunk(upload: upload, index: index, bytes: bytes, connection)
        }
    }

    public func finishBaseline(_ finish: BaselineFinish) async throws(RelayError) -> Bool {
        try await writing(bytes: 0) { connection throws(SQLiteError) in try MailboxWrites.finishBaseline(finish, connection) }
    }

    public func abandonBaseline(upload: Int64) async {
        _ = try? await writing(bytes: 0) { connection throws(SQLiteError) -> Result<Void, RelayError> in
            try MailboxWrites.dropUpload(upload, connection)
            return .success(())
        }
    }

    public func baselines(account: String) throws(RelayError) -> [StoredBaseline] {
        try reading { connection throws(SQLiteError) in
            try connection.rows("SELECT node, name, size, blob, chunks FROM baselines WHERE account = ? ORDER BY node, name", [.text(account)]).map(
                Self.storedBaseline)
        }
    }

    public func baseline(account: String, node: NodeID, name: String) throws(RelayError) -> StoredBaseline? {
        try reading { connection throws(SQLiteError) in
            try connection.rows(
                "SELECT node, name, size, blob, chunks FROM baselines WHERE account = ? AND node = ? AND name = ?",
                [.text(account), .text(node.rawValue), .text(name)]
            ).first.map(Self.storedBaseline)
        }
    }

    public func baselineChunk(blob: Int64, index: Int) throws(RelayError) -> [UInt8]? {
        try reading { connection throws(SQLiteError) in
            let statement = try connection.cached("SELECT bytes FROM baseline_chunks WHERE blob = ? AND seq = ?")
            try statement.bind([.integer(blob), .integer(Int64(index))])
            guard try statement.step() else { return nil }
            let bytes = statement.withBytes(at: 0) { Array($0.bindMemory(to: UInt8.self)) }
            statement.reset()
            return bytes
        }
    }

    public func deleteBaseline(account: String, node: NodeID, name: String) async throws(RelayError) -> Bool {
        try await writing(bytes: 0) { connection throws(SQLiteError) in
            try MailboxWrites.deleteBaseline(account: account, node: node, name: name, connection)
        }
    }

    private static func storedBaseline(_ row: [DatabaseValue]) -> StoredBaseline {
        StoredBaseline(
            node: NodeID(row[0].text ?? ""), name: row[1].text ?? "", size: row[2].integer ?? 0, blob: row[3].integer ?? 0,
            chunks: Int(row[4].integer ?? 0))
    }
}
