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

    /// The token in `path`: one printable ASCII word, at most 4096 bytes.
    public static func readToken(_ path: String) throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 4_096 else {
            throw ConfigError(
                file: path, line: 0,
                "cannot read the relay token file (missing, unreadable, or over 4096 bytes): put the token from `sync-relay token issue` there, readable only by syncd")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError(file: path, line: 0, "the relay token file must hold one token (printable ASCII, no spaces)")
        }
        return token
    }
}

extension DaemonConfiguration {
    /// The `[relay]` keys, documented in config/syncd.toml like the others.
    public static let relayKeys: [Key] = [
        Key(table: "relay", name: "url", type: "string", defaultValue: "(none)",
            meaning: "sync through this sync-relay (https://host:port) instead of the shared folder"),
        Key(table: "relay", name: "token_file", type: "string", defaultValue: "$CREDENTIALS_DIRECTORY/relay-token",
            meaning: "the file holding this node's relay token (never the token itself in this file)"),
        Key(table: "relay", name: "ca_file", type: "string", defaultValue: "(none)",
            meaning: "PEM certificate authorities to trust for the relay instead of the system's (a self-signed relay)"),
        Key(table: "relay", name: "connect_timeout_ms", type: "integer", defaultValue: "5000", meaning: "give up connecting after this long"),
        Key(table: "relay", name: "request_timeout_ms", type: "integer", defaultValue: "30000", meaning: "give up a request after this long"),
        Key(table: "relay", name: "long_poll_s", type: "integer", defaultValue: "25",
            meaning: "each long-poll waits this long for other nodes' segments (the relay may shorten it)"),
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
            func string() throws(ConfigError) -> String {
                guard case .string(let value) = entry.value, !value.isEmpty else {
                    throw ConfigError(file: file, line: entry.line, "'relay.\(entry.key)' must be a non-empty string")
                }
                return value
            }
            func positive() throws(ConfigError) -> Int {
                guard case .integer(let value) = entry.value, value > 0, value <= Int64(Int32.max) else {
                    throw ConfigError(file: file, line: entry.line, "'relay.\(entry.key)' must be an integer between 1 and \(Int32.max)")
                }
                return Int(value)
            }
            switch entry.key {
            case "url":
                let value = try string()
                guard value.hasPrefix("https://") || value.hasPrefix("http://"), !value.contains("?"), !value.contains("@") else {
                    throw ConfigError(file: file, line: entry.line, "'relay.url' must be http(s)://host[:port] with no credentials or query")
                }
                url = value
            case "token_file": tokenFile = resolve(try string())
            case "ca_file":
                let path = resolve(try string())
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ConfigError(file: file, line: entry.line, "'relay.ca_file' \(path) does not exist")
                }
                connection.caFile = path
            case "connect_timeout_ms": connection.connectTimeoutMilliseconds = try positive()
            case "request_timeout_ms": connection.requestTimeoutMilliseconds = try positive()
            case "long_poll_s": connection.longPollSeconds = try positive()
            case "token":
                throw ConfigError(
                    file: file, line: entry.line,
                    "a token is never written in syncd.toml: put it in a file only syncd can read and set 'relay.token_file', or give it with systemd's LoadCredential=relay-token:FILE")
            default:
                throw ConfigError(
                    file: file, line: entry.line,
                    "unknown key 'relay.\(entry.key)' (known keys in [relay]: \(relayKeys.map(\.name).joined(separator: ", ")))")
            }
        }
        guard let url else {
            throw ConfigError(file: document.path, line: entries[0].line, "the [relay] table needs 'url' (or remove the table to sync through the shared folder)")
        }
        connection.url = url
        if let tokenFile {
            connection.tokenFile = tokenFile
        } else if let credentials = environment["CREDENTIALS_DIRECTORY"], !credentials.isEmpty {
            connection.tokenFile = credentials + "/relay-token"
        } else {
            throw ConfigError(
                file: document.path, line: entries[0].line,
                "the relay needs a token: set 'relay.token_file', or run under systemd with LoadCredential=relay-token:FILE")
        }
        _ = try RelayConnection.readToken(connection.tokenFile)
        return connection
    }
}
