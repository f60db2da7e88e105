import Dispatch

/// Lets go of a large value on another thread, so that the thread that is done with it does not spend its
/// time freeing it.
///
/// A decoded segment of 2,000 inserts is some 10,000 heap objects (transactions, changes, value
/// dictionaries, prepared rows). Freed by the import's writer, inside its write transaction, they took
/// 6.6 % of an insert-only replay (`docs/BENCHMARKS-history.md`, "The write path"), all of it while the store's write lock
/// was held. One serial queue at utility priority frees them instead, in the order they were handed over.
public enum Release {
    private static let queue = DispatchQueue(label: "logsync.release", qos: .utility)

    /// Frees `value` on the release queue. The caller must hold no other reference to what it holds, or
    /// that reference frees it where it is dropped.
    public static func elsewhere<Value: Sendable>(_ value: consuming Value) {
        queue.async { [value] in withExtendedLifetime(value) {} }
    }
}
