import CSQLite
import Crypto
import Foundation
import LogsyncCore
import LogsyncStore

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
    /// (returns a failure), what it wrote is rolled back and the rest of the batch goes on. A write that
    /// refuses only before it writes anything needs no savepoint (`savepoint` false): two statements
    /// fewer per push. `answer` is called once the batch committed, `fail` when the whole transaction
    /// failed.
    private struct Job {
        var bytes: Int
        var savepoint: Bool
        var work: (Connection) throws(SQLiteError) -> (refused: Bool, answer: () -> Void)
        var fail: (RelayError) -> Void
    }

    init(connection: Connection, maximumQueued: Int) {
        self.connection = connection
        self.maximumQueued = maximumQueued
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

    /// Runs `work` on the writer thread in the next batch and returns its result once the batch is
    /// durable. `bytes` is what it writes, for the batch's byte bound. `savepoint` false: `work` never
    /// writes before it refuses, so nothing needs undoing when it does (an SQLite error fails the whole
    /// batch either way).
    func submit<T: Sendable>(
        bytes: Int, savepoint: Bool = true, _ work: @escaping @Sendable (Connection) throws(SQLiteError) -> Result<T, RelayError>
    ) async throws(RelayError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, RelayError>, Never>) in
            let job = Job(
                bytes: bytes, savepoint: savepoint,
                work: { connection throws(SQLiteError) in
                    let outcome = try work(connection)
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
            for job in batch {
                guard job.savepoint else {
                    answers.append(try job.work(connection).answer)
                    continue
                }
                try connection.execute("SAVEPOINT job", [])
                let (refused, answer) = try job.work(connection)
                if refused { try connection.execute("ROLLBACK TO job", []) }
                try connection.execute("RELEASE job", [])
                answers.append(answer)
            }
            FaultPoints.beforeCommit()
            try connection.execute("COMMIT", [])
            return { for answer in answers { answer() } }
        } catch {
            try? connection.execute("ROLLBACK")
            let full = error.code == SQLITE_FULL
            let failure = RelayError(
                full ? .quotaExceeded : .storage,
                full ? "the relay's disk is full: nothing was stored; free space on the relay and send again"
                    : "the relay could not write to its database: nothing was changed; send again",
                retryAfter: full ? nil : 1, cause: error)
            return { for job in batch { job.fail(failure) } }
        }
    }
}

/// Where tests make the relay die at a chosen moment (`LOGSYNC_RELAY_FAULT`): `before-commit` kills the
/// process with the batch inserted but not committed — a push in flight, never acknowledged.
enum FaultPoints {
    static let fault = ProcessInfo.processInfo.environment["LOGSYNC_RELAY_FAULT"]

    static func beforeCommit() {
        if fault == "before-commit" { kill(getpid(), SIGKILL) }
    }
}
