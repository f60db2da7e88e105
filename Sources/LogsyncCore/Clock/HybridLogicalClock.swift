import Foundation

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
        let text = UTCTime.iso8601(milliseconds: physicalMilliseconds)
        return logical == 0 ? text : text + "+\(logical)"
    }

    /// The value as stored in SQLite's signed 64-bit integers (48-bit milliseconds keep it positive).
    public var storageValue: Int64 { Int64(bitPattern: rawValue) }
    public init(storageValue: Int64) { rawValue = UInt64(bitPattern: storageValue) }
}

/// The clock state of one node. A value type: the store keeps it behind its writer lock.
package struct HybridLogicalClock: Sendable {
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
