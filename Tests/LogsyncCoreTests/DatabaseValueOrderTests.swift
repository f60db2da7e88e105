import LogsyncCore
import LogsyncTestKit
import Testing

/// `DatabaseValue.sqliteOrder(comparedTo:)` orders text as SQLite's BINARY collation does: by UTF-8 bytes,
/// a prefix first, whatever the length (small strings are stored inline, longer ones on the heap).
@Suite struct DatabaseValueOrderTests {
    @Test("text orders by its UTF-8 bytes")
    func textByBytes() {
        let pieces = ["", "a", "b", "ab", "é", "e\u{301}", "z", "\u{1F600}", "0123456789abcdef", "-"]
        var random = SeededRandom(seed: 0x0DE5)
        func text() -> String {
            (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
        }
        for _ in 0..<2_000 {
            let (a, b) = (text(), text())
            let expected = Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) ? -1 : (Array(a.utf8) == Array(b.utf8) ? 0 : 1)
            #expect(DatabaseValue.text(a).sqliteOrder(comparedTo: .text(b)) == expected, "\(a.debugDescription) against \(b.debugDescription)")
            #expect(DatabaseValue.text(a).sqliteOrder(comparedTo: .nonUTF8Text(Array(b.utf8))) == expected)
        }
    }
}
