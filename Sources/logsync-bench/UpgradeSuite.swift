import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit

/// `upgrade`: how long an app's store of 1M rows takes to open under a schema with an additive change (a
/// new column and a new entity, `docs/schema-evolution.md`) — the migration a release runs on every
/// device — against opening it under the schema it already has, in the same run.
///
/// Untimed: N `Note` rows written through `Store.write` in transactions of 1,000, their history exported
/// (folded into segments, as syncd does), the WAL checkpointed; the file is copied once per round.
/// Timed, three rounds each, on a copy: opening with the same schema (the baseline), and opening with
/// version 2 (the migration), each followed by one write that uses the new schema, since the first write
/// transaction re-checks the tables.
///
/// Then what a node still on version 1 pays for a peer on version 2 (`mixed_import_vs_same`): one sync
/// round of a version-1 store importing, through a shared folder, Note rows a version-1 writer exported,
/// against the same number of rows a version-2 writer exported with its new column set on each (so every
/// transaction is split: the rows merged, the new column kept in `_ls_kept`). Alternating, three rounds each;
/// the timed part is the reader's round, from listing the folder to the last commit.
struct UpgradeSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Open a store of 1M rows under an additively changed schema: time, against opening it unchanged.")

    @OptionGroup var options: SuiteOptions

    static let suite = "upgrade"

    static let version2: Schema = {
        var schema = NoteFixture.schema
        schema.version = 2
        schema.entities[0].attributes.append(Attribute("color", .text))
        schema.entities.append(Entity("Tag", attributes: [Attribute("name", .text)]))
        return schema
    }()

    func run() throws {
        let rows = options.quick ? 100_000 : 1_000_000
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("logsync-bench-upgrade-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/source.sqlite"
        let setup = try ContinuousClock().measure {
            let store = try Store(path: source, schema: NoteFixture.schema)
            try Self.insertNotes(rows, into: store)
            _ = try store.sync.exportToOutbox(account: "bench")
            try store.checkpoint()
        }
        Report.progress("setup (untimed): \(grouped(rows)) rows written and exported in \(formatted(setup.seconds)) s")

        func round(_ schema: Schema, _ label: String) throws -> Double {
            let copy = directory + "/\(label).sqlite"
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.copyItem(atPath: source, toPath: copy)
            let elapsed = try ContinuousClock().measure {
                let store = try Store(path: copy, schema: schema)
                try store.write { tx in
                    var values = NoteFixture.rows(count: 1)[0].values
                    if schema.version == 2 { values["color"] = "blue" }
                    try tx.insert("Note", values)
                }
            }
            try FileManager.default.removeItem(atPath: copy)
            for suffix in ["-wal", "-shm", "-writers"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            return elapsed.seconds * 1_000
        }
        var same: [Double] = [], upgraded: [Double] = []
        for index in 0..<3 {
            same.append(try round(NoteFixture.schema, "same-\(index)"))
            upgraded.append(try round(Self.version2, "v2-\(index)"))
            Report.progress("  round \(index + 1): open unchanged \(formatted(same.last!, decimals: 1)) ms, open with version 2 \(formatted(upgraded.last!, decimals: 1)) ms")
        }
        if options.quick { Report.progress("--quick: \(grouped(rows)) rows; upgrade_1m_ms is the time for them, not scaled") }
        Report.emit(metric("upgrade_1m_ms", Stats.median(upgraded), unit: "ms", goal: 1_000, .lower, decimals: 1))
        Report.emit(metric("open_unchanged_1m_ms", Stats.median(same), unit: "ms", goal: nil, .lower, decimals: 1))
        Report.emit(metric("upgrade_vs_open", Stats.median(upgraded) / Stats.median(same), unit: "x", goal: nil, .lower))

        let mixedRows = options.quick ? 20_000 : 200_000
        var sameImports: [Double] = [], mixedImports: [Double] = []
        for index in 0..<3 {
            sameImports.append(try Self.importRound(rows: mixedRows, writer: NoteFixture.schema))
            mixedImports.append(try Self.importRound(rows: mixedRows, writer: Self.version2))
            Report.progress(
                "  import round \(index + 1): \(grouped(mixedRows)) rows from a version-1 writer \(formatted(sameImports.last!, decimals: 1)) ms, "
                    + "from a version-2 writer \(formatted(mixedImports.last!, decimals: 1)) ms")
        }
        Report.emit(metric("import_same_version_ms", Stats.median(sameImports), unit: "ms", goal: nil, .lower, decimals: 1))
        Report.emit(metric("import_newer_version_ms", Stats.median(mixedImports), unit: "ms", goal: nil, .lower, decimals: 1))
        Report.emit(metric("mixed_import_vs_same", Stats.median(mixedImports) / Stats.median(sameImports), unit: "x", goal: nil, .lower))
    }

    /// `count` Note rows written into `store` in transactions of 1,000; under version 2, with its new
    /// column set on each.
    static func insertNotes(_ count: Int, into store: Store) throws {
        var written = 0
        while written < count {
            let batch = NoteFixture.rows(count: min(1_000, count - written))
            try store.write { tx in
                for row in batch {
                    var values = row.values
                    if store.schema.version == 2 { values["color"] = "blue" }
                    try tx.insert("Note", values)
                }
            }
            written += batch.count
        }
    }

    /// One version-1 reader's sync round of `rows` Note rows that a writer on `writer` exported into a shared
    /// folder (untimed), with a check that every row arrived and, from a newer writer, that every
    /// transaction's new column was kept. Returns the round's milliseconds.
    static func importRound(rows: Int, writer schema: Schema) throws -> Double {
        try withTemporaryDirectory { directory in
            let folder = directory.file("folder")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let configuration = SyncConfiguration(account: "bench")
            let writer = try Store(path: directory.file("writer.sqlite"), schema: schema)
            try insertNotes(rows, into: writer)
            _ = try SyncEngine(store: writer, sharedFolder: folder, configuration: configuration).sync()
            let reader = try Store(path: directory.file("reader.sqlite"), schema: NoteFixture.schema)
            let engine = try SyncEngine(store: reader, sharedFolder: folder, configuration: configuration)
            var report = SyncReport()
            let elapsed = try ContinuousClock().measure { report = try engine.sync() }
            guard try reader.read("SELECT count(*) FROM Note") == [[.integer(Int64(rows))]], report.waiting.isEmpty else {
                throw BenchError("the reader did not import all \(rows) rows in one round: \(report)")
            }
            let expectedKept = schema.version == 2 ? (rows + 999) / 1_000 : 0
            guard try reader.sync.keptTransactionCount() == expectedKept else {
                throw BenchError("the reader keeps \(try reader.sync.keptTransactionCount()) transactions, expected \(expectedKept)")
            }
            return elapsed.seconds * 1_000
        }
    }
}
