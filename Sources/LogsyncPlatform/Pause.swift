#if canImport(Glibc)
import Glibc
#endif

/// Short waits of the calling thread, for retry loops that poll a lock another process holds (they have
/// their own deadlines).
public enum Pause {
    public static func microseconds(_ count: UInt32) {
        usleep(count)
    }

    /// Blocks the calling thread for good: a test program holding a lock until it is killed.
    public static func forever() -> Never {
        while true { sleep(3_600) }
    }
}

/// Who this process runs as.
public enum CurrentUser {
    /// The real user id (`getuid`).
    public static var id: UInt32 { getuid() }
    public static var isRoot: Bool { id == 0 }
}

/// What this process has used so far.
public enum ProcessUsage {
    /// User and system CPU time of this process (`getrusage(RUSAGE_SELF)`).
    public static var cpuTime: Duration {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Duration.seconds(usage.ru_utime.tv_sec) + .microseconds(usage.ru_utime.tv_usec)
        return user + .seconds(usage.ru_stime.tv_sec) + .microseconds(usage.ru_stime.tv_usec)
    }
}
