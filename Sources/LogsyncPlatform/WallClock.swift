#if canImport(Glibc)
import Glibc
#endif

/// The wall clock (CLOCK_REALTIME): the physical half of every HLC timestamp, and the times that tools
/// print so that tests can compare them across processes.
public enum WallClock {
    /// Milliseconds since 1970.
    public static func milliseconds() -> UInt64 {
        let now = read()
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    /// Nanoseconds since 1970.
    public static func nanoseconds() -> UInt64 {
        let now = read()
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    private static func read() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }
}
