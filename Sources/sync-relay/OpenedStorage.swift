import Foundation
import Logging
import LogsyncPlatform
import LogsyncRelay
import LogsyncRelayProtocol
import LogsyncRelayPostgres

/// The storage a command opened, whichever backend `[storage] backend` chose.
struct OpenedStorage: Sendable {
    let storage: any MailboxStorage & CredentialStorage & RetentionStorage
    let identity: RelayIdentity
    let epochChange: String?
    /// Where it is, for messages: the SQLite file or the PostgreSQL database.
    let location: String
    let close: @Sendable () async -> Void
}

extension Location {
    /// Opens the configured backend. `serving` starts what a server needs (writers, the epoch check).
    func open(serving: Bool, logger: Logger) async throws -> OpenedStorage {
        let (settings, _) = try settings()
        switch settings.backend {
        case .sqlite:
            let storage = try storage(serving: serving)
            return OpenedStorage(
                storage: storage, identity: storage.identity, epochChange: storage.epochChange, location: storage.path, close: { storage.close() })
        case .postgres:
            do {
                let storage = try await PostgresRelayStorage.open(
                    settings: settings.postgres, serving: serving, maximumQueuedPushes: settings.maximumQueuedPushes, logger: logger)
                let postgres = settings.postgres
                return OpenedStorage(
                    storage: storage, identity: storage.identity, epochChange: storage.epochChange,
                    location: "PostgreSQL database \(postgres.database) at \(postgres.socketDirectory ?? postgres.host ?? ""):\(postgres.port)",
                    close: { await storage.close() })
            } catch {
                throw fail(error.message, status: ExitStatus.unavailable)
            }
        }
    }

    /// Runs an administration command's `body` on the configured storage, then closes it.
    func administer<T: Sendable>(_ body: @escaping @Sendable (any MailboxStorage & CredentialStorage & RetentionStorage) async throws -> T) throws -> T {
        let location = self
        return try runBlocking {
            var logger = Logger(label: "logsync.relay.admin")
            logger.logLevel = .error
            let opened = try await location.open(serving: false, logger: logger)
            do {
                let result = try await body(opened.storage)
                await opened.close()
                return result
            } catch {
                await opened.close()
                throw error
            }
        }
    }
}
