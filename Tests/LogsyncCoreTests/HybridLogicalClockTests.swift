import Foundation
import LogsyncCore
import Testing

@Suite("Hybrid logical clock")
struct HybridLogicalClockTests {
    @Test("ticks follow wall time and never go backwards when wall time does")
    func monotonicUnderClockJumps() {
        var clock = HybridLogicalClock()
        let a = clock.tick(physicalMilliseconds: 1_000)
        let b = clock.tick(physicalMilliseconds: 1_000)
        let c = clock.tick(physicalMilliseconds: 900)
        let d = clock.tick(physicalMilliseconds: 2_000)
        #expect(a == HLCTimestamp(physicalMilliseconds: 1_000, logical: 0))
        #expect(b == HLCTimestamp(physicalMilliseconds: 1_000, logical: 1))
        #expect(c == HLCTimestamp(physicalMilliseconds: 1_000, logical: 2))
        #expect(d == HLCTimestamp(physicalMilliseconds: 2_000, logical: 0))
        #expect([a, b, c, d] == [a, b, c, d].sorted())
    }

    @Test("the logical counter carries into the next millisecond instead of overflowing")
    func logicalOverflowCarries() {
        var clock = HybridLogicalClock(last: HLCTimestamp(physicalMilliseconds: 5, logical: .max))
        #expect(clock.tick(physicalMilliseconds: 5) == HLCTimestamp(physicalMilliseconds: 6, logical: 0))
    }

    @Test("observing a later timestamp orders later local events after it")
    func observeOrdersAfter() {
        var clock = HybridLogicalClock()
        let remote = HLCTimestamp(physicalMilliseconds: 10_000, logical: 7)
        let adopted = clock.observe(remote, physicalMilliseconds: 9_000)
        #expect(adopted)
        #expect(clock.tick(physicalMilliseconds: 9_000) > remote)
    }

    @Test("a timestamp far in the future is refused, not adopted")
    func futureBounded() {
        var clock = HybridLogicalClock()
        let now: UInt64 = 1_000_000
        let far = HLCTimestamp(physicalMilliseconds: now + HybridLogicalClock.maximumDrift + 1, logical: 0)
        let adopted = clock.observe(far, physicalMilliseconds: now)
        #expect(!adopted)
        #expect(clock.tick(physicalMilliseconds: now) == HLCTimestamp(physicalMilliseconds: now, logical: 0))
    }

    @Test("storage values round-trip and keep the order")
    func storageRoundTrip() {
        let values = [HLCTimestamp(physicalMilliseconds: 1_795_000_000_000, logical: 3), HLCTimestamp(physicalMilliseconds: 1_795_000_000_001, logical: 0)]
        #expect(values.map { HLCTimestamp(storageValue: $0.storageValue) } == values)
        #expect(values[0].storageValue < values[1].storageValue)
    }

    @Test("timestamps read as UTC wall time, the same as Foundation's ISO 8601 formatter says")
    func wallClockDescription() {
        #expect(HLCTimestamp(physicalMilliseconds: 0, logical: 0).wallClockDescription == "1970-01-01T00:00:00.000Z")
        #expect(HLCTimestamp(physicalMilliseconds: 1_795_252_162_530, logical: 0).wallClockDescription == "2026-11-21T09:09:22.530Z")
        #expect(HLCTimestamp(physicalMilliseconds: 1_709_208_000_007, logical: 3).wallClockDescription == "2024-02-29T12:00:00.007Z+3")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let milliseconds = UInt64.random(in: 0..<(1 << 42), using: &rng)  // up to the year 2109
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000 + 0.0001))
            #expect(HLCTimestamp(physicalMilliseconds: milliseconds, logical: 0).wallClockDescription == expected, "\(milliseconds) ms")
        }
    }
}
