import Foundation

/// The `[syncthing]` table of syncd.toml: when Syncthing carries the shared folder, syncd asks it (over
/// its REST API) to scan this node's folder right after each publish, instead of waiting for Syncthing's
/// own file watcher (`docs/carriers.md`). Optional and advisory: a failed request is reported in status
/// and never stops syncing, since the watcher still carries the file. The API key is never written in
/// syncd.toml: it is read from `api_key_file`, or from systemd's credentials
/// (`LoadCredential=syncthing-api-key:…`).
public struct SyncthingConnection: Sendable, Hashable {
    /// Syncthing's GUI/REST address, `http://127.0.0.1:8384`.
    public var url: String
    public var apiKeyFile: String
    /// The Syncthing folder that holds the shared folder; nil to find it by path.
    public var folderID: String?
    /// How long one request may take, connecting included.
    public var timeoutMilliseconds = 2_000

    /// How the API key is kept: in `api_key_file`, or the systemd credential `syncthing-api-key`.
    public static let apiKey = SecretFile(
        what: "Syncthing API key", source: "the key from Syncthing's settings (GUI → API Key, or <apikey> in its config.xml)",
        credential: "syncthing-api-key")
}

extension DaemonConfiguration {
    /// The `[syncthing]` keys, documented in config/syncd.toml like the others.
    public static let syncthingKeys: [Key] = [
        .inTable("syncthing", "url", \.syncthing?.url, type: "string", default: "(none)", example: "\"http://127.0.0.1:8385\"",
                 "Syncthing's REST address (its GUI address): after each publish syncd asks it to scan this node's folder"),
        .inTable("syncthing", "api_key_file", \.syncthing?.apiKeyFile, type: "string", default: "$CREDENTIALS_DIRECTORY/syncthing-api-key",
                 example: "\"syncthing.key\"", "the file holding Syncthing's API key (never the key itself in this file)"),
        .inTable("syncthing", "folder_id", \.syncthing?.folderID, type: "string", default: "(none)", example: "\"abcde-12345\"",
                 "the Syncthing folder that shares the shared folder; without it, the folder whose path holds the shared folder"),
        .inTable("syncthing", "timeout_ms", \.syncthing?.timeoutMilliseconds, type: "integer", default: "2000", example: "500",
                 "give up one request to Syncthing after this long (the sync loop never waits for it)"),
    ]

    /// Reads the `[syncthing]` entries of `document`; nil when there is no such table.
    static func syncthingConnection(
        from document: ConfigFile, resolve: (String) -> String, environment: [String: String]
    ) throws(ConfigError) -> SyncthingConnection? {
        let entries = document.entries.filter { $0.table == "syncthing" }
        guard !entries.isEmpty else { return nil }
        var url: String?
        var keyFile: String?
        var connection = SyncthingConnection(url: "", apiKeyFile: "")
        for entry in entries {
            let value = TableValue(entry, file: document.path)
            switch entry.key {
            case "url": url = try value.httpURL()
            case "api_key_file": keyFile = resolve(try value.string())
            case "folder_id": connection.folderID = try value.string()
            case "timeout_ms": connection.timeoutMilliseconds = try value.positive()
            case "api_key", "apikey":
                throw SyncthingConnection.apiKey.refusal(key: value.name, fileKey: "syncthing.api_key_file", file: document.path, line: entry.line)
            default: throw value.unknown(known: syncthingKeys)
            }
        }
        guard let url else {
            throw ConfigError(
                file: document.path, line: entries[0].line,
                "the [syncthing] table needs 'url', Syncthing's GUI address such as \"http://127.0.0.1:8384\" (or remove the table)")
        }
        if let relay = document.entries.first(where: { $0.table == "relay" }) {
            throw ConfigError(
                file: document.path, line: relay.line,
                "[syncthing] asks Syncthing to carry the shared folder, but with [relay] syncd syncs through the relay and not the shared folder: remove one of the two tables")
        }
        connection.url = url
        connection.apiKeyFile = try SyncthingConnection.apiKey.path(
            configured: keyFile, key: "syncthing.api_key_file", file: document.path, line: entries[0].line, environment: environment)
        _ = try SyncthingConnection.apiKey.read(connection.apiKeyFile)
        return connection
    }
}
