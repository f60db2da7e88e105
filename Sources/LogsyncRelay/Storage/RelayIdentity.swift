import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayProtocol
import LogsyncSQLite

/// The relay's identity kept in its database (`relay_meta`), and the note beside the database of what
/// the serving relays last committed (`DATABASE-served`), which tells a restored backup from the
/// database it was taken of.
///
/// Every commit of a serving relay counts itself in the database (`commits`, in the same transaction)
/// and then writes the count in the note, with the id and the epoch. At start, a serving relay compares:
/// a database whose count is below the note's, or one the note does not vouch for at all (no note, a
/// note of another database or unreadable) while it holds arrivals, may have lost what its relays
/// acknowledged — a restored backup, a file copied while the relay wrote — and gets a new epoch. A new
/// database (no arrival yet) keeps epoch 1: its id is new, which nodes notice the same way.
enum RelayEpoch {
    static let table = "CREATE TABLE IF NOT EXISTS relay_meta(key TEXT PRIMARY KEY, value ANY) STRICT;"

    /// The note beside the database.
    static func notePath(_ database: String) -> String { database + "-served" }

    /// What the note says: `lsr-served 1 ID EPOCH COMMITS`, fixed width.
    struct Note: Equatable {
        var identity: RelayIdentity
        var commits: Int64

        var bytes: [UInt8] {
            Array("lsr-served 1 \(identity.id) \(Self.padded(identity.epoch)) \(Self.padded(UInt64(max(commits, 0))))\n".utf8)
        }

        init(identity: RelayIdentity, commits: Int64) {
            self.identity = identity
            self.commits = commits
        }

        init?(_ bytes: [UInt8]) {
            let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
            guard fields.count == 5, fields[0] == "lsr-served", fields[1] == "1", RelayEpoch.isID(fields[2]),
                let epoch = UInt64(fields[3]), let commits = Int64(fields[4].trimmingCharacters(in: .newlines))
            else { return nil }
            identity = RelayIdentity(id: String(fields[2]), epoch: epoch)
            self.commits = commits
        }

        static func padded(_ value: UInt64) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
        }
    }

    static func isID<S: StringProtocol>(_ text: S) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Inside the opening transaction: the database's identity, made when missing (a new database, or
    /// one of an older relay), and how many times serving relays committed to it.
    static func identity(_ connection: Connection) throws(SQLiteError) -> (identity: RelayIdentity, commits: Int64) {
        let commits = try connection.int64("SELECT value FROM relay_meta WHERE key = 'commits'") ?? 0
        if case .text(let id)? = try connection.scalar("SELECT value FROM relay_meta WHERE key = 'id'"), isID(id),
            let epoch = try connection.int64("SELECT value FROM relay_meta WHERE key = 'epoch'"), epoch > 0
        {
            return (RelayIdentity(id: id, epoch: UInt64(epoch)), commits)
        }
        var generator = SystemRandomNumberGenerator()
        let identity = RelayIdentity(
            id: (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined(), epoch: 1)
        try connection.execute(
            "INSERT OR REPLACE INTO relay_meta(key, value) VALUES('id', ?), ('epoch', 1)", [.text(identity.id)])
        return (identity, commits)
    }

    /// Inside a serving relay's opening transaction: the identity to serve under, with a new epoch when
    /// the note (`nil`: there is none) does not vouch for a database that holds arrivals, and why.
    static func check(
        _ connection: Connection, _ identity: RelayIdentity, commits: Int64, note: [UInt8]?, database: String
    ) throws(SQLiteError) -> (identity: RelayIdentity, change: String?) {
        let written = note.flatMap { Note($0) }
        // The note vouches for the database when the database holds every commit it counted, under an epoch
        // at least the note's (an older epoch: a backup taken before an earlier change, restored again).
        if let written, written.identity.id == identity.id, commits >= written.commits, identity.epoch >= written.identity.epoch {
            return (identity, nil)
        }
        let arrivals =
            try connection.int64("SELECT max(cursor) FROM (SELECT cursor FROM accounts UNION ALL SELECT cursor FROM retired_accounts)") ?? 0
        guard arrivals > 0 else { return (identity, nil) }
        let reason: String
        if note == nil {
            reason = "there is no \(notePath(database)) beside it (a database restored or moved here, or first served by this version)"
        } else if let written {
            reason = written.identity.id != identity.id
                ? "\(notePath(database)) was written for another database (\(written.identity.id))"
                : written.commits > commits
                    ? "its relays committed \(written.commits) times, the database holds \(commits) of those commits (a restored backup, or a copy made while the relay wrote)"
                    : "it is at epoch \(identity.epoch), its relays served epoch \(written.identity.epoch) since (a backup restored again)"
        } else {
            reason = "\(notePath(database)) cannot be read"
        }
        var changed = identity
        let seen = written.map { $0.identity.id == identity.id ? $0.identity.epoch : 0 } ?? 0
        changed.epoch = max(identity.epoch + 1, seen + 1, UInt64(SQLiteRelayStorage.now()))
        try connection.execute("INSERT OR REPLACE INTO relay_meta(key, value) VALUES('epoch', ?)", [.integer(Int64(changed.epoch))])
        return (
            changed,
            "the database may hold less than this relay acknowledged: \(reason); epoch \(identity.epoch) -> \(changed.epoch), so that every node pulls again from the start and pushes again what it still has"
        )
    }

    /// Inside a writer's batch: counts the commit; returns the count.
    static func countCommit(_ connection: Connection) throws(SQLiteError) -> Int64 {
        let rows = try connection.rows(
            "INSERT INTO relay_meta(key, value) VALUES('commits', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1 RETURNING value")
        if case .integer(let count)? = rows.first?.first { return count }
        return 0
    }
}

/// The note of what this relay committed, rewritten after each commit of its writer.
final class ServedNote: Sendable {
    let identity: RelayIdentity
    private let file: RewrittenFile

    /// Writes the note durably at start, in place: another relay serving the same database keeps
    /// rewriting the same file (a replacement would leave it writing to one no longer there).
    init(database: String, identity: RelayIdentity, commits: Int64) throws(SystemError) {
        self.identity = identity
        file = try RewrittenFile(path: RelayEpoch.notePath(database))
        try file.write(RelayEpoch.Note(identity: identity, commits: commits).bytes, truncating: true)
        try file.sync()
    }

    /// After a commit (never before it: a note ahead of the database would make a good database look
    /// restored). A failed write only leaves the note behind, which weakens nothing but the detection.
    func record(commits: Int64) {
        try? file.write(RelayEpoch.Note(identity: identity, commits: commits).bytes)
    }

    /// At a clean stop: the note on disk, not just in the page cache.
    func sync() { try? file.sync() }
}
