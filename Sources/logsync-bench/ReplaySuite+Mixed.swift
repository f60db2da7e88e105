import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncSQLite
import LogsyncStore

/// `replay`'s mixed workload: three nodes update, delete and insert the same rows concurrently, and a fourth
/// replays their history, against `sqlite3changeset_apply` of the net changes.
extension ReplaySuite {
    /// The history of ``mixedWorkload(changes:seed:)``, made once per run, and what replaying it must give.
    struct MixedWorkload {
        /// The rows every node starts from.
        var starting: [NoteRow]
        /// The starting rows as the first node exported them.
        var startingSegments: [OutboxSegment]
        /// Each node's segments of its mixed writes (after the starting rows).
        var nodes: [[OutboxSegment]]
        /// Changes in `nodes`' segments.
        var changes: Int
        /// `Note` as ``SegmentFixture/selectRows`` reads it on every node once each has applied the others'
        /// history.
        var expected: [[DatabaseValue]]
        /// The session extension's changeset from `starting` to `expected`.
        var changeset: [UInt8]
        /// What was written and how often the nodes' writes met, for the progress output.
        var summary: String
    }

    static let mixedNodes = 3

    /// Out of 10 mixed operations: updates, then deletes; the rest are inserts.
    static let mixedUpdates = 6
    static let mixedDeletes = 1

    /// One column, or `rank` and `score` together: concurrent updates of one row often set different columns,
    /// which the merge keeps both of (last writer wins per column).
    static let mixedUpdateSQL = [
        #"UPDATE "Note" SET "title" = ? WHERE "id" = ?"#,
        #"UPDATE "Note" SET "body" = ? WHERE "id" = ?"#,
        #"UPDATE "Note" SET "rank" = ?, "score" = ? WHERE "id" = ?"#,
    ]

    /// ``mixedNodes`` stores, each with its own node identity, start from `changes / 2` rows that the first
    /// writes and the others import. Then `changes` operations (per 10: ``mixedUpdates`` updates of a random
    /// starting row, ``mixedDeletes`` delete of one, inserts of new rows for the rest), in transactions of
    /// ``SegmentFixture/transactionRows``, the nodes taking turns, none seeing another's writes: the same
    /// rows are updated on several nodes, deleted on one and updated on another. A node never touches a row
    /// twice in one transaction, nor a row it deleted, so every operation is one change in its history.
    /// Each node exports its history (``SegmentFixture/export(_:)``) and applies the others' through
    /// ``SegmentFixture/importAll(_:into:segmentApplied:)``; the suite fails unless all then hold the same rows.
    static func mixedWorkload(changes: Int, seed: UInt64) throws -> MixedWorkload {
        guard changes / 2 >= 2 * SegmentFixture.transactionRows else {
            throw BenchError("a mixed workload of \(changes) changes has too few starting rows for transactions of \(SegmentFixture.transactionRows)")
        }
        return try withTemporaryDirectory { directory in
            let starting = NoteFixture.rows(count: changes / 2)
            var fresh = NoteFixture.rows(count: changes)[...]
            let first = try SegmentFixture.sourceStore(starting[...], at: directory.file("node0.sqlite"))
            let startingSegments = try SegmentFixture.export(first)
            for segment in startingSegments { try first.sync.markPublished(firstSequence: segment.firstSequence) }
            var stores = [first]
            for index in 1..<mixedNodes {
                let store = try Store(path: directory.file("node\(index).sqlite"), schema: NoteFixture.schema)
                _ = try SegmentFixture.importAll(startingSegments, into: store)
                stores.append(store)
            }

            var rng = SeededRandom(seed: seed)
            // Per node, the starting rows (by index) it updated, and those it deleted.
            var updated = Array(repeating: Set<Int>(), count: mixedNodes)
            var deleted = updated
            var counts = (updates: 0, deletes: 0, inserts: 0)
            var transaction = 0
            while transaction * SegmentFixture.transactionRows < changes {
                let node = transaction % mixedNodes
                let operations = min(SegmentFixture.transactionRows, changes - transaction * SegmentFixture.transactionRows)
                try stores[node].write(author: SegmentFixture.author, context: SegmentFixture.context) { tx in
                    var touched = Set<Int>()
                    for operation in 0..<operations {
                        let draw = Int.random(in: 0..<10, using: &rng)
                        guard draw < mixedUpdates + mixedDeletes else {
                            try tx.execute(NoteFixture.plainInsertSQL, fresh.popFirst()!.arguments)
                            counts.inserts += 1
                            continue
                        }
                        var row = Int.random(in: 0..<starting.count, using: &rng)
                        while touched.contains(row) || deleted[node].contains(row) { row = Int.random(in: 0..<starting.count, using: &rng) }
                        touched.insert(row)
                        let key = DatabaseValue.text(starting[row].id)
                        if draw >= mixedUpdates {
                            try tx.execute(#"DELETE FROM "Note" WHERE "id" = ?"#, [key])
                            deleted[node].insert(row)
                            counts.deletes += 1
                            continue
                        }
                        let column = Int.random(in: 0..<mixedUpdateSQL.count, using: &rng)
                        let number = Int64.random(in: 0..<1_000_000, using: &rng)
                        let values: [DatabaseValue] =
                            switch column {
                            case 0: [.text("title \(number) from node \(node)")]
                            case 1: [.text("body \(transaction).\(operation) from node \(node): " + String(repeating: "y", count: 12))]
                            default: [.integer(number), .real(Double(number) / 8)]
                            }
                        try tx.execute(mixedUpdateSQL[column], values + [key])
                        updated[node].insert(row)
                        counts.updates += 1
                    }
                }
                transaction += 1
            }

            let nodes = try stores.map { try SegmentFixture.export($0) }
            let exported = try nodes.reduce(0) { $0 + (try SegmentFixture.changeCount($1)) }
            guard exported == changes else {
                throw BenchError("the nodes exported \(exported) mixed changes, expected \(changes)")
            }
            for (index, store) in stores.enumerated() {
                for (origin, segments) in nodes.enumerated() where origin != index {
                    _ = try SegmentFixture.importAll(segments, into: store)
                }
            }
            let expected = try first.read(SegmentFixture.selectRows)
            for store in stores.dropFirst() where try store.read(SegmentFixture.selectRows) != expected {
                throw BenchError("the \(mixedNodes) nodes hold different Note rows after applying each other's history")
            }

            let changeset = try SegmentFixture.sessionChangeset(at: directory.file("session-source.sqlite"), holding: starting[...]) {
                try writeNetChanges(from: starting, to: expected, into: $0)
            }

            let touchedBySeveral = (0..<starting.count).count { row in
                (0..<mixedNodes).count { updated[$0].contains(row) || deleted[$0].contains(row) } > 1
            }
            let deletedAndUpdated = (0..<starting.count).count { row in
                (0..<mixedNodes).contains { node in
                    deleted[node].contains(row) && (0..<mixedNodes).contains { $0 != node && updated[$0].contains(row) }
                }
            }
            let summary =
                "\(grouped(starting.count)) starting rows on \(mixedNodes) nodes; \(grouped(counts.updates)) updates, "
                    + "\(grouped(counts.deletes)) deletes, \(grouped(counts.inserts)) inserts in \(transaction) transactions; "
                    + "\(grouped(touchedBySeveral)) rows written on more than one node, \(grouped(deletedAndUpdated)) deleted on one and "
                    + "updated on another; \(grouped(expected.count)) rows in the end; "
                    + "\(nodes.reduce(0) { $0 + $1.count }) segments, \(grouped(nodes.joined().reduce(0) { $0 + $1.bytes.count })) B "
                    + "vs net changeset \(grouped(changeset.count)) B"
            return MixedWorkload(
                starting: starting, startingSegments: startingSegments, nodes: nodes, changes: exported, expected: expected,
                changeset: changeset, summary: summary)
        }
    }

    /// Turns `Note` in `db`, holding `starting`, into `expected` in one transaction: deletes the rows that are
    /// gone, sets every column of the rows that differ, inserts the new ones.
    static func writeNetChanges(from starting: [NoteRow], to expected: [[DatabaseValue]], into db: PlainDatabase) throws {
        let final = try expected.map { row in
            guard let note = NoteRow(selected: row) else { throw BenchError("an expected row has an unexpected shape: \(row)") }
            return note
        }
        let finalByID = Dictionary(uniqueKeysWithValues: final.map { ($0.id, $0) })
        let startingIDs = Set(starting.map(\.id))
        let delete = try db.prepare(#"DELETE FROM "Note" WHERE "id" = ?"#)
        let update = try db.prepare(NoteFixture.plainUpdateSQL)
        let insert = try db.prepare(NoteFixture.plainInsertSQL)
        try db.execute("BEGIN IMMEDIATE")
        for row in starting {
            guard let now = finalByID[row.id] else {
                try delete.bind(row.id, at: 1)
                try delete.run()
                continue
            }
            if now != row { try update.run(now) }
        }
        for row in final where !startingIDs.contains(row.id) { try insert.run(row) }
        try db.execute("COMMIT")
    }

    // MARK: - One mixed round

    struct MixedResult {
        var applySeconds: Double
        /// Decode and import of every node's mixed segments, timed as one loop.
        var oursSeconds: Double
        /// The part of `oursSeconds` spent waiting for a segment to be decoded (on another thread).
        var decodeSeconds: Double

        var throughputRatio: Double { applySeconds / oursSeconds }
    }

    static func mixedRound(_ workload: MixedWorkload, oursFirst: Bool) throws -> MixedResult {
        var ours: (seconds: Double, decode: Double)?
        var apply: Double?
        for side in oursFirst ? [true, false] : [false, true] {
            if side { ours = try replayMixed(workload) } else { apply = try changesetApplyMixed(workload) }
        }
        guard let ours, let apply else { throw BenchError("a side of the mixed round did not run") }
        return MixedResult(applySeconds: apply, oursSeconds: ours.seconds, decodeSeconds: ours.decode)
    }

    /// logsync: a fresh target store that has imported the starting rows (untimed); timed, every node's mixed
    /// segments through `importSegments`, one node after the other. Checks the rows it ends with.
    static func replayMixed(_ workload: MixedWorkload) throws -> (seconds: Double, decode: Double) {
        try withTemporaryDirectory { directory in
            let target = try Store(path: directory.file("target.sqlite"), schema: NoteFixture.schema)
            _ = try SegmentFixture.importAll(workload.startingSegments, into: target)
            var decode = 0.0
            let seconds = try timed {
                for segments in workload.nodes { decode += try SegmentFixture.importAll(segments, into: target).decodeSeconds }
            }
            try SegmentFixture.expectRows(target, workload.expected.count, "the mixed target store")
            guard try target.read(SegmentFixture.selectRows) == workload.expected else {
                throw BenchError("the mixed target store's Note rows differ from what the writing nodes converged to")
            }
            return (seconds, decode)
        }
    }

    /// The baseline: `sqlite3changeset_apply` of the net changeset to a fresh plain database holding the starting
    /// rows (inserted untimed). Checks the rows it ends with.
    static func changesetApplyMixed(_ workload: MixedWorkload) throws -> Double {
        try withTemporaryDirectory { directory in
            let path = directory.file("session-target.sqlite")
            let seconds = try SegmentFixture.applyChangeset(
                workload.changeset, rows: workload.expected.count, at: path, holding: workload.starting[...])
            guard try Connection(path: path).rows(SegmentFixture.selectRows) == workload.expected else {
                throw BenchError("changeset_apply left Note rows that differ from what the writing nodes converged to")
            }
            return seconds
        }
    }
}
