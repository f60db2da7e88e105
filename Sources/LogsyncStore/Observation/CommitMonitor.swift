import Foundation
import LogsyncCore
import LogsyncPlatform

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
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let watch = DirectoryWatch(directory: directory)
        let stopped = Locked(false)
        let pollMilliseconds = Int32(clamping: pollInterval.components.seconds * 1000 + pollInterval.components.attoseconds / 1_000_000_000_000_000)
        continuation.onTermination = { _ in
            stopped.withLock { $0 = true }
            watch?.stop()
        }
        // The baseline is taken before returning, so every commit after this call is reported.
        let baselineVersion = (try? dataVersion()) ?? 0
        let baselineToken = (try? sealPendingChanges()) ?? .zero
        let thread = Thread { [self] in
            var lastVersion = baselineVersion
            var lastToken = baselineToken
            // A writer appends to the WAL (an inotify event) before it publishes the commit in the
            // memory-mapped -shm index (no event), so a check right after the event can come too early.
            // After an event, re-check every 2 ms for a short while instead of waiting for the next one.
            var recheckUntil: ContinuousClock.Instant?
            while !stopped.withLock({ $0 }) {
                if let watch {
                    // Inotify delivers local commits at once; the slow timeout covers file systems that do not
                    // report changes made by other hosts.
                    let rechecking = recheckUntil.map { ContinuousClock.now < $0 } ?? false
                    switch watch.wait(timeoutMilliseconds: rechecking ? 2 : 1_000) {
                    case .stopped: break
                    case .event: recheckUntil = ContinuousClock.now + .milliseconds(50)
                    case .timeout: if !rechecking { recheckUntil = nil }
                    }
                    if stopped.withLock({ $0 }) { break }
                } else {
                    Thread.sleep(forTimeInterval: Double(pollMilliseconds) / 1000)
                }
                guard let version = try? dataVersion(), version != lastVersion else { continue }
                lastVersion = version
                guard let token = try? sealPendingChanges(), token > lastToken else { continue }
                lastToken = token
                continuation.yield(token)
            }
            continuation.finish()
        }
        thread.name = "logsync.commit-monitor"
        thread.start()
        return stream
    }
}
