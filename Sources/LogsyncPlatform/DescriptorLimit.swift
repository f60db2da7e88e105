#if canImport(Glibc)
import Glibc
#endif

/// The soft limit on open descriptors (`RLIMIT_NOFILE`), for the tests and benchmarks that hold
/// thousands of sockets or files at once.
public enum DescriptorLimit {
    /// Raises the soft limit to `wanted` when it is lower (never past the hard limit); returns the soft
    /// limit in force after.
    @discardableResult
    public static func raise(to wanted: Int) -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(limit.rlim_cur)
    }
}
