import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncStore
import LogsyncSync
import LogsyncSystemd

/// Opening the stores the daemon syncs: the check before syncing, the schema they register, and the
/// waits for another program that holds a store's locks.
extension StoreMount {
    /// How long start-up may spend on SQLite's quick_check of the store (`docs/operations.md`).
    static let startCheckLimit = Duration.seconds(2)

    /// Opens `store` with its account's transport and engine (none for the local store).
    ///
    /// A store found behind its own node's history on the carrier (restored from an older backup) takes a
    /// new node id here and is opened again under it (``StoreRestored``, said in `restored`). A carrier
    /// that cannot be asked now leaves that to the first round.
    static func mount(_ store: AccountState.Store, schema: Schema, configuration: DaemonConfiguration, carriers: Carriers) throws -> Mounted {
        guard let account = store.account else { return Mounted(store: try openStore(at: store.path, schema: schema), account: nil, transport: nil, engine: nil) }
        func open() throws -> Mounted {
            let opened = try openStore(at: store.path, schema: schema)
            let transport = try carriers.transport(configuration, account, NodeID(opened.nodeID))
            return Mounted(
                store: opened, account: account, transport: transport,
                engine: SyncEngine(store: opened, transport: transport, configuration: configuration.syncConfiguration.for(account)))
        }
        var mounted = try open()
        do {
            // A relay is asked by the first round instead, after syncd is ready: its first pull is the
            // account's whole history. Tests take the round's path with a fault point.
            if !(mounted.transport?.carrierTransport is RelayTransport), !FaultInjection.isSelected("mount.carrier-unreachable") {
                try mounted.engine?.checkOwnHistory()
            }
        } catch let found as StoreRestored {
            mounted = try open()
            mounted.restored = found
        } catch {}
        return mounted
    }

    /// Opens a store for syncing (creating it only where `options` say so).
    static func openStore(at path: String, schema: Schema, options: StoreOptions = .syncing) throws -> Store {
        do {
            return try retryingWhileBusy { try Store(path: path, schema: schema, options: options) }
        } catch let error as StoreError where error.code == .schemaDrift {
            throw DaemonError(.schemaDrift, "syncd does not sync \(path): \(error.message)", cause: error)
        }
    }

    /// SQLite's quick_check of an existing store, bounded by ``startCheckLimit``: a store found damaged is
    /// refused (syncing it could export the damage to every node); a check cut short by the bound is
    /// logged, and `syncctl check` does the full one.
    static func checkStore(at path: String, logger: Logger) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let report: IntegrityReport
        do {
            report = try Store.checkIntegrity(at: path, full: false, timeLimit: startCheckLimit)
        } catch {
            throw DaemonError(.setup, "cannot check the store \(path) before syncing it", cause: error)
        }
        let milliseconds = report.elapsed.components.seconds * 1000 + report.elapsed.components.attoseconds / 1_000_000_000_000_000
        guard report.isIntact else {
            let shown = report.problems.prefix(5).joined(separator: "; ")
            let more = report.problems.count > 5 ? " (and \(report.problems.count - 5) more)" : ""
            logger.critical("the store \(path) is damaged: \(shown)\(more)", metadata: ["message_id": "\(MessageID.damaged)"])
            throw DaemonError(
                .damaged,
                "the store \(path) is damaged (SQLite's quick_check: \(shown)\(more)); syncd does not sync it, so that the damage cannot spread to other nodes. "
                    + "Restore it from a backup, or move it aside with its -wal and -shm files and start syncd again: a new store is rebuilt from what the shared folder holds (changes never exported are lost)")
        }
        if report.complete {
            logger.info("store check: quick_check found nothing wrong in \(milliseconds) ms")
        } else {
            logger.warning(
                "store check: quick_check did not finish within \(startCheckLimit) (nothing wrong up to there); syncing anyway. Run 'syncctl check' for a full check")
        }
    }

    /// The schema of every store: the configured one, else the one registered in an existing store,
    /// else the notes of the README's tour.
    /// (A switch keeps the schema in `kept` when it starts: after a crash in the middle, neither the old
    /// store nor the new one may be there to tell it.)
    static func resolveSchema(_ configuration: DaemonConfiguration, stores: [String], kept: String) throws -> Schema {
        if let path = configuration.schemaPath { return try readSchema(path) }
        for path in stores {
            if let registered = try retryingWhileBusy({ try Store.registeredSchema(at: path) }) { return registered }
        }
        if DurableFiles.exists(kept) { return try readSchema(kept) }
        return .notes
    }

    static func readSchema(_ path: String) throws -> Schema {
        guard case .bytes(let bytes)? = try? Directory.readFile(atPath: path, maximumBytes: 16 << 20) else {
            throw DaemonError(.setup, "cannot read schema file \(path) (missing, unreadable, not a regular file, or over 16 MiB)")
        }
        do {
            return try Schema(json: Data(bytes))
        } catch {
            throw DaemonError(.setup, "schema file \(path) does not hold a valid schema; fix it or point store.schema elsewhere", cause: error)
        }
    }

    /// Another program writing the store may hold its locks past one busy timeout at start-up: try
    /// again until a deadline.
    private static func retryingWhileBusy<T>(_ body: () throws -> T) throws -> T {
        try Poll.retrying(timeout: .seconds(15), every: .milliseconds(10), while: { ($0 as? StoreError)?.code == .busy }, body)
    }
}
