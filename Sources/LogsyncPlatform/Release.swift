import Dispatch
import Synchronization

/// Lets go of a large value on another thread, so that the thread that is done with it does not spend its
/// time freeing it.
///
/// A decoded segment of 2,000 inserts is some 10,000 heap objects (transactions, changes, value
/// dictionaries, prepared rows). Freed by the import's writer, inside its write transaction, they took
/// 6.6 % of an insert-only replay (`docs/BENCHMARKS-history.md`, "The write path"), all of it while the
/// store's write lock was held. One serial queue at utility priority frees them instead, in the order they
/// were handed over.
///
/// The queue is bounded: while ``limit`` values wait to be freed, the caller frees the next one itself, so
/// a starved queue never holds more than that in memory.
public enum Release {
    public static let limit = 8

    private static let queue = DispatchQueue(label: "logsync.release", qos: .utility)
    private static let waiting = Atomic<Int>(0)

    /// Frees `value` on the release queue, or here when ``limit`` values already wait there. The caller
    /// must hold no other reference to what it holds, or that reference frees it where it is dropped.
    public static func elsewhere<Value: Sendable>(_ value: consuming Value) {
        guard waiting.add(1, ordering: .relaxed).newValue <= limit else {
            waiting.subtract(1, ordering: .relaxed)
            return
        }
        // Dispatch frees a block's captures once it has run, before the next block: the value is gone when
        // the second one gives its place back.
        queue.async { [value = consume value] in withExtendedLifetime(value) {} }
        queue.async { waiting.subtract(1, ordering: .relaxed) }
    }
}
