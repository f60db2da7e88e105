import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncSeal
import LogsyncSyncthing
import LogsyncSystemd
import LogsyncTransport

/// How the daemon reaches an account's logs: the one place that chooses the carrier for a store —
/// the shared folder (with Syncthing asked to scan after each publish, `[syncthing]`) or the relay
/// (`[relay]`). Tests hand the daemon another (an in-memory transport) to run its parts in one process.
struct Carriers: Sendable {
    /// The transport of `account`'s logs for the store of node `node`.
    let transport: @Sendable (_ configuration: DaemonConfiguration, _ account: String, _ node: NodeID) throws -> any Transport
    /// Asks Syncthing to scan this node's folder after each publish; nil without `[syncthing]`.
    let syncthing: SyncthingNudge?

    init(transport: @escaping @Sendable (DaemonConfiguration, String, NodeID) throws -> any Transport, syncthing: SyncthingNudge? = nil) {
        self.transport = transport
        self.syncthing = syncthing
    }

    /// The carriers `configuration` names: the shared folder or the relay, with the Syncthing nudge read
    /// now (its API key from its file).
    static func configured(_ configuration: DaemonConfiguration, logger: Logger) throws -> Carriers {
        let syncthing = try syncthingNudge(configuration, logger: logger)
        return Carriers(
            transport: { configuration, account, node in
                guard let connection = configuration.relay else {
                    var published: (@Sendable (String) -> Void)?
                    if let syncthing { published = { folder in syncthing.request(nodeFolder: folder) } }
                    let folder = try DirectoryTransport(root: configuration.sharedFolder, account: account, node: node, published: published)
                    return try sealed(folder, configuration, account: account, node: node)
                }
                let client: RelayClientSettings
                do {
                    client = try connection.clientSettings(account: account)
                } catch {
                    throw DaemonError(.setup, "cannot use the relay \(connection.url): \(error)")
                }
                return try sealed(RelayTransport(settings: client, node: node), configuration, account: account, node: node)
            },
            syncthing: syncthing)
    }

    /// `[seal]`: `carrier` wrapped so that everything it holds of `account` is sealed (docs/security.md),
    /// with this node's signing key and chain ledger beside the store (made on the first sealed start);
    /// `carrier` itself when the accounts are plain. A phrase that is missing or not one, or an account
    /// the carrier shows sealed under another key or not sealed at all, stops here, before anything is
    /// read or applied.
    static func sealed(_ carrier: any Transport, _ configuration: DaemonConfiguration, account: String, node: NodeID) throws -> any Transport {
        guard let seal = configuration.seal, seal.enabled else { return carrier }
        var key: AccountKey?
        if !seal.awaitApproval {
            let file = seal.keyFile(for: account)
            do {
                key = try AccountKey(recoveryPhrase: try SealSettings.key.read(file))
            } catch let error as SealError {
                throw DaemonError(.setup, "cannot seal account '\(account)': the recovery phrase in \(file) is not one: \(error)")
            } catch {
                throw DaemonError(.setup, "cannot seal account '\(account)': \(error)")
            }
        }
        let paths = SealSettings.statePaths(store: configuration.storePath, account: account, node: node.rawValue)
        let signingKey: NodeSigningKey
        do {
            try PrivateDirectory.prepare(URL(fileURLWithPath: paths.signingKey).deletingLastPathComponent().path)
            signingKey = try NodeSigningKey.loadOrCreate(at: paths.signingKey)
        } catch {
            throw DaemonError(.setup, "cannot keep this node's signing key for account '\(account)': \(error)")
        }
        // A device without the phrase waits for approval; the roster it kept holds its keys once approved.
        let transport =
            if let key {
                SealedTransport(
                    wrapping: carrier, keyring: SealKeyring(account: account, accountKey: key, signingKey: signingKey), node: node, ledgerPath: paths.ledger,
                    rosterPath: paths.roster, fromPlain: seal.fromPlain, rebaselineInterval: .milliseconds(configuration.pruneIntervalMilliseconds))
            } else {
                SealedTransport(
                    waitingForApprovalOf: account, wrapping: carrier, signingKey: signingKey, node: node, ledgerPath: paths.ledger, rosterPath: paths.roster)
            }
        do {
            try transport.checkAccount()
        } catch {
            throw DaemonError(.setup, "cannot sync account '\(account)' sealed: \(error.message); nothing was read, applied or deleted")
        }
        return transport
    }

    /// `[syncthing]`: after each publish to the shared folder, Syncthing is asked to scan this node's
    /// folder (`docs/carriers.md`). The requests run on the nudge's own thread; failures go to status and,
    /// once per cause, to the journal, and never stop syncing. Nil without `[syncthing]`.
    static func syncthingNudge(_ configuration: DaemonConfiguration, logger: Logger) throws -> SyncthingNudge? {
        guard let connection = configuration.syncthing, configuration.relay == nil else { return nil }
        let key: String
        do {
            key = try SyncthingConnection.apiKey.read(connection.apiKeyFile)
        } catch {
            throw DaemonError(.setup, "cannot ask Syncthing at \(connection.url) to scan: \(error)")
        }
        let client = SyncthingClient(url: connection.url, apiKey: key, timeoutMilliseconds: connection.timeoutMilliseconds)
        return SyncthingNudge(client: client, folderID: connection.folderID) { event in
            switch event {
            case .failed(let message):
                logger.warning(
                    "Syncthing did not take the request to scan this node's folder (syncing goes on; its watcher still carries the segments, later): \(message)",
                    metadata: ["message_id": "\(MessageID.syncthingFailed)"])
            case .recovered(let message):
                logger.notice("\(message)", metadata: ["message_id": "\(MessageID.syncthingRecovered)"])
            }
        }
    }
}
