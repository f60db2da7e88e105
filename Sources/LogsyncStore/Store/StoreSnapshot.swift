import LogsyncCore
import LogsyncSQLite

/// A read-only view of a store pinned at one committed state, like Core Data's query generations.
///
/// A snapshot owns a connection of its own that holds a read transaction open: whatever commits after it
/// was taken, by this process or another, is invisible to its reads until ``advance()`` moves it to the
/// store's latest state. While it is open, SQLite cannot start the WAL over (its pages are still needed),
/// so a snapshot held for hours lets the WAL grow: advance or drop snapshots once they are not needed.
public final class StoreSnapshot: Sendable {
    private struct State {
        let connection: Connection
        var token: HistoryToken
    }

    /// The store file the snapshot reads.
    public let path: String
    private let state: Locked<State>

    init(store: Store) throws {
        path = store.path
        // Foreign writes committed so far are sealed, so the snapshot's token covers everything it sees.
        try store.sealPendingChanges()
        do {
            let connection = try Store.openConnection(store.path, options: store.options)
            try connection.execute("PRAGMA query_only = 1")
            let token = try Self.begin(connection)
            state = Locked(State(connection: connection, token: token))
        } catch {
            throw Store.storeError(error, path: store.path, doing: "taking a snapshot")
        }
    }

    deinit {
        state.withLock { try? $0.connection.execute("ROLLBACK") }
    }

    /// The token of the newest history transaction the snapshot sees.
    public var token: HistoryToken { state.withLock { $0.token } }

    /// Rows of a read-only query, as of the snapshot.
    public func read(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        do {
            return try state.withLock { try $0.connection.rows(sql, arguments) }
        } catch {
            throw Store.storeError(error, path: path, doing: "reading from a snapshot")
        }
    }

    /// Moves the snapshot to the store's latest committed state and returns its token.
    @discardableResult
    public func advance() throws -> HistoryToken {
        do {
            return try state.withLock { state in
                try state.connection.execute("COMMIT")
                state.token = try Self.begin(state.connection)
                return state.token
            }
        } catch {
            throw Store.storeError(error, path: path, doing: "advancing a snapshot")
        }
    }

    /// Starts the read transaction; its first read fixes what it sees.
    private static func begin(_ connection: Connection) throws -> HistoryToken {
        try connection.execute("BEGIN DEFERRED")
        return HistoryToken(try connection.int64("SELECT seq FROM _ls_log WHERE kind = 0 ORDER BY seq DESC LIMIT 1") ?? 0)
    }
}

extension Store {
    /// A snapshot of the store as of now (see ``StoreSnapshot``).
    public func snapshot() throws -> StoreSnapshot {
        try StoreSnapshot(store: self)
    }
}
