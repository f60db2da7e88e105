#if canImport(Glibc)
import Glibc
#endif

/// Named crash points for fault tests. When the environment variable `LOGSYNC_FAULT` names a point,
/// reaching it kills the process with SIGKILL — the same as a power cut for everything not yet
/// committed or fsynced. Without the variable every point is a no-op costing one comparison.
public enum FaultInjection {
    private static let selected: String? = getenv("LOGSYNC_FAULT").map { String(cString: $0) }

    public static func point(_ name: StaticString) {
        guard let selected, selected == name.description else { return }
        die()
    }

    /// Whether `LOGSYNC_FAULT` names this point: for faults that are a branch, not a crash (a carrier
    /// that cannot be reached at one moment).
    public static func isSelected(_ name: StaticString) -> Bool { selected == name.description }

    /// SIGKILL of this process, now: what a power cut leaves.
    public static func die() -> Never {
        kill(getpid(), SIGKILL)
        fatalError("SIGKILL did not end the process")
    }

    /// Sleeps `milliseconds` when selected: a slow step (a publish to a slow disk), for tests of what
    /// happens meanwhile.
    public static func delay(_ name: StaticString, milliseconds: UInt32) {
        guard let selected, selected == name.description else { return }
        usleep(milliseconds * 1_000)
    }

    /// Holds the calling thread when selected until the file that `LOGSYNC_FAULT_GATE` names exists (at
    /// most five minutes), so that a test does something at that exact point and then lets it go on, with
    /// no window to hit in time; without a gate, `milliseconds`.
    public static func gate(_ name: StaticString, milliseconds: UInt32) {
        guard let selected, selected == name.description else { return }
        guard let gate = getenv("LOGSYNC_FAULT_GATE").map({ String(cString: $0) }) else {
            usleep(milliseconds * 1_000)
            return
        }
        StandardError.write(Array("fault injection: \(name) waits for \(gate)\n".utf8))
        for _ in 0..<30_000 where access(gate, F_OK) != 0 { usleep(10_000) }
    }

    /// Blocks the calling thread forever when selected: a hung loop, for watchdog tests. Says so on
    /// stderr first, so that a test waits for the hang instead of guessing when it comes.
    public static func hang(_ name: StaticString) {
        guard let selected, selected == name.description else { return }
        StandardError.write(Array("fault injection: \(name) hangs here\n".utf8))
        while true { sleep(3_600) }
    }

    /// A wait of `milliseconds`, unless the environment variable `variable` gives another (in
    /// milliseconds): lets a test make a fallback wait so long that relying on it shows as a missed
    /// deadline, instead of telling a fallback from the fast path by how long a busy machine took.
    public static func milliseconds(_ variable: StaticString, default milliseconds: Int32) -> Int32 {
        guard let text = getenv(variable.description).map({ String(cString: $0) }), let value = Int32(text), value > 0 else { return milliseconds }
        return value
    }
}
