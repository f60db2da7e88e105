import LogsyncCore
import LogsyncSQLite

/// What SQLite's own check of a store file found.
public struct IntegrityReport: Sendable {
    /// SQLite's findings, at most 100; empty when nothing is wrong.
    public var problems: [String]
    /// False when the time limit ended the check before it was done: nothing was wrong up to there.
    public var complete: Bool
    public var elapsed: Duration

    public var isIntact: Bool { problems.isEmpty }
}

extension Store {
    /// Checks the store file at `path` with SQLite's own checks, on a read-only connection of its own
    /// (a write in progress elsewhere is neither blocked nor seen half-done):
    ///
    /// - `full: false`, `PRAGMA quick_check`: every page and every b-tree is well formed, in time linear
    ///   in the file's size (roughly a second per few hundred MB). What syncd affords at every start.
    /// - `full: true`, `PRAGMA integrity_check`: also that every index agrees with its table; slower
    ///   (`syncctl check`).
    ///
    /// `timeLimit` ends the check early, reported as not ``IntegrityReport/complete``. A store so damaged
    /// that SQLite cannot even run the check is reported as a problem, not thrown.
    public static func checkIntegrity(
        at path: String, full: Bool, timeLimit: Duration? = nil, options: StoreOptions = StoreOptions()
    ) throws -> IntegrityReport {
        let start = ContinuousClock.now
        do {
            return try retryingWhileBusy(milliseconds: options.busyTimeoutMilliseconds) { () throws -> IntegrityReport in
                let connection = try Connection(path: path, options: [.readOnly])
                try connection.setBusyTimeout(milliseconds: options.busyTimeoutMilliseconds)
                connection.interrupt(at: timeLimit.map { start + $0 })
                var problems: [String] = []
                var complete = true
                do {
                    let rows = try connection.rows("PRAGMA \(full ? "integrity_check" : "quick_check")(100)")
                    let lines = rows.compactMap { row -> String? in
                        if case .text(let line)? = row.first { return line }
                        return nil
                    }
                    if lines != ["ok"] { problems = lines }
                } catch let error as SQLiteError where error.isInterrupt {
                    complete = false
                } catch let error as SQLiteError where error.isNotADatabase {
                    problems = [error.description]
                }
                return IntegrityReport(problems: problems, complete: complete, elapsed: ContinuousClock.now - start)
            }
        } catch {
            throw storeError(error, path: path, doing: "checking the store's integrity")
        }
    }

    /// ``checkIntegrity(at:full:timeLimit:options:)`` for this store's file.
    public func checkIntegrity(full: Bool = true, timeLimit: Duration? = nil) throws -> IntegrityReport {
        try Self.checkIntegrity(at: path, full: full, timeLimit: timeLimit, options: options)
    }
}
