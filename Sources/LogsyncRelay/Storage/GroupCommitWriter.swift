import CSQLite
import Crypto
import Foundation
import LogsyncCore
import LogsyncStore

/// The one thread that writes segments. Pushes queue up while it commits; it then takes all of them
/// (up to ``maximumBatch`` or ``maximumBatchBytes``), checks and inserts each in one transaction, commits
/// once — one fsync — and only then answers each push. Durability is per push; the fsync is shared.
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

    /// Commits so far and pushes they carried, for the metrics.
    private(set) var statistics = Statistics()

    struct Statistics: Sendable {
        var commits = 0
        var pushes = 0
        var commitSeconds = 0.0
    }

    private struct Job {
        var push: SegmentPush
        var digest: [UInt8]
        var continuation: CheckedContinuation<Result<PushOutcome, RelayError>, Never>
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

    func submit(_ push: SegmentPush) async throws(RelayError) -> PushOutcome {
        let digest = Array(SHA256.hash(data: push.bytes))
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PushOutcome, RelayError>, Never>) in
            condition.lock()
            guard !stopping else {
                condition.unlock()
                continuation.resume(returning: .failure(RelayError(.unavailable, "the relay is shutting down; push again to another instance or later", retryAfter: 5)))
                return
            }
            guard queue.count < maximumQueued else {
                condition.unlock()
                continuation.resume(
                    returning: .failure(
                        RelayError(.busy, "\(maximumQueued) pushes are already waiting for the disk (max_queued_pushes): retry shortly", retryAfter: 1)))
                return
            }
            queue.append(Job(push: push, digest: digest, continuation: continuation))
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
            while let job = queue.first, batch.count < Self.maximumBatch, batch.isEmpty || bytes + job.push.bytes.count <= Self.maximumBatchBytes {
                batch.append(job)
                bytes += job.push.bytes.count
                queue.removeFirst()
            }
            condition.unlock()
            let started = ContinuousClock.now
            let outcomes = commit(batch)
            let elapsed = ContinuousClock.now - started
            condition.lock()
            statistics.commits += 1
            statistics.pushes += batch.count
            statistics.commitSeconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            condition.unlock()
            for (job, outcome) in zip(batch, outcomes) { job.continuation.resume(returning: outcome) }
        }
    }

    /// Checks and inserts every job in one transaction. A job refused by its checks changes nothing; a
    /// failed transaction fails every job in it.
    private func commit(_ batch: [Job]) -> [Result<PushOutcome, RelayError>] {
        var outcomes: [Result<PushOutcome, RelayError>] = []
        do {
            try connection.execute("BEGIN IMMEDIATE")
            for job in batch { outcomes.append(try insert(job)) }
            FaultPoints.beforeCommit()
            try connection.execute("COMMIT")
            return outcomes
        } catch {
            try? connection.execute("ROLLBACK")
            let full = error.code == SQLITE_FULL
            let failure = RelayError(
                full ? .quotaExceeded : .storage,
                full ? "the relay's disk is full: nothing was stored; free space on the relay and push again"
                    : "the relay could not store the segment: nothing was stored; push again",
                retryAfter: full ? nil : 1, cause: error)
            return batch.map { _ in .failure(failure) }
        }
    }

    private func insert(_ job: Job) throws(SQLiteError) -> Result<PushOutcome, RelayError> {
        let push = job.push
        let name = "\(push.node)/\(RelayNames.rangeText(first: push.firstSequence, last: push.lastSequence))"
        // The stored segment of this node that starts last at or before this one's end: the only one that
        // can overlap it, since stored ranges never overlap.
        let previous = try connection.cached(
            "SELECT first, last, digest, arrival FROM segments WHERE account = ? AND node = ? AND first <= ? ORDER BY first DESC LIMIT 1")
        try previous.bind([.text(push.account), .text(push.node.rawValue), .integer(Int64(bitPattern: push.lastSequence))])
        if try previous.step() {
            let first = UInt64(bitPattern: previous.int64(at: 0))
            let last = UInt64(bitPattern: previous.int64(at: 1))
            let digest = previous.withBytes(at: 2) { Array($0.bindMemory(to: UInt8.self)) }
            let arrival = UInt64(bitPattern: previous.int64(at: 3))
            previous.reset()
            if last >= push.firstSequence {
                if first == push.firstSequence, last == push.lastSequence {
                    guard digest == job.digest else {
                        return .failure(
                            RelayError(.conflict, "segment \(name) is stored already with other bytes: a node never rewrites a segment (two machines may share a node id)"))
                    }
                    return .success(.duplicate(arrival: arrival))
                }
                return .failure(
                    RelayError(.conflict, "segment \(name) overlaps the stored segment \(push.node)/\(RelayNames.rangeText(first: first, last: last))"))
            }
        }
        guard let account = try connection.rows(
            "SELECT used_bytes, quota_bytes, cursor FROM accounts WHERE name = ?", [.text(push.account)]
        ).first, case .integer(let used) = account[0], case .integer(let cursor) = account[2] else {
            return .failure(RelayError(.forbidden, "the account \(RelayNames.quoted(push.account)) no longer exists"))
        }
        let quota: Int64
        if case .integer(let own) = account[1] { quota = own } else { quota = push.defaultQuotaBytes }
        let size = Int64(push.bytes.count)
        guard used + size <= quota else {
            return .failure(
                RelayError(
                    .quotaExceeded,
                    "the account \(RelayNames.quoted(push.account)) would hold \(used + size) bytes; its quota is \(quota) (quota_bytes): nothing was stored"))
        }
        let arrival = cursor + 1
        let insert = try connection.cached(
            "INSERT INTO segments(account, arrival, node, first, last, digest, size, bytes) VALUES(?, ?, ?, ?, ?, ?, ?, ?)")
        try insert.bind([
            .text(push.account), .integer(arrival), .text(push.node.rawValue), .integer(Int64(bitPattern: push.firstSequence)),
            .integer(Int64(bitPattern: push.lastSequence)), .blob(job.digest), .integer(size), .blob(push.bytes),
        ])
        try insert.run()
        try connection.execute(
            "UPDATE accounts SET cursor = ?, used_bytes = used_bytes + ?, segments = segments + 1 WHERE name = ?",
            [.integer(arrival), .integer(size), .text(push.account)])
        return .success(.stored(arrival: UInt64(arrival)))
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
