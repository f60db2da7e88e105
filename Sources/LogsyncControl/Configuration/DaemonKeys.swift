import Foundation
import LogsyncCore
import LogsyncPlatform

extension DaemonConfiguration {
    /// One key of syncd.toml, written once: its table and name, its type, its default, what it means, how
    /// it is read into the configuration, and what a reload does when it changes. `config/syncd.toml`
    /// documents exactly these keys with these defaults, and a reload applies a key or reports that it needs
    /// a restart by this table alone (`ConfigurationTests`).
    public struct Key: Sendable {
        /// What a reload (`syncctl reload`, SIGHUP) does with a changed value.
        public enum Reload: Sendable, Hashable {
            /// The running daemon takes the new value.
            case applies
            /// The running daemon keeps the value it started with, and the reload says a restart applies it.
            case needsRestart
        }

        public let table: String
        public let name: String
        public let type: String
        /// The default, as `config/syncd.toml` shows it ("(none)" for a key without one).
        public let defaultValue: String
        public let meaning: String
        public let reload: Reload
        /// A value other than the default, as a file would hold it (tests change a key to it).
        public let example: String
        /// Reads the key's entry into a configuration; nil for a key that its table reads as a whole
        /// (`[relay]`, `[syncthing]`, whose keys are checked together).
        let read: (@Sendable (inout DaemonConfiguration, TableValue, (String) -> String) throws(ConfigError) -> Void)?
        /// Whether two configurations differ in this key.
        public let differs: @Sendable (DaemonConfiguration, DaemonConfiguration) -> Bool
        /// Sets this key in `configuration` to its value in `other`.
        let take: @Sendable (inout DaemonConfiguration, DaemonConfiguration) -> Void

        /// `table.name`, as errors and reloads name the key.
        public var fullName: String { "\(table).\(name)" }

        /// A key of a table read as a whole (its reader checks the keys together), compared through `path`.
        static func inTable<Value: Equatable & Sendable>(
            _ table: String, _ name: String, _ path: KeyPath<DaemonConfiguration, Value> & Sendable, type: String, default defaultValue: String,
            example: String, _ meaning: String
        ) -> Key {
            Key(
                table: table, name: name, type: type, defaultValue: defaultValue, meaning: meaning, reload: .needsRestart, example: example,
                read: nil, differs: { $0[keyPath: path] != $1[keyPath: path] }, take: { _, _ in })
        }
    }

    /// A key read into the configuration property at `path`, with its default: the one place the default
    /// is written (``init(paths:)`` takes it from here; ``Key/defaultValue`` shows it, paths as `<state>`
    /// and `<runtime>`).
    struct Setting<Value: Equatable & Sendable>: Sendable {
        let key: Key
        let initial: @Sendable (DaemonPaths) -> Value

        init(
            _ table: String, _ name: String, _ path: WritableKeyPath<DaemonConfiguration, Value> & Sendable, type: String,
            default initial: @escaping @Sendable (DaemonPaths) -> Value, example: String, reload: Key.Reload, _ meaning: String,
            read: @escaping @Sendable (TableValue, (String) -> String) throws(ConfigError) -> Value
        ) {
            self.initial = initial
            key = Key(
                table: table, name: name, type: type, defaultValue: Self.shown(initial(.symbolic)), meaning: meaning, reload: reload,
                example: example, read: { configuration, value, resolve throws(ConfigError) in configuration[keyPath: path] = try read(value, resolve) },
                differs: { $0[keyPath: path] != $1[keyPath: path] }, take: { $0[keyPath: path] = $1[keyPath: path] })
        }

        /// A default as `config/syncd.toml` writes it.
        static func shown(_ value: Value) -> String {
            switch value as Any {
            case let text as String: return "\"\(text)\""
            case let number as Int: return String(number)
            case let flag as Bool: return String(flag)
            case Optional<String>.none, Optional<LoopbackListener.Address>.none: return "(none)"
            case let address as LoopbackListener.Address: return "\"\(address)\""
            default: return String(describing: value)
            }
        }
    }

    static let storePathKey = Setting(
        "store", "path", \.storePath, type: "string", default: { $0.state + "/store.sqlite" }, example: "\"other.sqlite\"", reload: .needsRestart,
        "the SQLite store this daemon syncs"
    ) { value, resolve throws(ConfigError) in resolve(try value.string()) }
    static let schemaKey = Setting(
        "store", "schema", \.schemaPath, type: "string", default: { _ in nil }, example: "\"schema.json\"", reload: .needsRestart,
        "a JSON schema to register; without it the store's registered schema is used (a new store gets the embedded notes schema)"
    ) { value, resolve throws(ConfigError) -> String? in
        let path = resolve(try value.string())
        guard FileManager.default.fileExists(atPath: path) else { throw value.error("schema file \(path.excerpt(200)) does not exist") }
        return path
    }
    static let accountKey = Setting(
        "sync", "account", \.account, type: "string", default: { _ in "default" }, example: "\"other\"", reload: .needsRestart,
        "whose logs to exchange; a folder of that name holds them under the shared folder (1 to 128 ASCII letters, digits, '-', '_', '.'; not starting with '.')"
    ) { value, _ throws(ConfigError) in
        let account = try value.string()
        if let problem = AccountName.problem(account) { throw value.error("'sync.account' \(problem): \"\(account.excerpt())\"") }
        return account
    }
    static let sharedFolderKey = Setting(
        "sync", "shared_folder", \.sharedFolder, type: "string", default: { $0.state + "/shared" }, example: "\"elsewhere\"", reload: .needsRestart,
        "the folder all nodes share (local, NFS, Syncthing); must exist when set"
    ) { value, resolve throws(ConfigError) in resolve(try value.string()) }
    static let rescanIntervalKey = Setting(
        "sync", "rescan_interval_ms", \.rescanIntervalMilliseconds, type: "integer", default: { _ in 30_000 }, example: "2000", reload: .applies,
        "rescan the shared folder at least this often (inotify does not see other hosts' writes on NFS or synced folders)"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let segmentChangesKey = Setting(
        "sync", "segment_changes", \.segmentChanges, type: "integer", default: { _ in 2_000 }, example: "500", reload: .applies,
        "at most this many changes per exported segment"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let batchChangesKey = Setting(
        "sync", "batch_changes", \.batchChanges, type: "integer", default: { _ in ImportBatching().maximumChanges }, example: "1000", reload: .applies,
        "imports apply at most this many changes per SQLite transaction (whole transactions only); a batch also ends as soon as a local writer announces itself"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let batchMillisecondsKey = Setting(
        "sync", "batch_ms", \.batchMilliseconds, type: "integer", default: { _ in ImportBatching().maximumMilliseconds }, example: "50",
        reload: .applies, "imports commit at least this often, for writers that cannot announce themselves (the sqlite3 shell, other SQLite programs)"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let maximumBackoffKey = Setting(
        "sync", "max_backoff_ms", \.maximumBackoffMilliseconds, type: "integer", default: { _ in 60_000 }, example: "5000", reload: .applies,
        "after failures, retry with exponential backoff up to this delay"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let retentionEnabledKey = Setting(
        "retention", "enabled", \.retentionEnabled, type: "boolean", default: { _ in true }, example: "false", reload: .applies,
        "publish progress records, write baselines, prune this node's old segments and bootstrap from baselines (docs/retention.md); false keeps everything"
    ) { value, _ throws(ConfigError) in try value.boolean() }
    static let silentNodeKey = Setting(
        "retention", "silent_node_after_s", \.silentNodeAfterSeconds, type: "integer", default: { _ in 30 * 86_400 }, example: "86400", reload: .applies,
        "a node whose progress record is older than this (30 days) stops holding pruning back; when it returns it catches up from a baseline"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let baselineAfterKey = Setting(
        "retention", "baseline_after_transactions", \.baselineAfterTransactions, type: "integer", default: { _ in 10_000 }, example: "100",
        reload: .applies, "write a new baseline once the store includes this many transactions more than this node's newest baseline"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let progressIntervalKey = Setting(
        "retention", "progress_interval_ms", \.progressIntervalMilliseconds, type: "integer", default: { _ in 60_000 }, example: "1000",
        reload: .applies, "publish this node's progress record at least this often (and at most once a second when it changes)"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let pruneIntervalKey = Setting(
        "retention", "prune_interval_ms", \.pruneIntervalMilliseconds, type: "integer", default: { _ in 600_000 }, example: "1000", reload: .applies,
        "prune this node's segments, older baselines and purged history this often (syncctl prune does it now)"
    ) { value, _ throws(ConfigError) in try value.positive() }
    static let socketKey = Setting(
        "control", "socket", \.socketPath, type: "string", default: { $0.runtime + "/syncd.sock" }, example: "\"other.sock\"", reload: .needsRestart,
        "the control socket syncctl talks to (owner-only, in a folder only syncd's user can write)"
    ) { value, resolve throws(ConfigError) in resolve(try value.string()) }
    static let metricsListenKey = Setting(
        "metrics", "listen", \.metricsListen, type: "string", default: { _ in nil }, example: "\"127.0.0.1:9469\"", reload: .needsRestart,
        "HOST:PORT on a loopback address (127.0.0.1:9469, [::1]:9469) where syncd serves GET /metrics in Prometheus's text format; unset, it serves none"
    ) { value, _ throws(ConfigError) -> LoopbackListener.Address? in
        switch LoopbackListener.Address.parse(try value.string()) {
        case .success(let address): return address
        case .failure(let problem): throw value.error("'metrics.listen': \(problem)")
        }
    }
    static let logLevelKey = Setting(
        "log", "level", \.logLevel, type: "string", default: { _ in "info" }, example: "\"debug\"", reload: .applies,
        "the least severe entries logged: trace, debug, info, notice, warning, error or critical (syncd --log-level overrides it)"
    ) { value, _ throws(ConfigError) in
        let level = try value.string()
        guard logLevels.contains(level) else {
            throw value.error("'log.level' must be one of \(logLevels.joined(separator: ", ")), got \"\(level.excerpt())\"")
        }
        return level
    }

    /// Every key of syncd.toml outside `[relay]`, `[syncthing]` and `[seal]` (``relayKeys``, ``syncthingKeys``, ``sealKeys``).
    public static let keys: [Key] = [
        storePathKey.key, schemaKey.key, accountKey.key, sharedFolderKey.key, rescanIntervalKey.key, segmentChangesKey.key, batchChangesKey.key,
        batchMillisecondsKey.key, maximumBackoffKey.key, retentionEnabledKey.key, silentNodeKey.key, baselineAfterKey.key, progressIntervalKey.key,
        pruneIntervalKey.key, socketKey.key, metricsListenKey.key, logLevelKey.key,
    ]

    /// Every key, in the order `config/syncd.toml` documents them.
    public static var allKeys: [Key] { keys + relayKeys + syncthingKeys + sealKeys }

    /// What a reload does with `new` when syncd runs on `old`: the configuration it goes on with (every key
    /// that ``Key/Reload/applies`` taken from `new`, the others kept), and the keys that changed but need
    /// a restart.
    public static func reloaded(from old: DaemonConfiguration, to new: DaemonConfiguration) -> (applied: DaemonConfiguration, needsRestart: [String]) {
        var applied = old
        var needsRestart: [String] = []
        for key in allKeys where key.differs(old, new) {
            switch key.reload {
            case .applies: key.take(&applied, new)
            case .needsRestart: needsRestart.append(key.fullName)
            }
        }
        return (applied, needsRestart)
    }
}
