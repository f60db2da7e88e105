import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing

/// First inserts prepared off the writer's thread (`FreshRows.swift`) are written exactly as the merge
/// would have written them.
@Suite("Prepared first inserts")
struct FreshRowsTests {
    /// Everything an import decides: the rows, the states and where they are kept, the nodes, the
    /// history (without its sequence numbers' own clock readings), the cursors.
    static func content(_ store: Store) throws -> [[[DatabaseValue]]] {
        [
            try store.read(#"SELECT * FROM "Doc" ORDER BY "id""#),
            try store.read("SELECT pk, cl, state FROM _ls_live ORDER BY pk"),
            try store.read("SELECT entity, pk, cl, state FROM _ls_row ORDER BY entity, pk"),
            try store.read("SELECT idx, node FROM _ls_node ORDER BY idx"),
            try store.read("SELECT seq, kind, entity, pk, cols, tomb, hlc, author, context, origin FROM _ls_log ORDER BY seq"),
            try store.read("SELECT node, last_seq FROM _ls_cursor ORDER BY node"),
        ]
    }

    static func importAll(_ segments: [SegmentImport], into store: Store) throws {
        var pending = segments[...]
        try store.sync.importSegments(
            from: segments[0].header.node, account: "default", next: { _ in pending.popFirst() }, outcome: { _, _ in })
    }

    @Test("segments whose inserts were prepared leave the store as the merge alone does, including re-inserts and rows changed again in the same transaction")
    func preparedImportsMatchTheMerge() throws {
        var segments = Fixtures.docSegments(count: 3, transactions: 4, changes: 30)
        // Into the second segment: an update and a delete of rows their own transaction inserted (a change
        // of the state drops the prepared insert), an insert of a key the first segment inserted (the
        // table's insert fails and the states merge), and an insert with no values (defaults).
        let first = segments[0].transactions[0].changes[0].primaryKey
        var transaction = segments[1].transactions[1]
        let (updated, deleted) = (transaction.changes[3].primaryKey, transaction.changes[5].primaryKey)
        transaction.changes += [
            LogChange(entity: "Doc", primaryKey: updated, kind: .update, causalLength: 1, values: ["body": .text("changed again")]),
            LogChange(entity: "Doc", primaryKey: deleted, kind: .delete, causalLength: 2),
            LogChange(entity: "Doc", primaryKey: first, kind: .insert, causalLength: 1, values: ["body": .text("inserted twice")]),
            LogChange(entity: "Doc", primaryKey: Fixtures.id(), kind: .insert, causalLength: 1),
        ]
        segments[1].transactions[1] = transaction

        let directory = try TemporaryDirectory("fresh")
        let merged = try Store(path: directory.file("merged.sqlite"), schema: Fixtures.docSchema)
        try Self.importAll(segments, into: merged)

        let prepared = try Store(path: directory.file("prepared.sqlite"), schema: Fixtures.docSchema)
        try Self.importAll([segments[0]], into: prepared)
        var rest = Array(segments[1...])
        for index in rest.indices {
            prepared.sync.freshRowPreparer.prepare(&rest[index])
            let fresh = try #require(rest[index].fresh, "the writer published the node's index with the first segment")
            #expect(fresh.rows.joined().compactMap { $0 }.count == 4 * 30 + (index == 0 ? 2 : 0))
        }
        try Self.importAll(rest, into: prepared)

        #expect(try Self.content(prepared) == Self.content(merged))
        #expect(try prepared.read(#"SELECT count(*) FROM "Doc" WHERE id = ?"#, [deleted]) == [[.integer(0)]])
        #expect(try prepared.read(#"SELECT count(*) FROM "Doc""#) == [[.integer(3 * 4 * 30 + 1 - 1)]])
    }

    @Test("the writer stores prepared rows as they were prepared")
    func preparedRowsAreWritten() throws {
        let segments = Fixtures.docSegments(count: 2, transactions: 1, changes: 3)
        let directory = try TemporaryDirectory("fresh")
        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.docSchema)
        try Self.importAll([segments[0]], into: store)
        var second = segments[1]
        store.sync.freshRowPreparer.prepare(&second)
        let fresh = try #require(second.fresh)
        // A preparation that says another body than the change: only a writer that uses it stores it.
        let marked = fresh.rows.map { transaction in
            transaction.map { row in row.map { FreshRow(state: $0.state, values: [.text("prepared")], encodedState: $0.encodedState) } }
        }
        second.fresh = FreshRows(node: fresh.node, nodeIndex: fresh.nodeIndex, rows: marked)
        try Self.importAll([second], into: store)
        let keys = second.transactions[0].changes.map(\.primaryKey)
        for key in keys {
            #expect(try store.read(#"SELECT body FROM "Doc" WHERE id = ?"#, [key]) == [[.text("prepared")]])
        }
    }

    @Test("a segment prepared with a node index the writer does not have is merged without its preparation")
    func mismatchedIndexesAreIgnored() throws {
        let segments = Fixtures.docSegments(count: 2, transactions: 2, changes: 10)
        let directory = try TemporaryDirectory("fresh")
        let merged = try Store(path: directory.file("merged.sqlite"), schema: Fixtures.docSchema)
        try Self.importAll(segments, into: merged)

        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.docSchema)
        try Self.importAll([segments[0]], into: store)
        // As if a rolled-back transaction had handed out this index.
        store.knownNodeIndexes.withLock { $0[segments[1].header.node] = 99 }
        var second = segments[1]
        store.sync.freshRowPreparer.prepare(&second)
        #expect(second.fresh?.node == segments[1].header.node)
        #expect(second.fresh?.nodeIndex == 99)
        try Self.importAll([second], into: store)
        #expect(try Self.content(store) == Self.content(merged))
    }
}
