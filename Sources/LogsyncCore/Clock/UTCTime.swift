/// Times shown to people: ISO 8601 in UTC with milliseconds, `2026-11-21T09:09:22.530Z`, everywhere a
/// logsync command prints one. Pure arithmetic (the proleptic Gregorian calendar; UTC has no leap
/// seconds in Unix time), so the core calls no C library.
package enum UTCTime {
    public static func iso8601(milliseconds: UInt64) -> String {
        let seconds = milliseconds / 1000
        let (year, month, day) = civilDate(daysSince1970: Int64(seconds / 86_400))
        let secondOfDay = Int(seconds % 86_400)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(Int64(secondOfDay / 3600), 2)):"
            + "\(pad(Int64(secondOfDay / 60 % 60), 2)):\(pad(Int64(secondOfDay % 60), 2)).\(pad(Int64(milliseconds % 1000), 3))Z"
    }

    public static func iso8601(milliseconds: Int64) -> String { iso8601(milliseconds: UInt64(max(milliseconds, 0))) }

    /// Year, month (1–12) and day (1–31) of a day counted from 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
