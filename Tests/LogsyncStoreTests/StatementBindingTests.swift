import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// Text and blobs are bound from buffers the statement owns (`Statement.swift`): what SQLite reads must
/// always be the value bound last, whatever its size, and survive the caller's copy going away.
@Suite("Binding text and blobs from the statement's own buffers")
struct StatementBindingTests {
    @Test("values of every size round-trip, rebound many times over, through a statement kept across uses")
    func roundTrip() throws {
        let directory = try TemporaryDirectory("bind")
        let connection = try Connection(path: directory.file("b.sqlite"))
        try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a, b)")
        let insert = try connection.prepare("INSERT INTO t(id, a, b) VALUES (?, ?, ?)")
        var rng = SeededRandom(seed: 11)
        var expected: [[DatabaseValue]] = []
        // Sizes around the buffers' first size (64) and their limit (4,096), growing and shrinking.
        let sizes = [0, 1, 63, 64, 65, 200, 10, 4_095, 4_096, 4_097, 100_000, 5, 0, 3_000]
        for (index, size) in sizes.enumerated() {
            // Built here and gone after the bind: SQLite must not read the caller's bytes.
            let text = DatabaseValue.text(String((0..<size).map { _ in Array("abcdé")[Int.random(in: 0..<5, using: &rng)] }))
            let blob = DatabaseValue.blob((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) })
            try insert.bind(Int64(index), at: 1)
            try insert.bind(text, at: 2)
            try insert.bind(blob, at: 3)
            try insert.run()
            expected.append([.integer(Int64(index)), text, blob])
        }
        #expect(try connection.rows("SELECT id, a, b FROM t ORDER BY id") == expected)
        #expect(try connection.rows("SELECT typeof(a), typeof(b) FROM t WHERE id = 0") == [[.text("text"), .text("blob")]])

        // The same parameter bound again before a run: the later value wins.
        try insert.bind(Int64(100), at: 1)
        try insert.bind(.text("first, and longer than the second"), at: 2)
        try insert.bind(.text("second"), at: 2)
        try insert.bind(bytes: UnsafeRawBufferPointer(start: nil, count: 0), at: 3)
        try insert.run()
        #expect(try connection.rows("SELECT a, b FROM t WHERE id = 100") == [[.text("second"), .blob([])]])

        // A parameter out of range is an error, not a write past the buffers.
        #expect(throws: SQLiteError.self) { try insert.bind(.text("x"), at: 4) }
        #expect(throws: SQLiteError.self) { try insert.bind(.text("x"), at: 0) }
    }
}
