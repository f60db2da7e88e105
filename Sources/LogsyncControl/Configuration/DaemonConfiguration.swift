import Foundation
import LogsyncCore
import LogsyncPlatform

/// Everything `syncd` needs to run, from its configuration file or from the embedded defaults.
/// Every key is described once, in ``DaemonConfiguration/keys`` (`DaemonKeys.swift`): its type, default,
/// meaning, reader and what a reload does with it; `config/syncd.toml` documents the same keys.
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
    public var retentionEnabled: Bool
    public var silentNodeAfterSeconds: Int
    public var baselineAfterTransactions: Int
    public var progressIntervalMilliseconds: Int
    public var pruneIntervalMilliseconds: Int
    /// The Syncthing instance carrying the shared folder, asked to scan after each publish (`[syncthing]`,
    /// SyncthingConfiguration.swift).
    public var syncthing: SyncthingConnection? = nil
    /// Sealed accounts (`[seal]`, SealConfiguration.swift); nil: the accounts are plain.
    public var seal: SealSettings? = nil
    /// Where syncd serves its metrics for Prometheus (`[metrics] listen`); nil: it does not.
    public var metricsListen: LoopbackListener.Address?

    /// The embedded defaults, with paths under `paths`: each key's default is written once, in its entry
    /// of ``keys`` (which `config/syncd.toml` documents, and a test checks).
    init(paths: DaemonPaths) {
        storePath = Self.storePathKey.initial(paths)
        schemaPath = Self.schemaKey.initial(paths)
        account = Self.accountKey.initial(paths)
        sharedFolder = Self.sharedFolderKey.initial(paths)
        rescanIntervalMilliseconds = Self.rescanIntervalKey.initial(paths)
        segmentChanges = Self.segmentChangesKey.initial(paths)
        batchChanges = Self.batchChangesKey.initial(paths)
        batchMilliseconds = Self.batchMillisecondsKey.initial(paths)
        maximumBackoffMilliseconds = Self.maximumBackoffKey.initial(paths)
        retentionEnabled = Self.retentionEnabledKey.initial(paths)
        silentNodeAfterSeconds = Self.silentNodeKey.initial(paths)
        baselineAfterTransactions = Self.baselineAfterKey.initial(paths)
        progressIntervalMilliseconds = Self.progressIntervalKey.initial(paths)
        pruneIntervalMilliseconds = Self.pruneIntervalKey.initial(paths)
        socketPath = Self.socketKey.initial(paths)
        metricsListen = Self.metricsListenKey.initial(paths)
        logLevel = Self.logLevelKey.initial(paths)
        source = "embedded defaults"
    }

    /// The names `[log] level` takes, least severe first (swift-log's levels).
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// Configuration files larger than this are refused rather than read.
    public static let maximumFileBytes = 32 << 20

    /// Resolves the configuration: `file` if given, else the first existing default file, else the
    /// embedded defaults. Relative paths in a file are relative to the file's folder.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> DaemonConfiguration {
        let paths = DaemonPaths(environment: environment)
        var configuration = DaemonConfiguration(paths: paths)
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
        configuration.seal = try sealSettings(from: document, resolve: resolve, environment: environment)
        // Through a relay the shared folder is not used: a `shared_folder` left in the file is not checked.
        if configuration.relay == nil, let line = sharedFolderLine { try configuration.validateSharedFolder(file: chosen, line: line) }
        configuration.source = chosen
        return configuration
    }

    /// Applies the keys outside `[relay]`, `[syncthing]` and `[seal]` (``keys``); the line of `shared_folder`, if the
    /// file sets it.
    private mutating func apply(_ document: ConfigFile, directory: String) throws(ConfigError) -> Int? {
        func resolve(_ path: String) -> String { path.hasPrefix("/") ? path : directory + "/" + path }
        var sharedFolderLine: Int?
        var socketLine = 0
        for entry in document.entries where entry.table != "relay" && entry.table != "syncthing" && entry.table != "seal" {
            guard let key = Self.keys.first(where: { $0.table == entry.table && $0.name == entry.key }), let read = key.read else {
                let known = Self.keys.filter { $0.table == entry.table }.map(\.name)
                let hint = known.isEmpty
                    ? "known tables: \(Set(Self.allKeys.map(\.table)).sorted().joined(separator: ", "))"
                    : "known keys in [\(entry.table)]: \(known.joined(separator: ", "))"
                throw ConfigError(
                    file: document.path, line: entry.line,
                    "unknown key '\((entry.table.isEmpty ? entry.key : entry.table + "." + entry.key).excerpt())' (\(hint))")
            }
            try read(&self, TableValue(entry, file: document.path), resolve)
            if key.fullName == "sync.shared_folder" { sharedFolderLine = entry.line }
            if key.fullName == "control.socket" { socketLine = entry.line }
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

    /// The folders as `config/syncd.toml` names them, for showing defaults.
    static let symbolic = DaemonPaths(state: "<state>", runtime: "<runtime>", defaultConfigFiles: [])

    init(state: String, runtime: String, defaultConfigFiles: [String]) {
        self.state = state
        self.runtime = runtime
        self.defaultConfigFiles = defaultConfigFiles
    }

    public init(environment: [String: String]) {
        func first(_ name: String) -> String? {
            environment[name].flatMap { $0.split(separator: ":").first.map(String.init) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let root = CurrentUser.isRoot
        state =
            first("STATE_DIRECTORY")
            ?? first("XDG_STATE_HOME").map { $0 + "/logsync" }
            ?? (root ? "/var/lib/logsync" : home + "/.local/state/logsync")
        runtime =
            first("RUNTIME_DIRECTORY")
            ?? first("XDG_RUNTIME_DIR").map { $0 + "/logsync" }
            ?? (root ? "/run/logsync" : (first("TMPDIR") ?? "/tmp") + "/logsync-\(CurrentUser.id)")
        var configs: [String] = []
        if let directory = first("CONFIGURATION_DIRECTORY") { configs.append(directory + "/syncd.toml") }
        if let directory = first("XDG_CONFIG_HOME") { configs.append(directory + "/logsync/syncd.toml") }
        configs.append(root ? "/etc/logsync/syncd.toml" : home + "/.config/logsync/syncd.toml")
        defaultConfigFiles = configs
    }
}
