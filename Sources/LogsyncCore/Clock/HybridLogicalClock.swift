/// A hybrid logical clock timestamp: 48 bits of physical milliseconds since 1970 and a 16-bit logical
/// counter, ordered as one unsigned integer.
///
/// HLC timestamps order every history transaction. They follow wall time closely but never run backwards,
/// and a peer's clock far in the future cannot drag ours past ``HybridLogicalClock/maximumDrift``.
public struct HLCTimestamp: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public init(physicalMilliseconds: UInt64, logical: UInt16) {
        rawValue = (physicalMilliseconds << 16) | UInt64(logical)
    }

    public var physicalMilliseconds: UInt64 { rawValue >> 16 }
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public static let zero = HLCTimestamp(rawValue: 0)

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(physicalMilliseconds).\(logical)" }

    /// The physical part as UTC wall time for people, with the logical counter when it is not zero:
    /// `2026-11-21T10:02:42.530Z`, `2026-11-21T10:02:42.530Z+3`.
    public var wallClockDescription: String {
        let milliseconds = physicalMilliseconds
        let seconds = milliseconds / 1000
        let (year, month, day) = Self.civilDate(daysSince1970: Int64(seconds / 86_400))
        let secondOfDay = seconds % 86_400
        func pad(_ value: some BinaryInteger, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let time = "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(milliseconds % 1000, 3))"
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(time)Z" + (logical == 0 ? "" : "+\(logical)")
    }

    /// Year, month and day of a day count since 1970-01-01 in the proleptic Gregorian calendar
    /// (H. Hinnant's `civil_from_days`).
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The value as stored in SQLite's signed 64-bit integers (48-bit milliseconds keep it positive).
    public var storageValue: Int64 { Int64(bitPattern: rawValue) }
    public init(storageValue: Int64) { rawValue = UInt64(bitPattern: storageValue) }
}

/// The clock state of one node. A value type: the store keeps it behind its writer lock.
public struct HybridLogicalClock: Sendable {
    /// How far ahead of local wall time a received timestamp may be before it is bounded.
    public static let maximumDrift: UInt64 = 5 * 60 * 1000

    public private(set) var last: HLCTimestamp

    public init(last: HLCTimestamp = .zero) { self.last = last }

    /// The timestamp for a local event: later than every timestamp seen so far.
    public mutating func tick(physicalMilliseconds now: UInt64) -> HLCTimestamp {
        if now > last.physicalMilliseconds {
            last = HLCTimestamp(physicalMilliseconds: now, logical: 0)
        } else {
            last = Self.successor(of: last)
        }
        return last
    }

    /// Folds in a timestamp seen from elsewhere (another process or a peer), so later local events order
    /// after it. Returns false, leaving the clock alone, when the timestamp is more than
    /// ``maximumDrift`` ahead of `now`: the caller reports it instead of letting it win forever.
    @discardableResult
    public mutating func observe(_ seen: HLCTimestamp, physicalMilliseconds now: UInt64) -> Bool {
        guard seen.physicalMilliseconds <= now + Self.maximumDrift else { return false }
        if seen > last { last = seen }
        return true
    }

    static func successor(of timestamp: HLCTimestamp) -> HLCTimestamp {
        if timestamp.logical == .max {
            return HLCTimestamp(physicalMilliseconds: timestamp.physicalMilliseconds + 1, logical: 0)
        }
        return HLCTimestamp(rawValue: timestamp.rawValue + 1)
    }
}
