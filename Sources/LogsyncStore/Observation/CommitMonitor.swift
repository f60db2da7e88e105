import Foundation
import LogsyncCore
import LogsyncPlatform
import Synchronization

/// A running commit monitor (``Store/observeCommits(pollInterval:_:finished:)``); ``cancel()`` ends it.
public final class CommitObservation: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let watch: DirectoryWatch?

    init(watch: DirectoryWatch?) { self.watch = watch }

    /// Ends the monitor: its thread returns within one wait (at once where inotify is used), and the
    /// handler is not called again once it has returned.
    public func cancel() {
        stopped.store(true, ordering: .releasing)
        watch?.stop()
    }

    var isCancelled: Bool { stopped.load(ordering: .acquiring) }
}

extension Store {
    /// Notifies of commits by any connection or process, as the new history token — the analogue of Core
    /// Data's remote change notification.
    ///
    /// Inotify on the store's directory wakes the monitor when the database or its WAL is written, and
    /// `PRAGMA data_version` confirms that a commit happened (reads and checkpoints also touch the files).
    /// Changes left by foreign writers are sealed into history before their token is reported. Where
    /// inotify is unavailable the monitor polls `data_version` every `pollInterval`. Nothing spins: the
    /// monitor thread sleeps in poll(2) between events.
    ///
    /// The stream ends when the task iterating it is cancelled or the stream is dropped.
    public func commits(pollInterval: Duration = .milliseconds(20)) -> AsyncStream<HistoryToken> {
        let (stream, continuation) = AsyncStream<HistoryToken>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let observation = observeCommits(pollInterval: pollInterval) { continuation.yield($0) } finished: { continuation.finish() }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    /// Calls `handler` with the new history token after each commit by any connection or process (as
    /// ``commits(pollInterval:)`` reports them), on the monitor's own thread: the handler may block (read
    /// history, wait for a lock) without holding up anything but the monitor, and the next commit is
    /// looked for once it returns. `finished` is called on that thread when the monitor ends.
    public func observeCommits(
        pollInterval: Duration = .milliseconds(20), _ handler: @escaping @Sendable (HistoryToken) -> Void,
        finished: @escaping @Sendable () -> Void = {}
    ) -> CommitObservation {
        observeCommits(pollInterval: pollInterval, fallbackMilliseconds: Self.commitFallbackMilliseconds, handler, finished: finished)
    }

    /// How long the monitor waits with inotify before it looks anyway (for file systems that do not report
    /// other hosts' changes): 1 s, or `LOGSYNC_COMMIT_FALLBACK_MS`, which tests set to a minute so that a
    /// commit the fast path missed shows as a missed deadline rather than as a slow second.
    static let commitFallbackMilliseconds = FaultInjection.milliseconds("LOGSYNC_COMMIT_FALLBACK_MS", default: 1_000)

    /// ``observeCommits(pollInterval:_:finished:)`` with the fallback's wait given.
    func observeCommits(
        pollInterval: Duration, fallbackMilliseconds: Int32, _ handler: @escaping @Sendable (HistoryToken) -> Void,
        finished: @escaping @Sendable () -> Void = {}
    ) -> CommitObservation {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let watch = DirectoryWatch(directory: directory)
        let observation = CommitObservation(watch: watch)
        let pollMilliseconds = Int32(clamping: pollInterval.components.seconds * 1000 + pollInterval.components.attoseconds / 1_000_000_000_000_000)
        // The baseline is taken before returning, so every commit after this call is reported.
        let baselineVersion = (try? dataVersion()) ?? 0
        let baselineToken = (try? sealPendingChanges()) ?? .zero
        _ = WatchThread(name: "logsync.commit-monitor", watch: watch) { [self] waiter in
            var lastVersion = baselineVersion
            var lastToken = baselineToken
            // A writer appends to the WAL (an inotify event) before it publishes the commit in the
            // memory-mapped -shm index (no event), so a check right after the event can come too early, and
            // on a busy machine the writer may publish a long while later. After each event the monitor
            // re-checks without waiting for another: 2 ms, then twice as long each time up to 200 ms, for
            // 10 s after the last event. Finding a commit does not end the re-checks: events of a second
            // commit may have been coalesced with those of the first.
            var recheck: (until: ContinuousClock.Instant, wait: Int32)?
            while !observation.isCancelled {
                // Inotify delivers local commits at once; the slow timeout covers file systems that do not
                // report changes made by other hosts. Without inotify, the wait is the poll interval.
                if let window = recheck, ContinuousClock.now >= window.until { recheck = nil }
                let wait = watch == nil ? pollMilliseconds : recheck?.wait ?? fallbackMilliseconds
                switch waiter.next(timeoutMilliseconds: wait).wake {
                case .stopped: break
                case .event: recheck = (ContinuousClock.now + .seconds(10), 2)
                case .timeout: recheck?.wait = min(wait * 2, 200)
                }
                if observation.isCancelled { break }
                guard let version = try? dataVersion(), version != lastVersion else { continue }
                lastVersion = version
                guard let token = try? sealPendingChanges(), token > lastToken else { continue }
                lastToken = token
                if observation.isCancelled { break }
                handler(token)
            }
            finished()
        }
        return observation
    }
}
