#if canImport(Glibc)
import Glibc
#endif

enum WallClock {
    /// Milliseconds since 1970 from CLOCK_REALTIME, the physical half of every HLC timestamp.
    static func milliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
