import Logging
import LogsyncControl
import LogsyncSyncthing
import LogsyncSystemd

/// `[syncthing]`: after each publish to the shared folder, Syncthing is asked to scan this node's folder
/// (`docs/carriers.md`). The requests run on the nudge's own thread; failures go to status and, once
/// per cause, to the journal, and never stop syncing.
extension SyncDaemon {
    /// The nudge `configuration` asks for, with the API key read now; nil without `[syncthing]`.
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
