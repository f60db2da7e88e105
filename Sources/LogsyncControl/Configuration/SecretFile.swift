import Foundation

/// A secret syncd needs (the relay's token, Syncthing's API key) is never written in syncd.toml: it is
/// read from the file a `*_file` key names, or from systemd's credentials (`LoadCredential=NAME:FILE`
/// puts it in `$CREDENTIALS_DIRECTORY/NAME`). One place finds and reads such files for every table.
public struct SecretFile: Sendable, Hashable {
    /// What the file holds, as messages name it ("relay token").
    public let what: String
    /// How the operator gets the secret ("the token from `sync-relay token issue`").
    public let source: String
    /// The systemd credential's name ("relay-token").
    public let credential: String

    public init(what: String, source: String, credential: String) {
        self.what = what
        self.source = source
        self.credential = credential
    }

    /// The largest secret file read.
    public static let maximumBytes = 4_096

    /// The file to read: `configured` (a `*_file` key, already resolved), else the credential in
    /// `$CREDENTIALS_DIRECTORY`; an error at `line` of `file` naming `key` when there is neither.
    public func path(configured: String?, key: String, file: String, line: Int, environment: [String: String]) throws(ConfigError) -> String {
        if let configured { return configured }
        if let credentials = environment["CREDENTIALS_DIRECTORY"], !credentials.isEmpty { return credentials + "/" + credential }
        throw ConfigError(
            file: file, line: line,
            "the \(what) is needed: set '\(key)' to a file holding it, or run under systemd with LoadCredential=\(credential):FILE")
    }

    /// The secret in `path`: one printable ASCII word, at most ``maximumBytes`` bytes.
    public func read(_ path: String) throws(ConfigError) -> String {
        guard let data = FileManager.default.contents(atPath: path), data.count <= Self.maximumBytes else {
            throw ConfigError(
                file: path, line: 0,
                "cannot read the \(what) file (missing, unreadable, or over \(Self.maximumBytes) bytes): put \(source) there, readable only by syncd")
        }
        let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty, secret.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError(file: path, line: 0, "the \(what) file must hold one \(what) (printable ASCII, no spaces)")
        }
        return secret
    }

    /// The error for a key that would put the secret itself in syncd.toml.
    public func refusal(key: String, fileKey: String, file: String, line: Int) -> ConfigError {
        ConfigError(
            file: file, line: line,
            "'\(key)': a \(what) is never written in syncd.toml: put it in a file only syncd can read and set '\(fileKey)', or give it with systemd's LoadCredential=\(credential):FILE")
    }
}
