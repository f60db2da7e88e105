import LogsyncCore
@_exported import struct LogsyncPlatform.SystemError
@_exported import struct LogsyncSQLite.SQLiteError
import enum LogsyncPlatform.ExitStatus
import LogsyncSQLite

/// Why a store operation failed: a code to switch on, a message that says what and where, and the
/// underlying cause when there is one.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// The directory that should hold the store does not exist.
        public static let directoryMissing = Code(name: "directoryMissing")
        /// The store's directory or file cannot be written.
        public static let notWritable = Code(name: "notWritable")
        /// The file exists but is not a SQLite database, or is damaged.
        public static let notADatabase = Code(name: "notADatabase")
        /// The file was written by a newer logsync, or is another application's database.
        public static let incompatibleFormat = Code(name: "incompatibleFormat")
        /// The declared schema is invalid or cannot be migrated to.
        public static let schema = Code(name: "schema")
        /// Another program changed the synced tables (a column renamed, dropped, retyped or added, a unique
        /// index created or dropped, a capture trigger dropped): the store does not open or sync until the
        /// change is undone. The message names each change and what to do.
        public static let schemaDrift = Code(name: "schemaDrift")
        /// A write named an entity or column the schema does not declare.
        public static let unknownEntity = Code(name: "unknownEntity")
        public static let unknownColumn = Code(name: "unknownColumn")
        /// A constraint refused the write (unique key, delete rule `deny`, key change, ...).
        public static let constraint = Code(name: "constraint")
        /// Another connection held the database lock for longer than the busy timeout.
        public static let busy = Code(name: "busy")
        /// Any other SQLite failure; see ``StoreError/cause``.
        public static let sqlite = Code(name: "sqlite")
        /// A system call failed (inotify, file checks); see ``StoreError/cause``.
        public static let system = Code(name: "system")
        /// An account switch retired this store: it takes no more writes, and no new store is created at
        /// its path. The write belongs in the active store (`syncctl account status`); try again there.
        public static let retired = Code(name: "retired")
    }

    public var code: Code
    public var message: String
    /// The store file, or the directory, concerned.
    public var path: String?
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, path: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = cause
    }

    public var description: String {
        var text = message
        if let path, !message.contains(path) { text += " (\(path))" }
        if let cause { text += ": \(cause)" }
        return text
    }

    /// The exit status of a command that stops on this error (`docs/exit-codes.md`).
    public var exitStatus: Int32 {
        switch code {
        case .directoryMissing, .notWritable: return ExitStatus.cannotCreate
        case .notADatabase, .incompatibleFormat, .schema, .schemaDrift: return ExitStatus.dataError
        case .busy, .retired: return ExitStatus.temporaryFailure
        case .system: return ExitStatus.ioError
        default: return ExitStatus.failed
        }
    }

    /// Maps a SQLite failure to the code a caller can act on.
    static func wrapping(_ error: SQLiteError, path: String, doing action: String) -> StoreError {
        let code: Code
        if error.isBusy {
            code = .busy
        } else if error.isConstraint {
            code = .constraint
        } else if error.isNotADatabase {
            code = .notADatabase
        } else {
            code = .sqlite
        }
        return StoreError(code, "\(action) failed", path: path, cause: error)
    }
}
