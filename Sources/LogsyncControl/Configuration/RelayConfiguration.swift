import Foundation

/// The `[relay]` table of syncd.toml: with `url` set, the daemon syncs through that relay instead of the
/// shared folder. The token is never written in syncd.toml: it is read from `token_file`, or from
/// systemd's credentials (`LoadCredential=relay-token:…` puts it in `$CREDENTIALS_DIRECTORY/relay-token`).
public struct RelayConnection: Sendable, Hashable {
    public var url: String
    public var tokenFile: String
    public var caFile: String?
    public var connectTimeoutMilliseconds = 5_000
    public var requestTimeoutMilliseconds = 30_000
    public var longPollSeconds = 25

    /// How the token is kept: in `token_file`, or the systemd credential `relay-token`.
    public static let token = SecretFile(what: "relay token", source: "the token from `sync-relay token issue`", credential: "relay-token")

    /// The token in `path`: one printable ASCII word, at most 4096 bytes.
    public static func readToken(_ path: String) throws(ConfigError) -> String { try token.read(path) }

    /// In `token_file`, stands for the account a store belongs to: a relay token is issued for one
    /// account, so a daemon that switches accounts keeps one token file per account.
    public static let accountPlaceholder = "{account}"

    /// The file holding the token for `account`'s logs.
    public func tokenFile(for account: String) -> String {
        tokenFile.replacingOccurrences(of: Self.accountPlaceholder, with: account)
    }

    /// The token for `account`'s logs, read from its file now.
    public func token(for account: String) throws(ConfigError) -> String { try Self.readToken(tokenFile(for: account)) }

    /// Whether each account has a token file of its own.
    public var hasTokenPerAccount: Bool { tokenFile.contains(Self.accountPlaceholder) }
}

extension DaemonConfiguration {
    /// The `[relay]` keys, documented in config/syncd.toml like the others.
    public static let relayKeys: [Key] = [
        .inTable("relay", "url", \.relay?.url, type: "string", default: "(none)", example: "\"https://relay.example.org\"",
                 "sync through this sync-relay (https://host:port) instead of the shared folder"),
        .inTable("relay", "token_file", \.relay?.tokenFile, type: "string", default: "$CREDENTIALS_DIRECTORY/relay-token", example: "\"token\"",
                 "the file holding this node's relay token (never the token itself in this file); {account} in it stands for the account, for a token per account"),
        .inTable("relay", "ca_file", \.relay?.caFile, type: "string", default: "(none)", example: "\"ca.pem\"",
                 "PEM certificate authorities to trust for the relay instead of the system's (a self-signed relay)"),
        .inTable("relay", "connect_timeout_ms", \.relay?.connectTimeoutMilliseconds, type: "integer", default: "5000", example: "1000",
                 "give up connecting after this long"),
        .inTable("relay", "request_timeout_ms", \.relay?.requestTimeoutMilliseconds, type: "integer", default: "30000", example: "1000",
                 "give up a request after this long"),
        .inTable("relay", "long_poll_s", \.relay?.longPollSeconds, type: "integer", default: "25", example: "5",
                 "each long-poll waits this long for other nodes' segments (the relay may shorten it)"),
    ]

    /// Reads the `[relay]` entries of `document` into ``relay``; nil when the table sets no `url`.
    static func relayConnection(
        from document: ConfigFile, resolve: (String) -> String, environment: [String: String]
    ) throws(ConfigError) -> RelayConnection? {
        let entries = document.entries.filter { $0.table == "relay" }
        guard !entries.isEmpty else { return nil }
        var url: String?
        var tokenFile: String?
        var connection = RelayConnection(url: "", tokenFile: "")
        for entry in entries {
            let file = document.path
            let value = TableValue(entry, file: file)
            switch entry.key {
            case "url": url = try value.httpURL()
            case "token_file": tokenFile = resolve(try value.string())
            case "ca_file":
                let path = resolve(try value.string())
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ConfigError(file: file, line: entry.line, "'relay.ca_file' \(path) does not exist")
                }
                connection.caFile = path
            case "connect_timeout_ms": connection.connectTimeoutMilliseconds = try value.positive()
            case "request_timeout_ms": connection.requestTimeoutMilliseconds = try value.positive()
            case "long_poll_s": connection.longPollSeconds = try value.positive()
            case "token":
                throw RelayConnection.token.refusal(key: "relay.token", fileKey: "relay.token_file", file: file, line: entry.line)
            default: throw value.unknown(known: relayKeys)
            }
        }
        guard let url else {
            throw ConfigError(file: document.path, line: entries[0].line, "the [relay] table needs 'url' (or remove the table to sync through the shared folder)")
        }
        connection.url = url
        connection.tokenFile = try RelayConnection.token.path(
            configured: tokenFile, key: "relay.token_file", file: document.path, line: entries[0].line, environment: environment)
        // A token per account is read when that account's store syncs (a missing one then waits in status).
        if !connection.hasTokenPerAccount { _ = try RelayConnection.readToken(connection.tokenFile) }
        return connection
    }
}

/// One entry of an optional table (`[relay]`, `[syncthing]`) read as the type its key wants, with an
/// error naming the key and its line otherwise.
struct TableValue {
    let entry: ConfigFile.Entry
    let file: String

    init(_ entry: ConfigFile.Entry, file: String) {
        self.entry = entry
        self.file = file
    }

    var name: String { "\(entry.table).\(entry.key)" }

    /// An error at this entry's line.
    func error(_ message: String) -> ConfigError { ConfigError(file: file, line: entry.line, message) }

    func string() throws(ConfigError) -> String {
        guard case .string(let value) = entry.value else {
            throw error("'\(name)' must be a string, found \(entry.value.typeName) (\(entry.value))")
        }
        guard !value.isEmpty else { throw error("'\(name)' must not be empty") }
        return value
    }

    func positive() throws(ConfigError) -> Int {
        guard case .integer(let value) = entry.value else {
            throw error("'\(name)' must be an integer, found \(entry.value.typeName) (\(entry.value))")
        }
        guard value > 0, value <= Int64(Int32.max) else { throw error("'\(name)' must be an integer between 1 and \(Int32.max), got \(value)") }
        return Int(value)
    }

    func boolean() throws(ConfigError) -> Bool {
        guard case .boolean(let value) = entry.value else {
            throw error("'\(name)' must be true or false, found \(entry.value.typeName) (\(entry.value))")
        }
        return value
    }

    /// An `http://` or `https://` address with no credentials or query.
    func httpURL() throws(ConfigError) -> String {
        let value = try string()
        guard value.hasPrefix("https://") || value.hasPrefix("http://"), !value.contains("?"), !value.contains("@") else {
            throw ConfigError(file: file, line: entry.line, "'\(name)' must be http(s)://host[:port] with no credentials or query")
        }
        return value
    }

    func unknown(known: [DaemonConfiguration.Key]) -> ConfigError {
        ConfigError(
            file: file, line: entry.line,
            "unknown key '\(name)' (known keys in [\(entry.table)]: \(known.map(\.name).joined(separator: ", ")))")
    }
}
