import Foundation
import LogsyncCore
import LogsyncPlatform

/// Everything `syncd` needs to run, from its configuration file or from the embedded defaults.
/// Every key is listed in ``DaemonConfiguration/keys`` and documented in `config/syncd.toml`.
public struct DaemonConfiguration: Sendable {
    public var storePath: String
    /// A JSON schema to register (create or migrate the store). Without it the store must exist and its
    /// registered schema is used; with neither, the embedded notes schema is used.
    public var schemaPath: String?
    public var account: String
    /// The folder all nodes share. Set here or in a file, it is no longer the default syncd creates.
    public var sharedFolder: String { didSet { ownsSharedFolder = false } }
    public var rescanIntervalMilliseconds: Int
    public var segmentChanges: Int
    public var batchChanges: Int
    public var batchMilliseconds: Int
    public var maximumBackoffMilliseconds: Int
    public var socketPath: String
    /// The least severe log entries written: one of ``logLevels``.
    public var logLevel: String
    /// Where the settings came from: a file path, or "embedded defaults".
    public var source: String
    /// The relay to sync through instead of the shared folder (`[relay]`, RelayConfiguration.swift).
    public var relay: RelayConnection? = nil
    /// `[retention]`: progress records, baselines and pruning (docs/retention.md).
    public var retentionEnabled = true
    public var silentNodeAfterSeconds = 30 * 86_400
    public var baselineAfterTransactions = 10_000
    public var progressIntervalMilliseconds = 60_000
    public var pruneIntervalMilliseconds = 600_000
    /// The Syncthing instance carrying the shared folder, asked to scan after each publish (`[syncthing]`,
    /// SyncthingConfiguration.swift).
    public var syncthing: SyncthingConnection? = nil
    /// Where syncd serves its metrics for Prometheus (`[metrics] listen`); nil: it does not.
    public var metricsListen: LoopbackListener.Address? = nil

    /// A documented configuration key with its type and default.
    public struct Key: Sendable {
        public let table: String
        public let name: String
        public let type: String
        public let defaultValue: String
        public let meaning: String
    }

    public static let keys: [Key] = [
        Key(table: "store", name: "path", type: "string", defaultValue: "<state>/store.sqlite",
            meaning: "the SQLite store this daemon syncs"),
        Key(table: "store", name: "schema", type: "string", defaultValue: "(none)",
            meaning: "a JSON schema to register; without it the store's registered schema is used (a new store gets the embedded notes schema)"),
        Key(table: "sync", name: "account", type: "string", defaultValue: "\"default\"",
            meaning: "whose logs to exchange; a folder of that name holds them under the shared folder (1 to 128 ASCII letters, digits, '-', '_', '.'; not starting with '.')"),
        Key(table: "sync", name: "shared_folder", type: "string", defaultValue: "<state>/shared",
            meaning: "the folder all nodes share (local, NFS, Syncthing); must exist when set"),
        Key(table: "sync", name: "rescan_interval_ms", type: "integer", defaultValue: "30000",
            meaning: "rescan the shared folder at least this often (inotify does not see other hosts' writes on NFS or synced folders)"),
        Key(table: "sync", name: "segment_changes", type: "integer", defaultValue: "2000",
            meaning: "at most this many changes per exported segment"),
        Key(table: "sync", name: "batch_changes", type: "integer", defaultValue: String(ImportBatching().maximumChanges),
            meaning: "imports apply at most this many changes per SQLite transaction (whole transactions only); a batch also ends as soon as a local writer announces itself"),
        Key(table: "sync", name: "batch_ms", type: "integer", defaultValue: String(ImportBatching().maximumMilliseconds),
            meaning: "imports commit at least this often, for writers that cannot announce themselves (the sqlite3 shell, other SQLite programs)"),
        Key(table: "sync", name: "max_backoff_ms", type: "integer", defaultValue: "60000",
            meaning: "after failures, retry with exponential backoff up to this delay"),
        Key(table: "retention", name: "enabled", type: "boolean", defaultValue: "true",
            meaning: "publish progress records, write baselines, prune this node's old segments and bootstrap from baselines (docs/retention.md); false keeps everything"),
        Key(table: "retention", name: "silent_node_after_s", type: "integer", defaultValue: "2592000",
            meaning: "a node whose progress record is older than this (30 days) stops holding pruning back; when it returns it catches up from a baseline"),
        Key(table: "retention", name: "baseline_after_transactions", type: "integer", defaultValue: "10000",
            meaning: "write a new baseline once the store includes this many transactions more than this node's newest baseline"),
        Key(table: "retention", name: "progress_interval_ms", type: "integer", defaultValue: "60000",
            meaning: "publish this node's progress record at least this often (and at most once a second when it changes)"),
        Key(table: "retention", name: "prune_interval_ms", type: "integer", defaultValue: "600000",
            meaning: "prune this node's segments, older baselines and purged history this often (syncctl prune does it now)"),
        Key(table: "control", name: "socket", type: "string", defaultValue: "<runtime>/syncd.sock",
            meaning: "the control socket syncctl talks to (owner-only, in a folder only syncd's user can write)"),
        Key(table: "metrics", name: "listen", type: "string", defaultValue: "(none)",
            meaning: "HOST:PORT on a loopback address (127.0.0.1:9469, [::1]:9469) where syncd serves GET /metrics in Prometheus's text format; unset, it serves none (a change needs a restart)"),
        Key(table: "log", name: "level", type: "string", defaultValue: "\"info\"",
            meaning: "the least severe entries logged: trace, debug, info, notice, warning, error or critical (syncd --log-level overrides it; a reload applies it)"),
    ]

    /// The names `[log] level` takes, least severe first (swift-log's levels).
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// Configuration files larger than this are refused rather than read.
    public static let maximumFileBytes = 32 << 20

    /// Resolves the configuration: `file` if given, else the first existing default file, else the
    /// embedded defaults. Relative paths in a file are relative to the file's folder.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> DaemonConfiguration {
        let paths = DaemonPaths(environment: environment)
        var configuration = DaemonConfiguration(
            storePath: paths.state + "/store.sqlite", schemaPath: nil, account: "default", sharedFolder: paths.state + "/shared",
            rescanIntervalMilliseconds: 30_000, segmentChanges: 2_000, batchChanges: ImportBatching().maximumChanges,
            batchMilliseconds: ImportBatching().maximumMilliseconds, maximumBackoffMilliseconds: 60_000,
            socketPath: paths.runtime + "/syncd.sock", logLevel: "info", source: "embedded defaults")
        let chosen = file ?? paths.defaultConfigFiles.first { FileManager.default.fileExists(atPath: $0) }
        guard let chosen else {
            try configuration.validateSocket(file: configuration.source, line: 0)
            return configuration
        }
        let data: [UInt8]
        switch try? Directory.readFile(atPath: chosen, maximumBytes: maximumFileBytes) {
        case .bytes(let bytes)?: data = bytes
        case .tooLarge(let size)?:
            throw ConfigError(file: chosen, line: 0, "the configuration file is \(size) bytes; at most \(maximumFileBytes) are read")
        case .notRegular(let kind)?:
            throw ConfigError(file: chosen, line: 0, "the configuration file is a \(kind), not a regular file")
        case nil:
            throw ConfigError(file: chosen, line: 0, "cannot read the configuration file (missing or not readable)")
        }
        let document = try ConfigFile(path: chosen, text: String(decoding: data, as: UTF8.self))
        let sharedFolderLine = try configuration.apply(document, directory: URL(fileURLWithPath: chosen).deletingLastPathComponent().path)
        let directory = URL(fileURLWithPath: chosen).deletingLastPathComponent().path
        func resolve(_ path: String) -> String { path.hasPrefix("/") ? path : directory + "/" + path }
        configuration.relay = try relayConnection(from: document, resolve: resolve, environment: environment)
        configuration.syncthing = try syncthingConnection(from: document, resolve: resolve, environment: environment)
        // Through a relay the shared folder is not used: a `shared_folder` left in the file is not checked.
        if configuration.relay == nil, let line = sharedFolderLine { try configuration.validateSharedFolder(file: chosen, line: line) }
        configuration.source = chosen
        return configuration
    }

    /// Applies the keys outside `[relay]` and `[syncthing]`; the line of `shared_folder`, if the file sets it.
    private mutating func apply(_ document: ConfigFile, directory: String) throws(ConfigError) -> Int? {
        func resolve(_ path: String) -> String { path.hasPrefix("/") ? path : directory + "/" + path }
        var sharedFolderLine: Int?
        var socketLine = 0
        for entry in document.entries where entry.table != "relay" && entry.table != "syncthing" {
            let file = document.path
            guard let key = Self.keys.first(where: { $0.table == entry.table && $0.name == entry.key }) else {
                let known = Self.keys.filter { $0.table == entry.table }.map(\.name)
                let hint = known.isEmpty
                    ? "known tables: \(Set((Self.keys + Self.relayKeys + Self.syncthingKeys).map(\.table)).sorted().joined(separator: ", "))"
                    : "known keys in [\(entry.table)]: \(known.joined(separator: ", "))"
                throw ConfigError(file: file, line: entry.line, "unknown key '\((entry.table.isEmpty ? entry.key : entry.table + "." + entry.key).excerpt())' (\(hint))")
            }
            func string() throws(ConfigError) -> String {
                guard case .string(let value) = entry.value else {
                    throw ConfigError(file: file, line: entry.line, "'\(entry.table).\(entry.key)' must be a string, found \(entry.value.typeName) (\(entry.value))")
                }
                guard !value.isEmpty else { throw ConfigError(file: file, line: entry.line, "'\(entry.table).\(entry.key)' must not be empty") }
                return value
            }
            func positive() throws(ConfigError) -> Int {
                guard case .integer(let value) = entry.value else {
                    throw ConfigError(file: file, line: entry.line, "'\(entry.table).\(entry.key)' must be an integer, found \(entry.value.typeName) (\(entry.value))")
                }
                guard value > 0, value <= Int64(Int32.max) else {
                    throw ConfigError(file: file, line: entry.line, "'\(entry.table).\(entry.key)' must be between 1 and \(Int32.max), got \(value)")
                }
                return Int(value)
            }
            switch (key.table, key.name) {
            case ("store", "path"): storePath = resolve(try string())
            case ("store", "schema"):
                let path = resolve(try string())
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ConfigError(file: file, line: entry.line, "schema file \(path.excerpt(200)) does not exist")
                }
                schemaPath = path
            case ("sync", "account"):
                let value = try string()
                if let problem = AccountName.problem(value) {
                    throw ConfigError(file: file, line: entry.line, "'sync.account' \(problem): \"\(value.excerpt())\"")
                }
                account = value
            case ("sync", "shared_folder"):
                sharedFolder = resolve(try string())
                sharedFolderLine = entry.line
            case ("sync", "rescan_interval_ms"): rescanIntervalMilliseconds = try positive()
            case ("sync", "segment_changes"): segmentChanges = try positive()
            case ("sync", "batch_changes"): batchChanges = try positive()
            case ("sync", "batch_ms"): batchMilliseconds = try positive()
            case ("sync", "max_backoff_ms"): maximumBackoffMilliseconds = try positive()
            case ("retention", "enabled"):
                guard case .boolean(let value) = entry.value else {
                    throw ConfigError(file: file, line: entry.line, "'retention.enabled' must be true or false, found \(entry.value.typeName) (\(entry.value))")
                }
                retentionEnabled = value
            case ("retention", "silent_node_after_s"): silentNodeAfterSeconds = try positive()
            case ("retention", "baseline_after_transactions"): baselineAfterTransactions = try positive()
            case ("retention", "progress_interval_ms"): progressIntervalMilliseconds = try positive()
            case ("retention", "prune_interval_ms"): pruneIntervalMilliseconds = try positive()
            case ("control", "socket"):
                socketPath = resolve(try string())
                socketLine = entry.line
            case ("metrics", "listen"):
                switch LoopbackListener.Address.parse(try string()) {
                case .success(let address): metricsListen = address
                case .failure(let problem): throw ConfigError(file: file, line: entry.line, "'metrics.listen': \(problem)")
                }
            case ("log", "level"):
                let value = try string()
                guard Self.logLevels.contains(value) else {
                    throw ConfigError(file: file, line: entry.line, "'log.level' must be one of \(Self.logLevels.joined(separator: ", ")), got \"\(value.excerpt())\"")
                }
                logLevel = value
            default: break
            }
        }
        try validateSocket(file: document.path, line: socketLine)
        return sharedFolderLine
    }

    private func validateSharedFolder(file: String, line: Int) throws(ConfigError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: sharedFolder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ConfigError(
                file: file, line: line, "shared folder \(sharedFolder.excerpt(200)) does not exist or is not a directory; create it (or mount it) first")
        }
    }

    private func validateSocket(file: String, line: Int) throws(ConfigError) {
        guard socketPath.utf8.count <= UnixSocket.maximumPathLength else {
            throw ConfigError(
                file: file, line: line,
                "control socket path \(socketPath.excerpt(200)) is \(socketPath.utf8.count) bytes; Unix sockets allow \(UnixSocket.maximumPathLength): choose a shorter path")
        }
    }

    /// Whether the shared folder is one the daemon may create: the default under its own state, which no
    /// file named (`[sync] shared_folder` unset, or no file at all) and no code set. A folder named must
    /// exist: it may be a mount that is not there yet.
    public private(set) var ownsSharedFolder = true
}

/// Where a daemon keeps its files: systemd's directory variables when set, else the XDG base
/// directories, else `/var/lib`, `/run` and `/etc` for root.
public struct DaemonPaths: Sendable {
    public var state: String
    public var runtime: String
    public var defaultConfigFiles: [String]

    public init(environment: [String: String]) {
        func first(_ name: String) -> String? {
            environment[name].flatMap { $0.split(separator: ":").first.map(String.init) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let root = getuid() == 0
        state =
            first("STATE_DIRECTORY")
            ?? first("XDG_STATE_HOME").map { $0 + "/logsync" }
            ?? (root ? "/var/lib/logsync" : home + "/.local/state/logsync")
        runtime =
            first("RUNTIME_DIRECTORY")
            ?? first("XDG_RUNTIME_DIR").map { $0 + "/logsync" }
            ?? (root ? "/run/logsync" : (first("TMPDIR") ?? "/tmp") + "/logsync-\(getuid())")
        var configs: [String] = []
        if let directory = first("CONFIGURATION_DIRECTORY") { configs.append(directory + "/syncd.toml") }
        if let directory = first("XDG_CONFIG_HOME") { configs.append(directory + "/logsync/syncd.toml") }
        configs.append(root ? "/etc/logsync/syncd.toml" : home + "/.config/logsync/syncd.toml")
        defaultConfigFiles = configs
    }
}
