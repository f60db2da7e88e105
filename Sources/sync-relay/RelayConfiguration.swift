import Foundation
import LogsyncControl
import LogsyncRelay

/// `sync-relay.toml`: every key, its type, default and meaning (documented in config/sync-relay.toml).
enum RelayConfiguration {
    struct Key: Sendable {
        let table: String
        let name: String
        let meaning: String
        let apply: @Sendable (inout RelaySettings, ConfigValue, (String) -> String) -> String?
    }

    static func integer(_ keyPath: WritableKeyPath<RelaySettings, Int> & Sendable, min: Int64 = 1) -> @Sendable (inout RelaySettings, ConfigValue, (String) -> String) -> String? {
        { settings, value, _ in
            guard case .integer(let number) = value else { return "must be an integer, found \(value.typeName)" }
            guard number >= min, number <= Int64(Int32.max) * 64 else { return "must be between \(min) and \(Int64(Int32.max) * 64), got \(number)" }
            settings[keyPath: keyPath] = Int(number)
            return nil
        }
    }

    /// An integer `[postgres]` setting within `range`.
    static func postgresInteger(
        _ keyPath: WritableKeyPath<PostgresConnectionSettings, Int> & Sendable, _ range: ClosedRange<Int64>
    ) -> @Sendable (inout RelaySettings, ConfigValue, (String) -> String) -> String? {
        { settings, value, _ in
            guard case .integer(let number) = value, range.contains(number) else {
                return "must be an integer from \(range.lowerBound) to \(range.upperBound)"
            }
            settings.postgres[keyPath: keyPath] = Int(number)
            return nil
        }
    }

    static func path(_ keyPath: WritableKeyPath<RelaySettings, String?> & Sendable) -> @Sendable (inout RelaySettings, ConfigValue, (String) -> String) -> String? {
        { settings, value, resolve in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings[keyPath: keyPath] = resolve(text)
            return nil
        }
    }

    static let keys: [Key] = [
        Key(table: "server", name: "host", meaning: "address to listen on") { settings, value, _ in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.host = text
            return nil
        },
        Key(table: "server", name: "port", meaning: "TCP port (0: any free port, printed at start)") { settings, value, _ in
            guard case .integer(let number) = value, (0...65_535).contains(number) else { return "must be an integer from 0 to 65535" }
            settings.port = Int(number)
            return nil
        },
        Key(table: "server", name: "tls_certificate", meaning: "PEM certificate chain; with tls_key the relay serves HTTPS", apply: path(\.tlsCertificatePath)),
        Key(table: "server", name: "tls_key", meaning: "PEM private key of tls_certificate", apply: path(\.tlsKeyPath)),
        Key(table: "storage", name: "database", meaning: "the SQLite file holding accounts, token digests and segments") { settings, value, resolve in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.databasePath = resolve(text)
            return nil
        },
        Key(table: "storage", name: "backend", meaning: "sqlite (the embedded database file) or postgres (a PostgreSQL database shared by any number of relays, [postgres])") {
            settings, value, _ in
            guard case .string(let text) = value, let backend = RelayBackend(rawValue: text) else { return "must be \"sqlite\" or \"postgres\"" }
            settings.backend = backend
            return nil
        },
        Key(table: "postgres", name: "host", meaning: "the PostgreSQL server's host name or address (TCP)") { settings, value, _ in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.postgres.host = text
            return nil
        },
        Key(table: "postgres", name: "port", meaning: "the PostgreSQL server's port (also names its Unix socket)", apply: postgresInteger(\.port, 1...65_535)),
        Key(table: "postgres", name: "socket_directory", meaning: "the folder of the server's Unix socket; preferred over host when set") {
            settings, value, resolve in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.postgres.socketDirectory = resolve(text)
            return nil
        },
        Key(table: "postgres", name: "user", meaning: "the database role the relay logs in as") { settings, value, _ in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.postgres.user = text
            return nil
        },
        Key(table: "postgres", name: "database", meaning: "the database holding the relay's tables") { settings, value, _ in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.postgres.database = text
            return nil
        },
        Key(table: "postgres", name: "password_file", meaning: "a file (mode 600) whose first line is the role's password") { settings, value, resolve in
            guard case .string(let text) = value, !text.isEmpty else { return "must be a non-empty string" }
            settings.postgres.passwordFile = resolve(text)
            return nil
        },
        Key(table: "postgres", name: "password_credential", meaning: "the systemd credential (LoadCredential=) holding the password") { settings, value, _ in
            guard case .string(let text) = value, !text.isEmpty, !text.contains("/") else { return "must be a credential name (no '/')" }
            settings.postgres.passwordCredential = text
            return nil
        },
        Key(table: "postgres", name: "password", meaning: "refused: the password is never written here") { _, _, _ in
            "is refused: put the password in a file (postgres.password_file, mode 600) or a systemd credential (postgres.password_credential)"
        },
        Key(table: "postgres", name: "max_connections", meaning: "pooled connections per relay (its LISTEN session is one more)", apply: postgresInteger(\.maximumConnections, 1...1_000)),
        Key(table: "postgres", name: "operation_timeout_s", meaning: "a database answer later than this makes the request a 503", apply: postgresInteger(\.operationTimeoutSeconds, 1...600)),
        Key(table: "postgres", name: "push_writers", meaning: "push transactions one relay runs at once", apply: postgresInteger(\.pushWriters, 1...64)),
        Key(table: "postgres", name: "recheck_ms", meaning: "how often waiting long-polls are checked against the database (at most 5000)", apply: postgresInteger(\.recheckMilliseconds, 50...5_000)),
        Key(table: "storage", name: "default_quota_bytes", meaning: "bytes of segments, baselines and progress records an account may hold unless its own quota says otherwise") { settings, value, _ in
            guard case .integer(let number) = value, number > 0 else { return "must be a positive integer" }
            settings.defaultQuotaBytes = number
            return nil
        },
        Key(table: "storage", name: "max_queued_pushes", meaning: "pushes waiting for the disk at once; past it 503", apply: integer(\.maximumQueuedPushes)),
        Key(table: "limits", name: "max_segment_bytes", meaning: "largest segment accepted; larger: 413", apply: integer(\.maximumSegmentBytes)),
        Key(table: "limits", name: "max_baseline_bytes", meaning: "largest baseline accepted; larger: 413", apply: integer(\.maximumBaselineBytes)),
        Key(table: "limits", name: "request_timeout_s", meaning: "a request body must arrive within this; else 408", apply: integer(\.requestTimeoutSeconds)),
        Key(table: "limits", name: "idle_timeout_s", meaning: "idle connections are closed after this", apply: integer(\.idleTimeoutSeconds)),
        Key(table: "limits", name: "max_connections", meaning: "connections served at once; more are answered 503 with Retry-After", apply: integer(\.maximumConnections)),
        Key(table: "limits", name: "max_waiting_polls", meaning: "long-polls waiting at once; past it 503 + Retry-After", apply: integer(\.maximumWaitingPolls)),
        Key(table: "limits", name: "max_wait_s", meaning: "the longest a long-poll waits", apply: integer(\.maximumWaitSeconds)),
        Key(table: "limits", name: "max_pull_segments", meaning: "segments per pull answer", apply: integer(\.maximumPullSegments)),
        Key(table: "limits", name: "max_pull_bytes", meaning: "bytes per pull answer (past its first segment)", apply: integer(\.maximumPullBytes)),
        Key(table: "limits", name: "max_buffered_bytes", meaning: "upload bytes held in memory at once; past it 503 + Retry-After", apply: integer(\.maximumBufferedBytes)),
        Key(table: "log", name: "level", meaning: "trace, debug (a line per request), info, notice (a line per refusal), warning, error, critical") { settings, value, _ in
            guard case .string(let text) = value, DaemonConfiguration.logLevels.contains(text) else {
                return "must be one of \(DaemonConfiguration.logLevels.joined(separator: ", "))"
            }
            settings.logLevel = text
            return nil
        },
    ]

    /// Where the relay looks for its file when none is named.
    static func defaultFiles(environment: [String: String]) -> [String] {
        var files: [String] = []
        if let directory = environment["CONFIGURATION_DIRECTORY"]?.split(separator: ":").first { files.append("\(directory)/sync-relay.toml") }
        files.append("/etc/logsync/sync-relay.toml")
        return files
    }

    /// The settings from `file` (or the first default file that exists, or none), with the database under
    /// `$STATE_DIRECTORY` unless the file names one.
    static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> (RelaySettings, String) {
        var settings = RelaySettings()
        let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first.map(String.init) ?? FileManager.default.currentDirectoryPath
        settings.databasePath = state + "/relay.sqlite"
        guard let chosen = file ?? defaultFiles(environment: environment).first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            return (settings, "embedded defaults")
        }
        guard let data = FileManager.default.contents(atPath: chosen), data.count <= DaemonConfiguration.maximumFileBytes else {
            throw ConfigError(file: chosen, line: 0, "cannot read the configuration file (missing, unreadable or over \(DaemonConfiguration.maximumFileBytes) bytes)")
        }
        let document = try ConfigFile(path: chosen, text: String(decoding: data, as: UTF8.self))
        let directory = URL(fileURLWithPath: chosen).deletingLastPathComponent().path
        let resolve = { (path: String) in path.hasPrefix("/") ? path : directory + "/" + path }
        for entry in document.entries {
            guard let key = keys.first(where: { $0.table == entry.table && $0.name == entry.key }) else {
                let known = keys.filter { $0.table == entry.table }.map(\.name)
                throw ConfigError(
                    file: chosen, line: entry.line,
                    "unknown key '\(entry.table).\(entry.key)' (\(known.isEmpty ? "known tables: server, storage, postgres, limits, log" : "known keys in [\(entry.table)]: " + known.joined(separator: ", ")))")
            }
            if let problem = key.apply(&settings, entry.value, resolve) {
                throw ConfigError(file: chosen, line: entry.line, "'\(entry.table).\(entry.key)' \(problem)")
            }
        }
        guard (settings.tlsCertificatePath == nil) == (settings.tlsKeyPath == nil) else {
            throw ConfigError(file: chosen, line: 0, "set both server.tls_certificate and server.tls_key, or neither")
        }
        return (settings, chosen)
    }
}
