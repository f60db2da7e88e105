import Logging
import LogsyncControl
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncSync
import LogsyncSyncthing
import LogsyncSystemd

/// `syncctl reload` and SIGHUP: the settings a running daemon can take without a restart, and the files
/// its keys name read again (`docs/operations.md`, "Reload").
extension SyncDaemon {
    /// Re-reads the configuration file. Settings that need a restart (store, schema, account, shared
    /// folder, socket, `[relay]`, `[syncthing]`) are reported and left as they are; a file with errors
    /// changes nothing. The relay token and the Syncthing API key are read again from their files and used
    /// from the next request (a rotated secret); a schema file changed in place is reported as needing a
    /// restart. One reload at a time: SIGHUP and `syncctl reload` may ask at once.
    public func reload() -> ReloadResult {
        reloading.withLock { _ in reloadAlone() }
    }

    private func reloadAlone() -> ReloadResult {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let old = configuration
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
        var (applied, needsRestart) = DaemonConfiguration.reloaded(from: old, to: new)
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
        state.withLock { $0.configuration = applied }
        // The loop's rounds and the control commands (prune, status) use the mounted engine: both get the
        // new settings.
        let engine = mounted.withLock { mounted -> SyncEngine? in
            let engine = mounted?.engine.map { $0.reconfigured(to: applied) }
            mounted?.engine = engine
            return engine
        }
        loop.reconfigure(engine: engine, maximumBackoffMilliseconds: applied.maximumBackoffMilliseconds)
        // Only a running watcher is replaced: after stopWatchers() (a switch letting go of its store) none is
        // started on the store being let go of.
        if new.rescanIntervalMilliseconds != old.rescanIntervalMilliseconds, state.withLock({ $0.arrivalsWatcher != nil }) {
            watchArrivals(rescanIntervalMilliseconds: new.rescanIntervalMilliseconds)
        }
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
        let relay = mounted.withLock { mounted -> (account: String, transport: RelayTransport)? in
            guard let account = mounted?.account, let transport = mounted?.transport as? RelayTransport else { return nil }
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
        return try Self.readSchema(path) != schema
    }
}
