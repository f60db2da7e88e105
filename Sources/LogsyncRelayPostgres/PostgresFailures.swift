import LogsyncRelay
import PostgresNIO
import Synchronization

/// How the PostgreSQL backend turns what went wrong into the relay's answers. A database that cannot be
/// reached, is shutting down or is too slow answers 503 with Retry-After: the relay recovers by itself
/// when it is back, and a node sends again (pushes are idempotent). Nothing is acknowledged that did not
/// commit; a push whose commit could not be confirmed may have been stored, which sending again finds.
enum PostgresFailures {
    /// Seconds a client waits before it tries again after a database failure.
    static let retryAfter = 1

    /// The error that stands for `error`, met while doing `what`.
    static func relayError(_ error: any Error, _ what: String) -> RelayError {
        if let relay = error as? RelayError { return relay }
        if error is DeadlineExceeded {
            return RelayError(
                .unavailable, "the relay's PostgreSQL database did not answer in time while \(what): nothing was acknowledged; send again shortly",
                retryAfter: retryAfter, cause: error as? DeadlineExceeded)
        }
        if let error = error as? PSQLError {
            if error.code == .server, let state = error.serverInfo?[.sqlState], state.hasPrefix("28") || state == "3D000" || state == "42501" {
                // A wrong password or role, a missing database, a missing grant: no retry mends these.
                return RelayError(
                    .unavailable, "PostgreSQL refused \(what): \(error.serverInfo?[.message] ?? "") (SQLSTATE \(state)): check [postgres] in the configuration and the role's grants",
                    cause: Described(error))
            }
            if error.code == .server, let state = error.serverInfo?[.sqlState], !transient(state) {
                return RelayError(
                    .storage, "the relay's PostgreSQL database refused \(what) (SQLSTATE \(state): \(error.serverInfo?[.message] ?? "")); nothing was changed",
                    retryAfter: retryAfter, cause: Described(error))
            }
            return RelayError(
                .unavailable,
                "the relay lost its PostgreSQL database while \(what) (\(error.code)\(error.serverInfo?[.sqlState].map { ", SQLSTATE \($0)" } ?? "")): nothing was acknowledged; send again shortly",
                retryAfter: retryAfter, cause: Described(error))
        }
        return RelayError(
            .unavailable, "the relay's PostgreSQL database failed while \(what): nothing was acknowledged; send again shortly", retryAfter: retryAfter,
            cause: Described(error))
    }

    /// SQLSTATEs of a database that is away, restarting, overloaded or chose this transaction to abort:
    /// the same request later succeeds.
    static func transient(_ state: String) -> Bool {
        state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57P") || state == "40001" || state == "40P01" || state == "25006"
    }

    struct DeadlineExceeded: Error, Sendable, CustomStringConvertible {
        let seconds: Int
        var description: String { "no answer within \(seconds) s (operation_timeout_s)" }
    }

    /// An error's text, kept as a `Sendable` cause.
    struct Described: Error, Sendable, CustomStringConvertible {
        let description: String
        init(_ error: any Error) { description = String(reflecting: error) }
    }

    /// Runs `body`, giving up after `seconds` (``DeadlineExceeded``): a request never waits longer than
    /// that for a connection or an answer, so a database that went away is a prompt 503. `body` runs in a
    /// task of its own, cancelled at the deadline: a query already sent cannot be taken back, and its
    /// answer, if one ever comes, is dropped.
    static func withDeadline<T: Sendable>(seconds: Int, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let once = Once<T>()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            once.set(continuation)
            let work = Task { once.finish(await Result(awaiting: body)) }
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                if once.finish(.failure(DeadlineExceeded(seconds: seconds))) { work.cancel() }
            }
        }
    }

    /// The continuation resumed by whichever of the work and the timer ends first.
    private final class Once<T: Sendable>: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, done: Bool)>((nil, false))

        func set(_ continuation: CheckedContinuation<T, any Error>) { state.withLock { $0.continuation = continuation } }

        /// Resumes with `result` unless something did already; true when this call did.
        @discardableResult
        func finish(_ result: Result<T, any Error>) -> Bool {
            let continuation: CheckedContinuation<T, any Error>? = state.withLock { state in
                guard !state.done else { return nil }
                state.done = true
                return state.continuation
            }
            continuation?.resume(with: result)
            return continuation != nil
        }
    }
}

extension Result where Failure == any Error {
    init(awaiting body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
