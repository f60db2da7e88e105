import Foundation

/// The `[seal]` table of syncd.toml: with `enabled = true`, the accounts this daemon syncs are sealed
/// (`docs/security.md`): everything it puts in the shared folder or on the relay is encrypted under the
/// account's key and signed by this node, and everything it reads must be. The account key is never
/// written in syncd.toml: its recovery phrase is read from `key_file`, or from systemd's credentials
/// (`LoadCredential=logsync-account-key:…`).
public struct SealSettings: Sendable, Hashable {
    /// Whether the accounts are sealed (`enabled`).
    public var enabled: Bool
    /// The file holding the account's recovery phrase; `{account}` in it stands for the account. Empty
    /// when not enabled and not set.
    public var keyFile: String
    /// `await_approval`: this device holds no recovery phrase; it publishes its card and waits until a
    /// member approves it (`syncctl devices approve`). `key_file` is not read.
    public var awaitApproval: Bool = false
    /// `from_plain`: the account held plain history and is being sealed in place; that history is read
    /// until every node is sealed (docs/security.md, "Sealing a plain account").
    public var fromPlain: Bool = false

    /// How the recovery phrase is kept: in `key_file`, or the systemd credential `logsync-account-key`.
    public static let key = SecretFile(
        what: "account recovery phrase", source: "the recovery phrase `logsync seal new` printed, or another device's",
        credential: "logsync-account-key")

    /// The file holding the recovery phrase of `account`'s key.
    public func keyFile(for account: String) -> String {
        keyFile.replacingOccurrences(of: RelayConnection.accountPlaceholder, with: account)
    }

    /// Where a store's seal state is kept: this node's signing key, its chain ledger and the roster it
    /// holds, beside the store, one set per account and node.
    public static func statePaths(store: String, account: String, node: String) -> (signingKey: String, ledger: String, roster: String) {
        let folder = store + ".seal"
        return (folder + "/\(account)-\(node).key", folder + "/\(account)-\(node).chain", folder + "/\(account)-\(node).roster")
    }
}

extension DaemonConfiguration {
    /// The `[seal]` keys, documented in config/syncd.toml like the others.
    public static let sealKeys: [Key] = [
        .inTable("seal", "enabled", \.sealEnabled, type: "boolean", default: "false", example: "true",
                 "seal this daemon's accounts: encrypt and sign everything the carrier holds (docs/security.md)"),
        .inTable("seal", "key_file", \.seal?.keyFile, type: "string", default: "$CREDENTIALS_DIRECTORY/logsync-account-key", example: "\"account.key\"",
                 "the file holding the account's recovery phrase (never the phrase itself in this file); {account} in it stands for the account"),
        .inTable("seal", "await_approval", \.sealAwaitsApproval, type: "boolean", default: "false", example: "true",
                 "hold no recovery phrase: publish this device's card and wait until a member approves it with syncctl devices approve (key_file is not read)"),
        .inTable("seal", "from_plain", \.sealFromPlain, type: "boolean", default: "false", example: "true",
                 "the account held plain history: seal it in place, reading the plain history it had until every node is sealed (docs/security.md, Sealing a plain account)"),
    ]

    /// Whether `[seal]` is on.
    public var sealEnabled: Bool { seal?.enabled ?? false }

    /// Whether `[seal] await_approval` is on.
    public var sealAwaitsApproval: Bool { seal?.awaitApproval ?? false }

    /// Whether `[seal] from_plain` is on.
    public var sealFromPlain: Bool { seal?.fromPlain ?? false }

    /// Reads the `[seal]` entries of `document`; nil when there is no such table.
    static func sealSettings(from document: ConfigFile, resolve: (String) -> String, environment: [String: String]) throws(ConfigError) -> SealSettings? {
        let entries = document.entries.filter { $0.table == "seal" }
        guard !entries.isEmpty else { return nil }
        var enabled = false
        var keyFile: String?
        var awaitApproval = false
        var fromPlain = false
        for entry in entries {
            let value = TableValue(entry, file: document.path)
            switch entry.key {
            case "enabled": enabled = try value.boolean()
            case "await_approval": awaitApproval = try value.boolean()
            case "from_plain": fromPlain = try value.boolean()
            case "key_file": keyFile = resolve(try value.string())
            case "key", "recovery_phrase", "phrase":
                throw SealSettings.key.refusal(key: value.name, fileKey: "seal.key_file", file: document.path, line: entry.line)
            default: throw value.unknown(known: sealKeys)
            }
        }
        guard enabled else { return SealSettings(enabled: false, keyFile: keyFile ?? "", awaitApproval: awaitApproval, fromPlain: fromPlain) }
        if awaitApproval {
            if fromPlain {
                throw ConfigError(
                    file: document.path, line: entries[0].line,
                    "[seal] await_approval and from_plain exclude each other: a device that seals an account's plain history holds the recovery phrase (key_file); one that waits for approval joins it once sealed")
            }
            if keyFile != nil {
                throw ConfigError(
                    file: document.path, line: entries[0].line,
                    "[seal] await_approval and key_file exclude each other: a device holds the recovery phrase, or waits to be approved by one that does")
            }
            return SealSettings(enabled: true, keyFile: "", awaitApproval: true)
        }
        let path = try SealSettings.key.path(configured: keyFile, key: "seal.key_file", file: document.path, line: entries[0].line, environment: environment)
        return SealSettings(enabled: true, keyFile: path, fromPlain: fromPlain)
    }
}
