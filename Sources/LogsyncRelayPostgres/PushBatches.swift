import Crypto
import LogsyncCore
import LogsyncRelay
import NIOCore
import PostgresNIO
import Synchronization

/// Group commit for the PostgreSQL backend: pushes queue up while a batch commits; each of
/// ``PostgresConnectionSettings/pushWriters`` loops then takes everything queued (up to
/// ``maximumBatch`` pushes or ``maximumBatchBytes``) and stores it with one statement, one transaction,
/// one commit (`logsync_push`, ``PostgresSchema/pushFunction``). Each push is answered once the
/// statement returned — committed — and never before.
final class PushBatches: Sendable {
    static let maximumBatch = 1_024
    static let maximumBatchBytes = 64 << 20

    struct Job: Sendable {
        var push: SegmentPush
        var digest: [UInt8]
        var answer: @Sendable (Result<PushOutcome, RelayError>) -> Void
    }

    struct Statistics: Sendable {
        var commits = 0
        var pushes = 0
        var commitSeconds = 0.0
    }

    private struct State {
        var queue: [Job] = []
        var stopping = false
        /// Writer loops waiting for work.
        var idle: [CheckedContinuation<Void, Never>] = []
        var statistics = Statistics()
    }

    private let state = Mutex(State())
    private let maximumQueued: Int
    private let store: @Sendable ([Job]) async throws -> [Result<PushOutcome, RelayError>]

    /// `store` runs one batch and returns each push's outcome, in order; when it throws, every push of
    /// the batch fails with the error.
    init(maximumQueued: Int, store: @escaping @Sendable ([Job]) async throws -> [Result<PushOutcome, RelayError>]) {
        self.maximumQueued = maximumQueued
        self.store = store
    }

    var statistics: Statistics { state.withLock { $0.statistics } }

    func submit(_ push: SegmentPush) async throws(RelayError) -> PushOutcome {
        let digest = Array(SHA256.hash(data: push.bytes))
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PushOutcome, RelayError>, Never>) in
            let job = Job(push: push, digest: digest) { continuation.resume(returning: $0) }
            let (refusal, wake): (RelayError?, CheckedContinuation<Void, Never>?) = state.withLock { state in
                if state.stopping {
                    return (RelayError(.unavailable, "the relay is shutting down; send again to another instance or later", retryAfter: 5), nil)
                }
                guard state.queue.count < maximumQueued else {
                    return (
                        RelayError(
                            .busy, "\(maximumQueued) writes are already waiting for the database (max_queued_pushes): retry shortly", retryAfter: 1), nil
                    )
                }
                state.queue.append(job)
                return (nil, state.idle.popLast())
            }
            if let refusal { job.answer(.failure(refusal)) }
            wake?.resume()
        }
        return try result.get()
    }

    /// Runs `writers` loops until ``stop()`` and the queue is empty.
    func run(writers: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, writers) { group.addTask { await self.loop() } }
        }
    }

    func stop() {
        let idle = state.withLock { state in
            state.stopping = true
            defer { state.idle = [] }
            return state.idle
        }
        for continuation in idle { continuation.resume() }
    }

    private func loop() async {
        while let batch = await nextBatch() {
            let started = ContinuousClock.now
            let outcomes: [Result<PushOutcome, RelayError>]
            do {
                outcomes = try await store(batch)
            } catch {
                let failure = PostgresFailures.relayError(error, "storing \(batch.count) pushes")
                outcomes = Array(repeating: .failure(failure), count: batch.count)
            }
            let elapsed = ContinuousClock.now - started
            state.withLock { state in
                state.statistics.commits += 1
                state.statistics.pushes += batch.count
                state.statistics.commitSeconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            }
            for (job, outcome) in zip(batch, outcomes) { job.answer(outcome) }
        }
    }

    /// The next batch, or nil once stopping with nothing queued.
    private func nextBatch() async -> [Job]? {
        while true {
            let taken: [Job]?? = state.withLock { state in
                if state.queue.isEmpty { return state.stopping ? .some(nil) : nil }
                var bytes = 0
                var count = 0
                for job in state.queue {
                    guard count < Self.maximumBatch, count == 0 || bytes + job.push.bytes.count <= Self.maximumBatchBytes else { break }
                    bytes += job.push.bytes.count
                    count += 1
                }
                let batch = Array(state.queue.prefix(count))
                state.queue.removeFirst(count)
                return .some(batch)
            }
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if !state.queue.isEmpty || state.stopping { return true }
                    state.idle.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    /// Stores `batch` through `logsync_push` on `client`: its outcomes in order, once they committed.
    ///
    /// In an explicit transaction: a statement on its own commits at the protocol's Sync, after its rows
    /// and its CommandComplete have been sent, so its answer can arrive before a commit that then fails
    /// (a server stopped in between). COMMIT's answer comes only once the commit is durable.
    static func store(_ batch: [Job], client: PostgresClient, logger: Logger) async throws -> [Result<PushOutcome, RelayError>] {
        try await client.withConnection { connection in
            try await connection.inTransaction(logger: logger) { connection in try await store(batch, on: connection, logger: logger) }
        }
    }

    private static func store(_ batch: [Job], on connection: PostgresConnection, logger: Logger) async throws -> [Result<PushOutcome, RelayError>] {
        let accounts = batch.map(\.push.account)
        let nodes = batch.map(\.push.node.rawValue)
        let firsts = batch.map { Int64(bitPattern: $0.push.firstSequence) }
        let lasts = batch.map { Int64(bitPattern: $0.push.lastSequence) }
        let digests = batch.map { ByteBuffer(bytes: $0.digest) }
        let bytes = batch.map { ByteBuffer(bytes: $0.push.bytes) }
        let quotas = batch.map(\.push.defaultQuotaBytes)
        let rows = try await connection.query(
            "SELECT o_outcome, o_arrival, o_detail FROM logsync_push(\(accounts), \(nodes), \(firsts), \(lasts), \(digests), \(bytes), \(quotas))",
            logger: logger)
        FaultPoints.beforeCommit()
        var outcomes: [Result<PushOutcome, RelayError>] = []
        outcomes.reserveCapacity(batch.count)
        for try await (outcome, arrival, detail) in rows.decode((Int16, Int64, String?).self) {
            let push = batch[outcomes.count].push
            outcomes.append(Self.outcome(outcome, arrival: arrival, detail: detail, push))
        }
        guard outcomes.count == batch.count else {
            throw RelayError(.storage, "logsync_push answered \(outcomes.count) outcomes for \(batch.count) pushes: nothing is acknowledged")
        }
        return outcomes
    }

    private static func outcome(_ code: Int16, arrival: Int64, detail: String?, _ push: SegmentPush) -> Result<PushOutcome, RelayError> {
        switch code {
        case 0: return .success(.stored(arrival: UInt64(arrival)))
        case 1: return .success(.duplicate(arrival: UInt64(arrival)))
        case 2: return .failure(StorageRefusals.otherBytes(node: push.node, first: push.firstSequence, last: push.lastSequence))
        case 3:
            let range = detail.flatMap { RelayNames.parseRange($0) } ?? (0, 0)
            return .failure(
                StorageRefusals.overlap(node: push.node, first: push.firstSequence, last: push.lastSequence, storedFirst: range.first, storedLast: range.last))
        case 4:
            let numbers = (detail ?? "").split(separator: " ").compactMap { Int64($0) }
            return .failure(StorageRefusals.overQuota(push.account, numbers.first ?? 0, quota: numbers.last ?? 0, what: "segment"))
        default: return .failure(StorageRefusals.missingAccount(push.account))
        }
    }
}
