import Foundation
import LogsyncCore
import Testing

@Suite("UTC times for people")
struct UTCTimeTests {
    @Test("ISO 8601 with milliseconds agrees with Foundation's formatter from 1970 to 9999, leap days and ends of years included")
    func agreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = SystemRandomNumberGenerator()
        let fixed: [UInt64] = [0, 951_782_400_000, 951_868_799_999, 1_709_164_800_123, 4_107_542_399_999, 253_402_300_799_999]
        for milliseconds in fixed + (0..<5_000).map({ _ in UInt64.random(in: 0...253_402_300_799_999, using: &generator) }) {
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds / 1000)) + Double(milliseconds % 1000) / 1000 + 0.0001)
            #expect(UTCTime.iso8601(milliseconds: milliseconds) == expected, "\(milliseconds)")
        }
        #expect(UTCTime.iso8601(milliseconds: 1_795_471_946_819 as Int64) == "2026-11-23T22:12:26.819Z")
        #expect(UTCTime.iso8601(milliseconds: -5 as Int64) == "1970-01-01T00:00:00.000Z")
    }
}
