import Foundation
import LogsyncCore

/// Searches what a carrier stores for plaintext, byte by byte: the bytes as they are, and what every zlib
/// stream in them inflates to (a plain segment's values are compressed), so that a test of sealed logs
/// would notice a plain object however it is stored (`docs/security.md`).
public enum PlaintextSearch {
    /// The needles found in `haystack`, raw or inside a zlib stream that starts anywhere in it.
    public static func found(_ needles: [String], in haystack: [UInt8]) -> [String] {
        var texts = [haystack]
        // Every position that starts like a zlib header (CMF 0x78, a valid check): inflate what follows.
        var index = 0
        while index + 1 < haystack.count {
            if haystack[index] == 0x78, (UInt16(haystack[index]) << 8 | UInt16(haystack[index + 1])) % 31 == 0,
                let inflated = ZlibProbe.inflatedPrefix(haystack, from: index, limit: 1 << 20), inflated.count > 16
            {
                texts.append(inflated)
            }
            index += 1
        }
        return needles.filter { needle in
            let pattern = Array(needle.utf8)
            return texts.contains { contains($0, pattern) }
        }
    }

    /// The bytes of every `\x…` hex literal in `text` (how `pg_dump` writes `bytea`), and the text itself.
    public static func decodingHexLiterals(_ text: String) -> [UInt8] {
        var bytes = Array(text.utf8)
        let scalars = Array(text.utf8)
        var index = 0
        while index + 2 < scalars.count {
            if scalars[index] == UInt8(ascii: "\\"), scalars[index + 1] == UInt8(ascii: "x") {
                var end = index + 2
                var decoded: [UInt8] = []
                while end + 1 < scalars.count, let high = hexValue(scalars[end]), let low = hexValue(scalars[end + 1]) {
                    decoded.append(high << 4 | low)
                    end += 2
                }
                bytes += decoded
                index = end
            } else {
                index += 1
            }
        }
        return bytes
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= haystack.count else { return false }
        let first = needle[0]
        var index = 0
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first, haystack[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}
