import Crypto
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

/// The one thread that writes to the relay's database: segment pushes, and the writes of bounded growth
/// (progress records, baseline chunks, deletions). Writes queue up while it commits; it then takes all of
/// them (up to ``maximumBatch`` or ``maximumBatchBytes``), runs each in one transaction, commits once —
/// one fsync — and only then answers each. Durability is per write; the fsync is shared.
final class GroupCommitWriter: @unchecked Sendable {
    // Everything below is guarded by `condition`, except `connection`, which only the writer thread uses.
    private let connection: Connection
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var stopping = false
    private var running = true
    private let maximumQueued: Int
    /// Told the count after each commit (``RelayEpoch``): the note of what this relay acknowledged.
    private let served: ServedNote?

    static let maximumBatch = 1_024
    static let maximumBatchBytes = 64 << 20

    /// Commits so far and writes they carried, for the metrics.
    private(set) var statistics = Statistics()

    struct Statistics: Sendable {
        var commits = 0
        var pushes = 0
        var commitSeconds = 0.0
    }

    /// One write. `work` runs inside the batch's transaction, in a savepoint of its own: when it refuses
    /// (returns a failure), what it wrote is rolled back and the rest of the batch goes on. A push
    /// (`savepoint` false) refuses only before it writes anything and needs none: two statements fewer
    /// per push; its account's row goes through the batch's ``AccountTally``. `answer` is called once the
    /// batch committed, `fail` when the whole transaction failed.
    private struct Job {
        var bytes: Int
        var savepoint: Bool
        var work: (Connection, AccountTally) throws(SQLiteError) -> (refused: Bool, answer: () -> Void)
        var fail: (RelayError) -> Void
    }

    init(connection: Connection, maximumQueued: Int, served: ServedNote? = nil) {
        self.connection = connection
        self.maximumQueued = maximumQueued
        self.served = served
        let thread = Thread { [self] in run() }
        thread.name = "relay-writer"
        thread.start()
    }

    var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running && !stopping
    }

    var currentStatistics: Statistics {
        condition.lock()
        defer { condition.unlock() }
        return statistics
    }

    /// Runs `work` on the writer thread in the next batch, in a savepoint of its own, and returns its
    /// result once the batch is durable. `bytes` is what it writes, for the batch's byte bound. The
    /// account rows the batch's pushes changed are written before it runs.
    func submit<T: Sendable>(
        bytes: Int, _ work: @escaping @Sendable (Connection) throws(SQLiteError) -> Result<T, RelayError>
    ) async throws(RelayError) -> T {
        try await enqueue(bytes: bytes, savepoint: true) { connection, _ throws(SQLiteError) in try work(connection) }
    }

    /// Runs a push's `work` on the writer thread in the next batch, without a savepoint: it must refuse
    /// only before it writes anything (an SQLite error fails the whole batch either way). It reads and
    /// changes its account's row through `tally`, which writes it once per batch.
    func submitPush<T: Sendable>(
        bytes: Int, _ work: @escaping @Sendable (Connection, AccountTally) throws(SQLiteError) -> Result<T, RelayError>
    ) async throws(RelayError) -> T {
        try await enqueue(bytes: bytes, savepoint: false, work)
    }

    private func enqueue<T: Sendable>(
        bytes: Int, savepoint: Bool, _ work: @escaping @Sendable (Connection, AccountTally) throws(SQLiteError) -> Result<T, RelayError>
    ) async throws(RelayError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, RelayError>, Never>) in
            let job = Job(
                bytes: bytes, savepoint: savepoint,
                work: { connection, tally throws(SQLiteError) in
                    let outcome = try work(connection, tally)
                    if case .failure = outcome { return (true, { continuation.resume(returning: outcome) }) }
                    return (false, { continuation.resume(returning: outcome) })
                },
                fail: { continuation.resume(returning: .failure($0)) })
            condition.lock()
            guard !stopping else {
                condition.unlock()
                job.fail(RelayError(.unavailable, "the relay is shutting down; send again to another instance or later", retryAfter: 5))
                return
            }
            guard queue.count < maximumQueued else {
                condition.unlock()
                job.fail(RelayError(.busy, "\(maximumQueued) writes are already waiting for the disk (max_queued_pushes): retry shortly", retryAfter: 1))
                return
            }
            queue.append(job)
            condition.signal()
            condition.unlock()
        }
        return try result.get()
    }

    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty && !stopping { condition.wait() }
            if queue.isEmpty && stopping {
                running = false
                condition.unlock()
                return
            }
            var batch: [Job] = []
            var bytes = 0
            while let job = queue.first, batch.count < Self.maximumBatch, batch.isEmpty || bytes + job.bytes <= Self.maximumBatchBytes {
                batch.append(job)
                bytes += job.bytes
                queue.removeFirst()
            }
            condition.unlock()
            let started = ContinuousClock.now
            let answers = commit(batch)
            let elapsed = ContinuousClock.now - started
            condition.lock()
            statistics.commits += 1
            statistics.pushes += batch.count
            statistics.commitSeconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            condition.unlock()
            answers()
        }
    }

    /// Runs every job in one transaction and returns what answers them. A job that refuses changes
    /// nothing; a failed transaction fails every job in it.
    private func commit(_ batch: [Job]) -> () -> Void {
        var answers: [() -> Void] = []
        answers.reserveCapacity(batch.count)
        do {
            // Prepared once and kept (with arguments, `execute` uses the connection's statement cache):
            // compiling a savepoint's SQL twice per write cost as much as the write's own statements.
            try connection.execute("BEGIN IMMEDIATE", [])
            let tally = AccountTally()
            for job in batch {
                guard job.savepoint else {
                    answers.append(try job.work(connection, tally).answer)
                    continue
                }
                // Other writes read and change account rows themselves.
                try tally.write(connection)
                try connection.execute("SAVEPOINT job", [])
                let (refused, answer) = try job.work(connection, tally)
                if refused { try connection.execute("ROLLBACK TO job", []) }
                try connection.execute("RELEASE job", [])
                answers.append(answer)
            }
            try tally.write(connection)
            var commits: Int64?
            if served != nil { commits = try RelayEpoch.countCommit(connection) }
            FaultPoints.beforeCommit()
            try connection.execute("COMMIT", [])
            // Noted before anything is acknowledged: what a node was told is stored, the note counts.
            if let commits { served?.record(commits: commits) }
            return { for answer in answers { answer() } }
        } catch {
            try? connection.execute("ROLLBACK")
            let full = error.isFull
            let failure = RelayError(
                full ? .quotaExceeded : .storage,
                full ? "the relay's disk is full: nothing was stored; free space on the relay and send again"
                    : "the relay could not write to its database: nothing was changed; send again",
                retryAfter: full ? nil : 1, cause: error)
            return { for job in batch { job.fail(failure) } }
        }
    }
}

/// The account rows a batch's pushes read and changed, written once per account rather than once per
/// push: the batch's transaction holds the database's write lock, so no one else changes them meanwhile.
/// Only the writer thread uses it, for one batch.
final class AccountTally {
    /// Each account's row as the batch's pushes left it.
    private var rows: [String: MailboxWrites.AccountRow] = [:]
    /// What those pushes added: bytes and segments.
    private var added: [String: (bytes: Int64, segments: Int64)] = [:]

    /// The account's row, with this batch's pushes so far; nil when the account no longer exists.
    func row(_ account: String, _ connection: Connection) throws(SQLiteError) -> MailboxWrites.AccountRow? {
        if let row = rows[account] { return row }
        let row = try MailboxWrites.account(account, connection)
        rows[account] = row
        return row
    }

    /// Records a stored segment of `bytes` at `arrival`.
    func add(_ account: String, bytes: Int64, arrival: Int64) {
        rows[account]?.used += bytes
        rows[account]?.cursor = arrival
        added[account, default: (0, 0)].bytes += bytes
        added[account, default: (0, 0)].segments += 1
    }

    /// Writes what the pushes changed and forgets the rows (a write that follows reads them again).
    func write(_ connection: Connection) throws(SQLiteError) {
        for (account, change) in added {
            guard let cursor = rows[account]?.cursor else { continue }
            try connection.execute(
                "UPDATE accounts SET used_bytes = used_bytes + ?, cursor = ?, segments = segments + ? WHERE name = ?",
                [.integer(change.bytes), .integer(cursor), .integer(change.segments), .text(account)])
        }
        added.removeAll(keepingCapacity: true)
        rows.removeAll(keepingCapacity: true)
    }
}

/// Where tests make the relay die at a chosen moment (`LOGSYNC_RELAY_FAULT`): `before-commit` kills the
/// process with the batch inserted but not committed — a push in flight, never acknowledged (on
/// PostgreSQL: its statement sent, its answer not read). `no-listen` keeps a PostgreSQL relay from
/// listening for the other relays' notifications: only its re-check wakes its long-polls.
public enum FaultPoints {
    public static let fault = ProcessInfo.processInfo.environment["LOGSYNC_RELAY_FAULT"]

    public static func beforeCommit() {
        if fault == "before-commit" { FaultInjection.die() }
    }
}
