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
        kill(getpid(), SIGKILL)
    }

    /// Sleeps `milliseconds` when selected: a slow step (a publish to a slow disk), for tests of what
    /// happens meanwhile.
    public static func delay(_ name: StaticString, milliseconds: UInt32) {
        guard let selected, selected == name.description else { return }
        usleep(milliseconds * 1_000)
    }

    /// Blocks the calling thread forever when selected: a hung loop, for watchdog tests.
    public static func hang(_ name: StaticString) {
        guard let selected, selected == name.description else { return }
        while true { sleep(3_600) }
    }
}
