import Dispatch
import Synchronization

/// Runs `body` to completion from synchronous code — a command's `run()`, a benchmark suite — on the
/// cooperative pool, and returns what it returned or throws what it threw. Never call it from a task:
/// it blocks its thread until `body` ends.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            let value = try await body()
            outcome.withLock { $0 = .success(value) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}
