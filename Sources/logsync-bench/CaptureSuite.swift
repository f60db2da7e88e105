import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncStore

/// `capture`: what history capture costs on the write path, against plain SQLite with the same table and
/// pragmas, measured in the same run.
///
/// - bulk: N row inserts in one transaction (plain: one prepared INSERT inside BEGIN IMMEDIATE … COMMIT;
///   captured: one `store.write` whose body runs the same INSERT through `tx.execute` per row).
/// - single commits: M one-row transactions (plain: BEGIN IMMEDIATE; INSERT; COMMIT per row; captured:
///   one `store.write { tx.execute(INSERT) }` per row).
/// - insert API: the bulk run again through the dictionary API `tx.insert("Note", [column: value])`, to show
///   what that convenience costs on top of capture (informational, no goal).
///
/// Each round runs both sides on fresh files in fresh temporary directories, alternating which goes first;
/// a metric is the median of the per-round ratios (captured / plain), which cancels slow drift in the
/// machine's speed better than a ratio of medians.
struct CaptureSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "History capture overhead: bulk inserts and single-row commits, captured vs plain SQLite.")

    @OptionGroup var options: SuiteOptions

    struct Sizes {
        var bulkRows: Int
        var singleCommits: Int
        var rounds: Int

        static let full = Sizes(bulkRows: 100_000, singleCommits: 5_000, rounds: 7)
        static let quick = Sizes(bulkRows: 20_000, singleCommits: 2_000, rounds: 3)
        static let warmUp = Sizes(bulkRows: 2_000, singleCommits: 200, rounds: 1)
    }

    static let suite = "capture"
    static let author = "bench"
    static let context = "capture"

    func run() throws {
        let sizes = options.quick ? Sizes.quick : Sizes.full
        if options.quick {
            Report.progress(
                "--quick: sizes scaled down to \(grouped(sizes.bulkRows)) bulk rows and \(grouped(sizes.singleCommits)) "
                    + "single commits, \(sizes.rounds) rounds (full run: \(grouped(Sizes.full.bulkRows)) / "
                    + "\(grouped(Sizes.full.singleCommits)), \(Sizes.full.rounds) rounds)")
        }
        Report.progress(
            "capture: \(grouped(sizes.bulkRows)) rows in one transaction and \(grouped(sizes.singleCommits)) one-row "
                + "commits, \(sizes.rounds) rounds; SQLite \(PlainDatabase.libraryVersion), \(ProcessInfo.processInfo.activeProcessorCount) cores")

        let rows = NoteFixture.rows(count: max(sizes.bulkRows, sizes.singleCommits))
        try Self.checkSameTableShape()

        // Untimed: pages in code and warms the file system before the first measured round.
        let warmRows = rows[..<Sizes.warmUp.bulkRows]
        _ = try Self.plainBulk(warmRows)
        _ = try Self.capturedBulk(warmRows)
        _ = try Self.plainSingle(rows[..<Sizes.warmUp.singleCommits])
        _ = try Self.capturedSingle(rows[..<Sizes.warmUp.singleCommits])

        let bulk = try Self.compare(
            "bulk", rounds: sizes.rounds, plain: { try Self.plainBulk(rows[..<sizes.bulkRows]) },
            captured: { try Self.capturedBulk(rows[..<sizes.bulkRows]) })
        let single = try Self.compare(
            "single", rounds: sizes.rounds, plain: { try Self.plainSingle(rows[..<sizes.singleCommits]) },
            captured: { try Self.capturedSingle(rows[..<sizes.singleCommits]) })
        let insertAPI = try Self.compare(
            "bulk via tx.insert", rounds: sizes.rounds, plain: { try Self.plainBulk(rows[..<sizes.bulkRows]) },
            captured: { try Self.capturedBulk(rows[..<sizes.bulkRows], dictionaryAPI: true) })

        let bulkRows = Double(sizes.bulkRows)
        let commits = Double(sizes.singleCommits)
        Report.emit(metric("bulk_overhead", bulk.ratio, unit: "x", goal: 1.3, .lower, decimals: 3))
        Report.emit(metric("single_commit_overhead", single.ratio, unit: "x", goal: 1.4, .lower, decimals: 3))
        Report.emit(metric("bulk_insert_api_overhead", insertAPI.ratio, unit: "x", goal: 1.5, .lower, decimals: 3))
        Report.emit(metric("bulk_plain_rows_per_s", bulkRows / bulk.plain, unit: "rows/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("bulk_captured_rows_per_s", bulkRows / bulk.captured, unit: "rows/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("single_plain_commits_per_s", commits / single.plain, unit: "commits/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("single_captured_commits_per_s", commits / single.captured, unit: "commits/s", goal: nil, .higher, decimals: 0))
    }

    // MARK: - Rounds

    struct Comparison {
        /// Median seconds.
        var plain: Double
        var captured: Double
        /// Median of the per-round captured / plain ratios.
        var ratio: Double
    }

    /// Runs `rounds` rounds of both sides, alternating which goes first, and returns the medians.
    static func compare(
        _ label: String, rounds: Int, plain: () throws -> Double, captured: () throws -> Double
    ) throws -> Comparison {
        var plainTimes: [Double] = []
        var capturedTimes: [Double] = []
        for round in 0..<rounds {
            if round % 2 == 0 {
                plainTimes.append(try plain())
                capturedTimes.append(try captured())
            } else {
                capturedTimes.append(try captured())
                plainTimes.append(try plain())
            }
            Report.progress(
                "  \(label) round \(round + 1)/\(rounds): plain \(formatted(plainTimes.last!)) s, "
                    + "captured \(formatted(capturedTimes.last!)) s, "
                    + "ratio \(formatted(capturedTimes.last! / plainTimes.last!))")
        }
        let ratios = zip(capturedTimes, plainTimes).map { $0 / $1 }
        let result = Comparison(
            plain: Stats.median(plainTimes), captured: Stats.median(capturedTimes), ratio: Stats.median(ratios))
        Report.progress(
            "  \(label) median: plain \(formatted(result.plain)) s, captured \(formatted(result.captured)) s, "
                + "ratio \(formatted(result.ratio))")
        return result
    }

    // MARK: - Plain SQLite

    /// Seconds to insert `rows` in one transaction with one prepared statement.
    static func plainBulk(_ rows: ArraySlice<NoteRow>) throws -> Double {
        try withTemporaryDirectory { directory in
            let db = try PlainDatabase(path: directory.file("plain.sqlite"))
            try db.execute(NoteFixture.plainDDL)
            let seconds = try timed {
                let insert = try db.prepare(NoteFixture.plainInsertSQL)
                try db.execute("BEGIN IMMEDIATE")
                for row in rows { try insert.run(row) }
                try db.execute("COMMIT")
            }
            try expect(db, count: rows.count)
            return seconds
        }
    }

    /// Seconds to insert `rows` as one transaction each.
    static func plainSingle(_ rows: ArraySlice<NoteRow>) throws -> Double {
        try withTemporaryDirectory { directory in
            let db = try PlainDatabase(path: directory.file("plain.sqlite"))
            try db.execute(NoteFixture.plainDDL)
            let seconds = try timed {
                let insert = try db.prepare(NoteFixture.plainInsertSQL)
                for row in rows {
                    try db.execute("BEGIN IMMEDIATE")
                    try insert.run(row)
                    try db.execute("COMMIT")
                }
            }
            try expect(db, count: rows.count)
            return seconds
        }
    }

    private static func expect(_ db: PlainDatabase, count: Int) throws {
        let found = try db.scalar(#"SELECT count(*) FROM "Note""#)
        guard found == .integer(Int64(count)) else {
            throw BenchError("plain table holds \(String(describing: found)) rows, expected \(count)")
        }
    }

    // MARK: - logsync

    /// Seconds to insert `rows` in one `store.write`, with the baseline's INSERT or the dictionary API.
    static func capturedBulk(_ rows: ArraySlice<NoteRow>, dictionaryAPI: Bool = false) throws -> Double {
        try withTemporaryDirectory { directory in
            let store = try Store(path: directory.file("captured.sqlite"), schema: NoteFixture.schema)
            let seconds = try timed {
                try store.write(author: author, context: context) { tx in
                    if dictionaryAPI {
                        for row in rows { try tx.insert("Note", row.values) }
                    } else {
                        for row in rows { try tx.execute(NoteFixture.plainInsertSQL, row.arguments) }
                    }
                }
            }
            try expect(store, rows: rows.count, transactions: 1)
            return seconds
        }
    }

    /// Seconds to insert `rows` with one `store.write` each.
    static func capturedSingle(_ rows: ArraySlice<NoteRow>) throws -> Double {
        try withTemporaryDirectory { directory in
            let store = try Store(path: directory.file("captured.sqlite"), schema: NoteFixture.schema)
            let seconds = try timed {
                for row in rows {
                    try store.write(author: author, context: context) { tx in
                        try tx.execute(NoteFixture.plainInsertSQL, row.arguments)
                    }
                }
            }
            try expect(store, rows: rows.count, transactions: rows.count)
            return seconds
        }
    }

    /// Checks that every row landed and was captured: one insert change per row (the helpers' inserts
    /// packed, raw SQL's one log row each), one history transaction per write.
    private static func expect(_ store: Store, rows: Int, transactions: Int) throws {
        let tableRows = try store.read(#"SELECT count(*) FROM "Note""#).first?.first
        let history = try store.history(limit: transactions + 1)
        let changes = history.reduce(0) { $0 + $1.changes.filter { $0.kind == .insert }.count }
        guard tableRows == .integer(Int64(rows)), changes == rows, history.count == transactions else {
            throw BenchError(
                "captured store holds \(String(describing: tableRows)) rows, \(changes) inserts in history and "
                    + "\(history.count) transactions; expected \(rows), \(rows) and \(transactions)")
        }
    }

    /// The plain table must have exactly the DDL the store generates, or the ratio measures more than capture.
    static func checkSameTableShape() throws {
        try withTemporaryDirectory { directory in
            let store = try Store(path: directory.file("shape.sqlite"), schema: NoteFixture.schema)
            let sql = try store.read("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'Note'")
            guard case .text(let storeDDL)? = sql.first?.first else {
                throw BenchError("the store created no table 'Note'")
            }
            if storeDDL != NoteFixture.plainDDL {
                Report.progress(
                    "warning: the store's DDL for Note differs from the plain baseline's; the ratio includes the difference.\n"
                        + "  store: \(storeDDL)\n  plain: \(NoteFixture.plainDDL)")
            }
        }
    }
}
