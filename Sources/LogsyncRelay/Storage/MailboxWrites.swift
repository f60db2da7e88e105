import LogsyncCore
import LogsyncSQLite

/// What the writer thread runs, one function per kind of write, each inside the batch's transaction
/// (``GroupCommitWriter``). A refusal returns a failure before or instead of writing; the savepoint
/// around each write undoes anything a refusal left.
enum MailboxWrites {
    /// Stores a segment, or says the same bytes are stored already. Every refusal comes before its first
    /// write (it runs without a savepoint of its own). The account's row is read and changed through the
    /// batch's `accounts`, which writes it once per batch.
    static func insertSegment(
        _ push: SegmentPush, digest: [UInt8], _ connection: Connection, _ accounts: AccountTally
    ) throws(SQLiteError) -> Result<PushOutcome, RelayError> {
        // The stored segment of this node that starts last at or before this one's end: the only one that
        // can overlap it, since stored ranges never overlap.
        let previous = try connection.cached(
            "SELECT first, last, digest, arrival FROM segments WHERE account = ? AND node = ? AND first <= ? ORDER BY first DESC LIMIT 1")
        try previous.bind([.text(push.account), .text(push.node.rawValue), .integer(Int64(bitPattern: push.lastSequence))])
        if try previous.step() {
            let first = UInt64(bitPattern: previous.int64(at: 0))
            let last = UInt64(bitPattern: previous.int64(at: 1))
            let same = previous.withBytes(at: 2) { $0.elementsEqual(digest) }
            let arrival = UInt64(bitPattern: previous.int64(at: 3))
            previous.reset()
            if last >= push.firstSequence {
                if first == push.firstSequence, last == push.lastSequence {
                    guard same else { return .failure(StorageRefusals.otherBytes(node: push.node, first: first, last: last)) }
                    return .success(.duplicate(arrival: arrival))
                }
                return .failure(
                    StorageRefusals.overlap(node: push.node, first: push.firstSequence, last: push.lastSequence, storedFirst: first, storedLast: last))
            }
        }
        let size = Int64(push.bytes.count)
        guard let row = try accounts.row(push.account, connection) else { return .failure(missingAccount(push.account)) }
        let quota = row.quota ?? push.defaultQuotaBytes
        guard row.used + size <= quota else { return .failure(overQuota(push.account, row.used + size, quota: quota, what: "segment")) }
        let arrival = row.cursor + 1
        let insert = try connection.cached(
            "INSERT INTO segments(account, arrival, node, first, last, digest, size, bytes) VALUES(?, ?, ?, ?, ?, ?, ?, ?)")
        try insert.bind([
            .text(push.account), .integer(arrival), .text(push.node.rawValue), .integer(Int64(bitPattern: push.firstSequence)),
            .integer(Int64(bitPattern: push.lastSequence)), .blob(digest), .integer(size), .blob(push.bytes),
        ])
        try insert.run()
        accounts.add(push.account, bytes: size, arrival: arrival)
        return .success(.stored(arrival: UInt64(arrival)))
    }

    /// Deletes one of a node's segments: true when it was there. Its arrival number is never reused, so
    /// pull cursors past it stay valid; a puller after it simply does not get it.
    static func deleteSegment(account: String, node: NodeID, first: UInt64, last: UInt64, _ connection: Connection) throws(SQLiteError) -> Result<Bool, RelayError> {
        let key: [DatabaseValue] = [.text(account), .text(node.rawValue), .integer(Int64(bitPattern: first)), .integer(Int64(bitPattern: last))]
        guard let size = try connection.int64("SELECT size FROM segments WHERE account = ? AND node = ? AND first = ? AND last = ?", key) else {
            return .success(false)
        }
        try connection.execute("DELETE FROM segments WHERE account = ? AND node = ? AND first = ? AND last = ?", key)
        try connection.execute(
            "UPDATE accounts SET used_bytes = used_bytes - ?, segments = segments - 1 WHERE name = ?", [.integer(size), .text(account)])
        return .success(true)
    }

    /// Replaces a node's progress record; the account's usage follows the difference in size.
    static func putProgress(_ put: ProgressPut, _ connection: Connection) throws(SQLiteError) -> Result<Void, RelayError> {
        let old = try connection.int64("SELECT size FROM progress WHERE account = ? AND node = ?", [.text(put.account), .text(put.node.rawValue)]) ?? 0
        if case .failure(let refusal) = try charge(
            put.account, Int64(put.bytes.count) - old, defaultQuotaBytes: put.defaultQuotaBytes, what: "progress record", connection)
        {
            return .failure(refusal)
        }
        try connection.execute(
            "INSERT OR REPLACE INTO progress(account, node, size, bytes, updated_ms) VALUES(?, ?, ?, ?, ?)",
            [.text(put.account), .text(put.node.rawValue), .integer(Int64(put.bytes.count)), .blob(put.bytes), .integer(SQLiteRelayStorage.now())])
        return .success(())
    }

    /// A new upload of a baseline: an id its chunks are stored under until it is finished or abandoned.
    static func beginBaseline(account: String, node: NodeID, name: String, _ connection: Connection) throws(SQLiteError) -> Result<Int64, RelayError> {
        try connection.execute(
            "INSERT INTO baseline_uploads(account, node, name, started_ms) VALUES(?, ?, ?, ?)",
            [.text(account), .text(node.rawValue), .text(name), .integer(SQLiteRelayStorage.now())])
        return .success(try connection.int64("SELECT last_insert_rowid()") ?? 0)
    }

    static func appendBaselineChunk(upload: Int64, index: Int, bytes: [UInt8], _ connection: Connection) throws(SQLiteError) -> Result<Void, RelayError> {
        try connection.execute(
            "INSERT INTO baseline_chunks(blob, seq, bytes) VALUES(?, ?, ?)", [.integer(upload), .integer(Int64(index)), .blob(bytes)])
        return .success(())
    }

    /// Makes an upload a stored baseline, or says the same bytes are stored under its name already (the
    /// upload is dropped then), or refuses other bytes under a stored name, or an account over its quota.
    static func finishBaseline(_ finish: BaselineFinish, _ connection: Connection) throws(SQLiteError) -> Result<Bool, RelayError> {
        let key: [DatabaseValue] = [.text(finish.account), .text(finish.node.rawValue), .text(finish.name)]
        let stored = try connection.rows("SELECT digest FROM baselines WHERE account = ? AND node = ? AND name = ?", key).first
        if let stored {
            try dropUpload(finish.upload, connection)
            guard case .blob(let digest) = stored[0], digest == finish.digest else {
                return .failure(StorageRefusals.otherBaseline(node: finish.node, name: finish.name))
            }
            return .success(false)
        }
        if case .failure(let refusal) = try charge(finish.account, finish.size, defaultQuotaBytes: finish.defaultQuotaBytes, what: "baseline", connection) {
            return .failure(refusal)
        }
        try connection.execute(
            "INSERT INTO baselines(account, node, name, blob, chunks, digest, size, created_ms) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
            key + [.integer(finish.upload), .integer(Int64(finish.chunks)), .blob(finish.digest), .integer(finish.size), .integer(SQLiteRelayStorage.now())])
        // Its chunks now belong to the baseline: no longer an upload that a restart would clear.
        try connection.execute("DELETE FROM baseline_uploads WHERE id = ?", [.integer(finish.upload)])
        return .success(true)
    }

    /// Forgets an upload and its chunks (refused, cut short, or a duplicate).
    static func dropUpload(_ upload: Int64, _ connection: Connection) throws(SQLiteError) {
        try connection.execute("DELETE FROM baseline_chunks WHERE blob = ?", [.integer(upload)])
        try connection.execute("DELETE FROM baseline_uploads WHERE id = ?", [.integer(upload)])
    }

    /// Deletes a stored baseline with its chunks: true when it was there.
    static func deleteBaseline(account: String, node: NodeID, name: String, _ connection: Connection) throws(SQLiteError) -> Result<Bool, RelayError> {
        let key: [DatabaseValue] = [.text(account), .text(node.rawValue), .text(name)]
        guard let row = try connection.rows("SELECT blob, size FROM baselines WHERE account = ? AND node = ? AND name = ?", key).first,
            case .integer(let blob) = row[0], case .integer(let size) = row[1]
        else { return .success(false) }
        try connection.execute("DELETE FROM baseline_chunks WHERE blob = ?", [.integer(blob)])
        try connection.execute("DELETE FROM baselines WHERE account = ? AND node = ? AND name = ?", key)
        try connection.execute("UPDATE accounts SET used_bytes = used_bytes - ? WHERE name = ?", [.integer(size), .text(account)])
        return .success(true)
    }

    struct AccountRow {
        var used: Int64
        /// nil: the relay's default quota.
        var quota: Int64?
        var cursor: Int64
    }

    /// The account's usage, own quota and cursor, or nil when it no longer exists.
    static func account(_ account: String, _ connection: Connection) throws(SQLiteError) -> AccountRow? {
        let statement = try connection.cached("SELECT used_bytes, quota_bytes, cursor FROM accounts WHERE name = ?")
        try statement.bind([.text(account)])
        guard try statement.step() else { return nil }
        let row = AccountRow(
            used: statement.int64(at: 0), quota: statement.isNull(at: 1) ? nil : statement.int64(at: 1), cursor: statement.int64(at: 2))
        statement.reset()
        return row
    }

    static func missingAccount(_ account: String) -> RelayError { StorageRefusals.missingAccount(account) }

    static func overQuota(_ account: String, _ total: Int64, quota: Int64, what: String) -> RelayError {
        StorageRefusals.overQuota(account, total, quota: quota, what: what)
    }

    /// Adds `bytes` (negative: frees them) to the account's usage, or refuses when that would go over its
    /// quota. Segments, baselines and progress records all count.
    static func charge(
        _ account: String, _ bytes: Int64, defaultQuotaBytes: Int64, what: String, _ connection: Connection
    ) throws(SQLiteError) -> Result<AccountRow, RelayError> {
        guard let row = try Self.account(account, connection) else { return .failure(missingAccount(account)) }
        let quota = row.quota ?? defaultQuotaBytes
        guard bytes <= 0 || row.used + bytes <= quota else { return .failure(overQuota(account, row.used + bytes, quota: quota, what: what)) }
        try connection.execute("UPDATE accounts SET used_bytes = used_bytes + ? WHERE name = ?", [.integer(bytes), .text(account)])
        return .success(AccountRow(used: row.used + bytes, quota: quota, cursor: row.cursor))
    }
}
