import Foundation
import Synchronization

/// The one watcher loop of the package: a thread of its own that waits on a ``DirectoryWatch`` and hands
/// each wake-up to its body — or, where inotify is unavailable, sleeps for the timeout instead, so that
/// callers poll without a second code path. The commit monitor, the shared folder's arrivals and the
/// benchmarks' watchers are all one of these.
public final class WatchThread: Sendable {
    /// The inotify watch, nil when polling.
    public let watch: DirectoryWatch?
    private let stopped = Atomic<Bool>(false)

    /// What the body waits with, on the watcher's thread.
    public struct Waiter: Sendable {
        fileprivate let owner: WatchThread

        /// Blocks until something changes in a watched directory (`.event`, with what inotify said), until
        /// `timeoutMilliseconds` pass (`.timeout`; the only outcome when polling), or until ``stop()``
        /// (`.stopped`: the body should return).
        public func next(timeoutMilliseconds: Int32) -> (wake: DirectoryWatch.Wake, events: [DirectoryWatch.Event]) {
            if owner.isStopped { return (.stopped, []) }
            if let watch = owner.watch {
                let (wake, events) = watch.waitForEvents(timeoutMilliseconds: max(timeoutMilliseconds, 0))
                return (owner.isStopped ? .stopped : wake, events)
            }
            // Polling: sleep in slices, so that a stop is noticed within 50 ms.
            let deadline = ContinuousClock.now + .milliseconds(Int(max(timeoutMilliseconds, 1)))
            while case let remaining = deadline - ContinuousClock.now, remaining > .zero {
                if owner.isStopped { return (.stopped, []) }
                let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
                Thread.sleep(forTimeInterval: min(0.05, seconds))
            }
            return (owner.isStopped ? .stopped : .timeout, [])
        }
    }

    /// Starts `body` on a new thread named `name`; the thread ends when `body` returns.
    public init(name: String, watch: DirectoryWatch?, _ body: @escaping @Sendable (Waiter) -> Void) {
        self.watch = watch
        let thread = Thread { [self] in body(Waiter(owner: self)) }
        thread.name = name
        thread.start()
    }

    public var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Wakes the body's wait with `.stopped`; every later wait returns `.stopped` at once.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        watch?.stop()
    }
}
