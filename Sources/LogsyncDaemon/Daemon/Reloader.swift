import Logging
import LogsyncControl
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncSync
import LogsyncSyncthing
import LogsyncStore
import LogsyncSystemd
import LogsyncCore
import Synchronization

/// `syncctl reload` and SIGHUP: the settings a running daemon can take without a restart, and the files
/// its keys name read again (`docs/operations.md`, "Reload"). One reload at a time (its one lock): SIGHUP
/// and `syncctl reload` may ask at once.
final class Reloader: Sendable {
    private let running = Mutex(())
    let settings: SettingsInForce
    let mount: StoreMount
    let board: StatusBoard
    let accounts: AccountStores
    let schema: Schema
    let syncthing: SyncthingNudge?
    let notifier: SystemdNotifier
    let logLevel: LogLevelSetting
    let logger: Logger

    init(
        settings: SettingsInForce, mount: StoreMount, board: StatusBoard, accounts: AccountStores, schema: Schema, syncthing: SyncthingNudge?,
        notifier: SystemdNotifier, logLevel: LogLevelSetting, logger: Logger
    ) {
        self.settings = settings
        self.mount = mount
        self.board = board
        self.accounts = accounts
        self.schema = schema
        self.syncthing = syncthing
        self.notifier = notifier
        self.logLevel = logLevel
        self.logger = logger
    }

    /// Re-reads the configuration file. Settings that need a restart (store, schema, account, shared
    /// folder, socket, `[relay]`, `[syncthing]`, `[metrics]`) are reported and left as they are; a file with
    /// errors changes nothing. The relay token and the Syncthing API key are read again from their files
    /// and used from the next request (a rotated secret); a schema file changed in place is reported as
    /// needing a restart.
    func reload() -> ReloadResult {
        running.withLock { _ in reloadAlone() }
    }

    private func reloadAlone() -> ReloadResult {
        notifier.reloading()
        defer { notifier.ready(status: board.statusLine()) }
        let old = settings.current
        let file = old.source == "embedded defaults" ? nil : old.source
        let new: DaemonConfiguration
        let secrets: Secrets
        let schemaChanged: Bool
        do {
            new = try DaemonConfiguration.load(file: file)
            secrets = try readSecrets(old: old, new: new)
            schemaChanged = try schemaFileChanged(old: old, new: new)
        } catch {
            logger.error("reload failed, still running on the previous configuration: \(error)", metadata: ["message_id": "\(MessageID.reloadFailed)"])
            return ReloadResult(ok: false, message: "reload failed, still running on the previous configuration: \(error)", needsRestart: [])
        }
        // Every key a reload applies is taken from the file; every other one that changed needs a restart
        // (DaemonConfiguration.keys says which is which), except where it does not matter now:
        let reloaded = DaemonConfiguration.reloaded(from: old, to: new)
        let applied = reloaded.applied
        var needsRestart = reloaded.needsRestart
        needsRestart.removeAll { key in
            switch key {
            // once a switch has happened, the active account is the one syncctl account chose;
            case "sync.account": return DurableFiles.exists(accounts.stateFile)
            // through a relay before and after, the shared folder is not used.
            case "sync.shared_folder": return old.relay != nil && new.relay != nil
            default: return false
            }
        }
        if schemaChanged, !needsRestart.contains("store.schema") { needsRestart.append("store.schema") }
        logLevel.configure(Logger.Level(rawValue: new.logLevel) ?? .info)
        settings.replace(with: applied)
        // The loop's rounds and the control commands (prune, status) use the mounted engine: both get the
        // new settings, and the folder's watcher the new rescan interval.
        mount.reconfigure(rescanChanged: new.rescanIntervalMilliseconds != old.rescanIntervalMilliseconds)
        var message = "reloaded \(file ?? "embedded defaults")"
        for (name, secret) in [("relay token", secrets.relayToken), ("Syncthing API key", secrets.syncthingKey)] {
            guard let secret, secret.use() else { continue }
            message += "; \(name) read again from \(secret.file), used from the next request"
        }
        if !needsRestart.isEmpty { message += "; restart syncd to apply \(needsRestart.joined(separator: ", "))" }
        logger.notice("\(message)", metadata: ["message_id": "\(MessageID.reloaded)"])
        return ReloadResult(ok: true, message: message, needsRestart: needsRestart)
    }

    /// A secret read again from its file, and what starts using it.
    private struct Secret {
        var file: String
        /// Hands the secret over; whether it differs from the one in use.
        var use: () -> Bool
    }

    private struct Secrets {
        var relayToken: Secret?
        var syncthingKey: Secret?
    }

    /// The relay token and the Syncthing API key, read again when the keys that lead to them are unchanged
    /// (a change of those keys needs a restart, which reads them). An unreadable file fails the reload
    /// before anything changes.
    private func readSecrets(old: DaemonConfiguration, new: DaemonConfiguration) throws -> Secrets {
        var secrets = Secrets()
        // The mounted store's transport. A switch's next one is installed under the reload lock and reads
        // its token again then, so a token rotated while it was being made is not missed.
        let relay: (account: String, transport: RelayTransport)? = mount.current.flatMap { mounted in
            guard let account = mounted.account, let transport = mounted.transport?.carrierTransport as? RelayTransport else { return nil }
            return (account, transport)
        }
        if let connection = new.relay, connection == old.relay, let relay {
            let token = try connection.token(for: relay.account)
            secrets.relayToken = Secret(file: connection.tokenFile(for: relay.account)) { relay.transport.use(token: token) }
        }
        if let connection = new.syncthing, connection == old.syncthing, let client = syncthing?.client {
            let key = try SyncthingConnection.apiKey.read(connection.apiKeyFile)
            secrets.syncthingKey = Secret(file: connection.apiKeyFile) { client.use(apiKey: key) }
        }
        return secrets
    }

    /// Whether the schema file, at the same path, now holds another schema than the one in use. An
    /// unreadable or invalid file fails the reload: the next start would refuse it.
    private func schemaFileChanged(old: DaemonConfiguration, new: DaemonConfiguration) throws -> Bool {
        guard let path = new.schemaPath, path == old.schemaPath else { return false }
        return try StoreMount.readSchema(path) != schema
    }
}
