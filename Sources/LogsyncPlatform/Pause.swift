#if canImport(Glibc)
import Glibc
#endif

/// Short waits of the calling thread, for retry loops that poll a lock another process holds (they have
/// their own deadlines).
public enum Pause {
    public static func microseconds(_ count: UInt32) {
        usleep(count)
    }
}
