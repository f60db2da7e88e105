#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Times shown to people: ISO 8601 in UTC with milliseconds, `2026-11-21T09:09:22.530Z`, everywhere a
/// logsync command prints one.
public enum UTCTime {
    public static func iso8601(milliseconds: UInt64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var utc = tm()
        gmtime_r(&seconds, &utc)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
            utc.tm_hour, utc.tm_min, utc.tm_sec, Int32(milliseconds % 1000))
    }

    public static func iso8601(milliseconds: Int64) -> String { iso8601(milliseconds: UInt64(max(milliseconds, 0))) }
}
