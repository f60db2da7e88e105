import Dispatch
import Synchronization

/// A value computed on another thread while the caller does something else, then collected with
/// ``value()``.
///
/// Imports use it to read and decode a node's next segment while the current one is applied: the
/// decoding runs on the second core instead of adding to the time the store's write lock is held.
/// A prefetch that is never collected finishes its work and is dropped.
public final class Prefetch<Value: Sendable>: Sendable {
    private let result = Mutex<Value?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts `work` at once on a global queue.
    public init(_ work: @escaping @Sendable () -> Value) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            let value = work()
            result.withLock { $0 = value }
            finished.signal()
        }
    }

    /// The value, waiting for the work to finish if it has not. Can be called more than once.
    public func value() -> Value {
        finished.wait()
        // Let any later call through too.
        finished.signal()
        return result.withLock { value in
            guard let value else { preconditionFailure("Prefetch finished without a value") }
            return value
        }
    }
}
