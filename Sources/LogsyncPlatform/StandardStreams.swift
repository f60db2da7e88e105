#if canImport(Glibc)
import Glibc
#endif

/// The process's standard error as a file descriptor, and what it is connected to.
public enum StandardError {
    /// Writes `bytes` to file descriptor 2 at once, unbuffered (a log line must not wait in a buffer).
    public static func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    /// Whether stderr is the stream `identity` names as "device:inode" (systemd's `JOURNAL_STREAM`).
    public static func isStream(_ identity: String) -> Bool {
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return identity == "\(info.st_dev):\(info.st_ino)"
    }
}

/// CLOCK_MONOTONIC, for the timestamps systemd expects (`MONOTONIC_USEC`).
public enum MonotonicClock {
    public static func microseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }
}
