import Foundation
import LogsyncCore
import LogsyncPlatform

/// How an account switch makes sure that no committed write is lost with a retired store
/// (`docs/accounts.md`, "Nothing lost"): the store is first **closed to writes**, inside the store file
/// itself, and only then checked for what it has not shipped. From the commit that closes it, every insert,
/// update or delete of a synced table fails — whichever connection or process makes it: the library, the
/// `sqlite3` shell, a script, a process that kept the file open across the switch — so what the check finds
/// shipped stays all there is, and deleting the file afterwards cannot take a committed write with it.
extension Store {
    /// The start of the message every refused write carries, by which the library recognises it.
    static let retiredMessage = "logsync: this store was retired by an account switch"

    /// The name of the trigger that refuses `operation` on entity `id` of a retired store. Not a capture
    /// trigger's name (`_ls_t…`): registration and the drift check leave these alone.
    static func retiredTriggerName(_ id: Int64, _ operation: String) -> String { "_ls_retired_\(id)_\(operation)" }

    /// Closes the store to writes, durably, in one transaction that first takes the write lock (waiting
    /// up to the busy timeout for a writer in another process, whose transaction then commits before this
    /// one and is shipped with the rest). `note` says why, in every refusal (the switch: from which
    /// account to which). Idempotent.
    package func closeToWrites(note: String) throws {
        let message = "\(Self.retiredMessage) (\(note)); write to the active store (syncctl account status)"
        let literal = "'" + message.replacingOccurrences(of: "'", with: "''") + "'"
        try durably {
            try syncTransaction { state, _ in
                for info in catalog.byID.values.sorted(by: { $0.id < $1.id }) {
                    for operation in ["insert", "update", "delete"] {
                        try state.connection.execute(
                            """
                            CREATE TRIGGER IF NOT EXISTS \(SchemaSQL.quote(Self.retiredTriggerName(info.id, operation)))
                            BEFORE \(operation.uppercased()) ON \(SchemaSQL.quote(info.entity.name))
                            BEGIN SELECT RAISE(ABORT, \(literal)); END
                            """)
                    }
                }
                try state.connection.execute("INSERT OR REPLACE INTO _ls_meta(key, value) VALUES ('retired', ?)", [.text(note)])
            }
        }
    }

    /// Opens a store closed to writes again: for the copy of a retired store that a logout keeps as the
    /// local store, which the app goes on writing.
    package func reopenToWrites() throws {
        try syncTransaction { state, _ in
            let names = try state.connection.rows(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_ls\\_retired\\_%' ESCAPE '\\'")
            for case .text(let name)? in names.map(\.first) {
                try state.connection.execute("DROP TRIGGER IF EXISTS \(SchemaSQL.quote(name))")
            }
            try state.connection.execute("DELETE FROM _ls_meta WHERE key = 'retired'")
        }
    }

    /// Whether an account switch retired the path of a store that does not exist yet, so that opening it
    /// must not create a new store there (``StoreOptions/Creation/unlessRetired``): a write into such a
    /// store would belong to no account and never ship. Paths are never reused, so a path an account state
    /// manages is one syncd creates itself: `P` (syncd's `[store] path`) once `P.accounts/state.json` exists
    /// (the first switch retires it), and every store in a `….accounts` folder beside such a state file.
    /// Returns the state file that says so.
    static func accountStateRetiring(_ path: String) -> String? {
        let ownState = path + ".accounts/state.json"
        if DurableFiles.exists(ownState) { return ownState }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        guard folder.lastPathComponent.hasSuffix(".accounts") else { return nil }
        let state = folder.appendingPathComponent("state.json").path
        return DurableFiles.exists(state) ? state : nil
    }
}
