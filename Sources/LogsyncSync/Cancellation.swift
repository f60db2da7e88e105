import Synchronization

/// Asks a sync run to stop at its next safe point: between import batches, between nodes, before
/// publishing. Each batch is one SQLite transaction with its cursor, so stopping there loses nothing.
/// Set from any thread (syncd's SIGTERM handler); read by the run.
public final class Cancellation: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    public func cancel() { flag.store(true, ordering: .releasing) }

    public var isCancelled: Bool { flag.load(ordering: .acquiring) }
}
