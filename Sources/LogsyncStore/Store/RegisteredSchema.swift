import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncSQLite

extension Store {
    /// The schema registered in the store file at `path`, or nil when there is no store there (or it was
    /// never registered). Lets a daemon open a store without being told its schema.
    ///
    /// Another process may be writing the store meanwhile: the read waits for its locks like every other
    /// (``StoreOptions/busyTimeoutMilliseconds``), and is tried again until then when SQLite answers busy
    /// without waiting (while a process that opened the store alone recovers its WAL index).
    public static func registeredSchema(at path: String, options: StoreOptions = StoreOptions()) throws -> Schema? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let json = try retryingWhileBusy(milliseconds: options.busyTimeoutMilliseconds) { () throws -> String? in
                let connection = try Connection(path: path, options: [.readOnly])
                try connection.setBusyTimeout(milliseconds: options.busyTimeoutMilliseconds)
                guard try connection.scalar("SELECT 1 FROM sqlite_master WHERE name = '_ls_meta'") != nil,
                    case .text(let json)? = try connection.scalar("SELECT value FROM _ls_meta WHERE key = 'schema'")
                else { return nil }
                return json
            }
            guard let json else { return nil }
            return try JSONDecoder().decode(Schema.self, from: Data(json.utf8))
        } catch {
            throw storeError(error, path: path, doing: "reading the registered schema")
        }
    }

    /// Runs `body` again while SQLite answers busy, until `milliseconds` have passed; then the last error
    /// is thrown. For reads outside the store's own connections, whose busy handler SQLite does not call
    /// in every case (a WAL index being recovered answers `SQLITE_BUSY_RECOVERY` at once).
    static func retryingWhileBusy<T>(milliseconds: Int32, _ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + .milliseconds(Int(milliseconds))
        while true {
            do {
                return try body()
            } catch let error as SQLiteError where error.isBusy && ContinuousClock.now < deadline {
                Pause.microseconds(1_000)
            }
        }
    }
}
