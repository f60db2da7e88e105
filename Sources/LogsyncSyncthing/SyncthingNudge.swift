import Foundation
import LogsyncCore
import LogsyncPlatform
import Synchronization
import LogsyncStatus

/// Asks Syncthing to scan this node's folder right after a publish, so that the segment travels at
/// once instead of after Syncthing's file watcher has waited (`fsWatcherDelayS`, 10 s by default).
///
/// It never holds up the sync loop: ``request(nodeFolder:)`` only notes the folder (a lock and a
/// ``Wakeup``) and returns. The requests are sent by a thread of its own, one at a time, each bounded by
/// the client's timeout; asks that come while a scan runs are coalesced into one scan after it, and at
/// most ``maximumPending`` distinct folders wait (more are dropped and counted). A failure is recorded
/// for status and reported once per cause; syncing goes on, and the watcher still carries the file.
package final class SyncthingNudge: Sendable {
    /// What the journal is told: the first failure of a kind, and the recovery after failures.
    package enum Event: Sendable {
        case failed(String)
        case recovered(String)
    }

    package static let maximumPending = 16

    package let client: SyncthingClient
    /// The Syncthing folder to scan; nil to find the one whose path holds the node folder.
    private let configuredFolder: String?
    private let report: @Sendable (Event) -> Void
    private let state: Mutex<State>
    private let wakeup = Wakeup()

    private struct State {
        var contact: SyncthingContact
        /// Node folders to scan, in the order asked, each once.
        var pending: [String] = []
        var stopped = false
        /// The Syncthing folder found for the node folders, until a request fails.
        var folder: SyncthingFolder?
        /// The failure last reported, so that each is reported once.
        var reported: String?
    }

    package init(client: SyncthingClient, folderID: String?, report: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.client = client
        configuredFolder = folderID
        self.report = report
        var contact = SyncthingContact(url: client.url)
        contact.folderID = folderID
        state = Mutex(State(contact: contact))
        let thread = Thread { [self] in run() }
        thread.name = "syncd.syncthing"
        thread.start()
    }

    /// What Syncthing answered so far.
    package var contact: SyncthingContact { state.withLock { $0.contact } }

    /// Asks for a scan of `nodeFolder` (an absolute path inside a Syncthing folder) soon. Never waits.
    package func request(nodeFolder: String) {
        state.withLock { state in
            state.contact.requested += 1
            if !state.pending.contains(nodeFolder), state.pending.count < Self.maximumPending { state.pending.append(nodeFolder) }
        }
        wakeup.signal()
    }

    /// Ends the thread after the request in progress (bounded by the client's timeout); returns at once.
    package func stop() {
        state.withLock { $0.stopped = true }
        wakeup.signal()
    }

    private func run() {
        while true {
            // Signals are kept while nobody waits, so the hour bounds an idle wait, not a request's.
            wakeup.wait(timeout: .seconds(3_600))
            while true {
                let (folders, stopped) = state.withLock { state in
                    defer { state.pending.removeAll() }
                    return (state.pending, state.stopped)
                }
                if stopped { return }
                if folders.isEmpty { break }
                for folder in folders { scan(folder) }
            }
        }
    }

    private func scan(_ nodeFolder: String) {
        let start = ContinuousClock.now
        let outcome: Result<(SyncthingFolder, String), SyncthingError>
        do {
            let folder = try folder(holding: nodeFolder)
            let sub = try Self.relative(nodeFolder, in: folder)
            try client.scan(folder: folder.id, sub: sub)
            outcome = .success((folder, sub))
        } catch {
            outcome = .failure(error)
        }
        let elapsed = ContinuousClock.now - start
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let event: Event? = state.withLock { state in
            state.contact.scans += 1
            state.contact.lastAnswerAt = now
            switch outcome {
            case .success(let (folder, sub)):
                state.contact.lastAnswer = "200 OK in \(milliseconds) ms"
                state.contact.folderID = folder.id
                state.contact.folderPath = folder.path
                state.contact.sub = sub
                defer { state.reported = nil }
                return state.reported.map { _ in .recovered("Syncthing at \(client.url) scans this node's folder again (folder \(folder.id), \(sub))") }
            case .failure(let error):
                state.contact.failures += 1
                state.contact.lastAnswer = error.message
                state.contact.lastFailure = error.message
                state.contact.lastFailureAt = now
                // Syncthing may have restarted with another configuration: look the folder up again.
                state.folder = nil
                guard state.reported != error.message else { return nil }
                state.reported = error.message
                return .failed(error.message)
            }
        }
        if let event { report(event) }
    }

    /// The Syncthing folder to scan: the configured one, else the one whose path holds `nodeFolder`
    /// (the deepest, if folders are nested); remembered until a request fails.
    private func folder(holding nodeFolder: String) throws(SyncthingError) -> SyncthingFolder {
        if let known = state.withLock({ $0.folder }) { return known }
        let folders = try client.folders()
        let listed = folders.map { "'\($0.id)' at \($0.path)" }.joined(separator: ", ")
        let found: SyncthingFolder
        if let configuredFolder {
            guard let folder = folders.first(where: { $0.id == configuredFolder }) else {
                throw SyncthingError(
                    .unexpected,
                    "Syncthing at \(client.url) has no folder '\(configuredFolder)' ([syncthing] folder_id); it has \(listed.isEmpty ? "none" : listed)")
            }
            found = folder
        } else {
            let target = Self.canonical(nodeFolder)
            let holding = folders.filter { Self.isInside(target, Self.canonical($0.path)) }
            guard let folder = holding.max(by: { Self.canonical($0.path).count < Self.canonical($1.path).count }) else {
                throw SyncthingError(
                    .unexpected,
                    "no folder of Syncthing at \(client.url) holds \(nodeFolder) (it has \(listed.isEmpty ? "none" : listed)): share the shared folder with Syncthing, or set [syncthing] folder_id")
            }
            found = folder
        }
        state.withLock { $0.folder = found }
        return found
    }

    /// `nodeFolder` relative to the Syncthing folder's root ("" for the root itself).
    package static func relative(_ nodeFolder: String, in folder: SyncthingFolder) throws(SyncthingError) -> String {
        let root = canonical(folder.path), target = canonical(nodeFolder)
        guard isInside(target, root) else {
            throw SyncthingError(
                .unexpected,
                "Syncthing folder '\(folder.id)' is at \(folder.path), which does not hold this node's folder \(nodeFolder): set [syncthing] folder_id to the folder that shares the shared folder")
        }
        return target == root ? "" : String(target.dropFirst(root == "/" ? 1 : root.count + 1))
    }

    /// Whether `path` is `root` or below it (both canonical).
    static func isInside(_ path: String, _ root: String) -> Bool {
        path == root || root == "/" || path.hasPrefix(root + "/")
    }

    /// An absolute path with links resolved and no trailing `/`, so that two spellings of one folder
    /// compare equal.
    static func canonical(_ path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        return resolved.count > 1 && resolved.hasSuffix("/") ? String(resolved.dropLast()) : resolved
    }
}
