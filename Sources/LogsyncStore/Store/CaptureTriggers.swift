import LogsyncSQLite

/// Whether the writer connection's triggers are on, and whether they may be turned off.
///
/// The capture triggers record every write to a synced table, from any connection (`docs/history.md`).
/// Two writers on logsync's own connection know every change they make and record its history
/// themselves, cheaper than a trigger program per row: the merge (`MergeCapture.swift`) and the library's
/// own write helpers (`LocalCapture.swift`). They turn the connection's triggers off while they write
/// (`SQLITE_DBCONFIG_ENABLE_TRIGGER`, this connection only; other connections and processes keep them).
///
/// The rule that keeps capture whole: **whatever runs SQL on the writer connection that might write a
/// synced table and does not record its history itself turns the triggers on first** — raw SQL in a
/// write body, a sync transaction. The switch stays where the last writer left it, because turning it
/// expires every prepared statement of the connection (each compiles again the next time it runs):
/// an app whose writes all go through the helpers keeps them off, one that writes raw SQL keeps them on.
final class CaptureTriggers {
    private let connection: Connection
    /// The connection's triggers are off; set only once SQLite has done it.
    private(set) var areOff = false
    /// Whether some synced table has a trigger logsync did not create, and at which schema cookie that
    /// was found.
    private var foreignTriggers: (cookie: Int64, present: Bool)?

    init(connection: Connection) {
        self.connection = connection
    }

    /// Turns the triggers on, if they are off.
    func turnOn() throws {
        guard areOff else { return }
        try connection.setTriggersEnabled(true)
        areOff = false
    }

    /// Turns the triggers off when no synced table has a trigger of the app's own, which must see every
    /// write as SQLite's triggers would (an FTS index, an audit table). Returns whether they are off.
    func turnOffUnlessForeign() throws -> Bool {
        if try hasForeignTriggers() {
            try turnOn()
            return false
        }
        if !areOff {
            try connection.setTriggersEnabled(false)
            areOff = true
        }
        return true
    }

    /// Whether some synced table has a trigger whose name is not one logsync gives its own
    /// (``SchemaSQL/triggerPrefix(_:)``). Looked up again only when the schema cookie changes.
    private func hasForeignTriggers() throws -> Bool {
        let cookie = try connection.int64("PRAGMA schema_version") ?? 0
        if let known = foreignTriggers, known.cookie == cookie { return known.present }
        let present =
            try connection.int64(
                """
                SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name NOT GLOB '_ls_t[0-9]*'
                  AND lower(tbl_name) IN (SELECT lower(name) FROM _ls_entity))
                """) == 1
        foreignTriggers = (cookie, present)
        return present
    }
}
