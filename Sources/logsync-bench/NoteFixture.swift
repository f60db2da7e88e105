import Foundation
import LogsyncCore

/// One pre-generated `Note` row, inserted identically into the plain baseline and the logsync store.
struct NoteRow: Sendable, Equatable {
    var id: String
    var title: String
    var body: String
    var rank: Int64
    var score: Double

    /// The row as arguments of ``NoteFixture/plainInsertSQL``, for `WriteTransaction.execute`.
    var arguments: [DatabaseValue] { [.text(id), .text(title), .text(body), .integer(rank), .real(score)] }

    /// The row as `WriteTransaction.insert` takes it.
    var values: [String: DatabaseValue] {
        ["id": .text(id), "title": .text(title), "body": .text(body), "rank": .integer(rank), "score": .real(score)]
    }
}

extension NoteRow {
    /// A row as ``SegmentFixture/selectRows`` reads it; nil when a column is missing or of another type.
    init?(selected row: [DatabaseValue]) {
        guard row.count == 5, case .text(let id) = row[0], case .text(let title) = row[1], case .text(let body) = row[2],
            case .integer(let rank) = row[3], case .real(let score) = row[4]
        else { return nil }
        self.init(id: id, title: title, body: body, rank: rank, score: score)
    }
}

/// The table the benchmarks write: one synced entity `Note`, and a plain table of exactly the same shape.
enum NoteFixture {
    static let schema = Schema(version: 1, entities: [
        Entity(
            "Note", primaryKey: PrimaryKey("id", .uuid),
            attributes: [
                Attribute("title", .text), Attribute("body", .text), Attribute("rank", .integer),
                Attribute("score", .real),
            ])
    ])

    /// The DDL the store generates for ``schema`` (checked at run time against the store's `sqlite_master`),
    /// used verbatim for the plain baseline so that only history capture differs.
    static let plainDDL = """
        CREATE TABLE "Note" (
          "id" TEXT PRIMARY KEY NOT NULL CHECK (typeof("id") = 'text' AND length(CAST("id" AS BLOB)) = 36 AND "id" GLOB '[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]-[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]-[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]-[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]-[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]'),
          "title" TEXT,
          "body" TEXT,
          "rank" INTEGER,
          "score" REAL
        ) STRICT
        """

    static let plainInsertSQL = #"INSERT INTO "Note"("id", "title", "body", "rank", "score") VALUES (?, ?, ?, ?, ?)"#

    /// Sets every column of the row with the key; its parameters in the same order as ``plainInsertSQL``'s.
    static let plainUpdateSQL = #"UPDATE "Note" SET "title" = ?2, "body" = ?3, "rank" = ?4, "score" = ?5 WHERE "id" = ?1"#

    /// `count` rows with fresh lowercase UUID keys, a short title, a 40-character body, and numbers.
    static func rows(count: Int) -> [NoteRow] {
        (0..<count).map { i in
            let prefix = "body of note \(i): "
            let body = prefix + String(repeating: "x", count: max(0, 40 - prefix.count))
            return NoteRow(
                id: UUID().uuidString.lowercased(), title: "title \(i)", body: body, rank: Int64(i),
                score: Double(i) * 0.5)
        }
    }
}

extension PlainStatement {
    /// Binds a row to a statement whose parameters are its columns in order (``NoteFixture/plainInsertSQL``,
    /// ``NoteFixture/plainUpdateSQL``) and runs it.
    func run(_ row: NoteRow) throws {
        try bind(row.id, at: 1)
        try bind(row.title, at: 2)
        try bind(row.body, at: 3)
        try bind(row.rank, at: 4)
        try bind(row.score, at: 5)
        try run()
    }
}

extension NoteFixture {
    /// One transaction inserting one fresh note, at `sequence`: what a small segment holds.
    static func transaction(sequence: UInt64) -> LogTransaction {
        let row = rows(count: 1)[0]
        return LogTransaction(
            sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: UInt64(Date().timeIntervalSince1970 * 1000), logical: 0),
            author: "bench", contextName: nil,
            changes: [LogChange(entity: "Note", primaryKey: .text(row.id), kind: .insert, causalLength: 1, values: row.values.filter { $0.key != "id" })])
    }
}
