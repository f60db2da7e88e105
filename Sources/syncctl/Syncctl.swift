import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncControl
import LogsyncPlatform
import LogsyncStatus

@main
struct Syncctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncctl",
        abstract: "Control a running syncd: sync now, see how far behind it is, watch it work.",
        discussion: """
            Exit statuses (docs/exit-codes.md): 0 success; 1 the sync failed; 64 bad command line; 65 the store is \
            damaged (check); 69 syncd is not running; 70 syncd answered with an error (busy, stopping, internal, \
            a watch that fell behind); 75 no answer in time; 76 the socket is not a syncd control socket (or \
            speaks another protocol version); 77 the socket's folder is not private; 78 bad configuration, or a \
            reload that failed (syncd keeps its configuration).
            """,
        version: LogsyncVersion.current,
        subcommands: [Trigger.self, Status.self, Peers.self, History.self, Watch.self, Reload.self, Check.self, Prune.self, Quarantine.self, Account.self, Devices.self]
    )
}

/// The exit status for an error syncd answered with.
func exitStatus(for failure: ControlFailure) -> Int32 {
    switch failure.code {
    case .syncFailed: return ExitStatus.failed
    case .timeout: return ExitStatus.temporaryFailure
    case .unsupportedVersion: return ExitStatus.protocolError
    case .reloadFailed: return ExitStatus.configuration
    case .damaged: return ExitStatus.dataError
    case .badRequest, .internalError, .shuttingDown, .tooManyClients, .slowConsumer: return ExitStatus.daemonError
    case .notFound: return ExitStatus.failed
    }
}

/// How to find the daemon: `--socket`, or the socket of the configuration syncd would use.
struct Connection: ParsableArguments {
    @Option(help: "The control socket (default: the one in the syncd configuration).") var socket: String?
    @Option(help: "The syncd configuration file, to find its socket.") var config: String?
    @Flag(help: "Print JSON instead of text.") var json = false

    func client() throws -> ControlClient {
        let path: String
        if let socket {
            path = socket
        } else {
            do {
                path = try DaemonConfiguration.load(file: config).socketPath
            } catch {
                throw Self.exit(ExitStatus.configuration, "configuration error: \(error)")
            }
            // A socket found by default may sit in a shared temporary folder: talk through it only when
            // nobody else could have put it there.
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            do {
                try PrivateDirectory.verifyForClient(folder)
            } catch {
                throw Self.exit(ExitStatus.notPermitted, "\(error.description)")
            }
        }
        do {
            return try ControlClient(path: path)
        } catch {
            throw fail(error)
        }
    }

    /// Prints `message` on stderr and returns the exit code to throw.
    static func exit(_ code: Int32, _ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("syncctl: \(message)\n".utf8))
        return ExitCode(code)
    }

    func fail(_ error: ControlClient.Failure) -> ExitCode {
        switch error {
        case .notRunning: return Self.exit(ExitStatus.unavailable, "\(error)")
        case .notOurSocket, .closed: return Self.exit(ExitStatus.protocolError, "\(error)")
        case .timedOut: return Self.exit(ExitStatus.temporaryFailure, "\(error)")
        }
    }

    /// Sends a request and returns the response; `ok: false` becomes the matching exit code with the
    /// daemon's message on stderr, unless `acceptingFailure` (the caller reports it itself).
    func request(
        _ command: ControlRequest.Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil, account: String? = nil, logout: String? = nil,
        segment: String? = nil, device: String? = nil, wait: Duration = .seconds(10), acceptingFailure: Bool = false
    ) throws -> ControlResponse {
        let client = try client()
        let response: ControlResponse
        do {
            response = try client.send(
                command, timeoutMilliseconds: timeoutMilliseconds, limit: limit, account: account, logout: logout, segment: segment, device: device,
                wait: wait)
        } catch {
            throw fail(error)
        }
        if !acceptingFailure { try check(response) }
        return response
    }

    /// For commands whose answer is worth showing even when it failed (`trigger`, `reload`, `check`):
    /// prints the whole response as JSON, or `text` of it, then throws the exit code if it failed.
    @discardableResult
    func show(
        _ command: ControlRequest.Command, timeoutMilliseconds: Int? = nil, account: String? = nil, logout: String? = nil,
        segment: String? = nil, wait: Duration, text: (ControlResponse) -> Void
    ) throws -> ControlResponse {
        let response = try request(
            command, timeoutMilliseconds: timeoutMilliseconds, account: account, logout: logout, segment: segment, wait: wait, acceptingFailure: true)
        if json { printJSON(response) } else { text(response) }
        try check(response)
        return response
    }

    /// Throws the exit code for a failed response.
    func check(_ response: ControlResponse) throws {
        guard !response.ok else { return }
        guard let failure = response.error else {
            throw Self.exit(ExitStatus.protocolError, "syncd answered 'not ok' without saying why")
        }
        throw Self.exit(exitStatus(for: failure), "\(failure.message) (\(failure.code.rawValue))")
    }

    /// The part of a response a command needs; a daemon that leaves it out does not speak this protocol.
    func required<T>(_ value: T?, _ field: String) throws -> T {
        guard let value else { throw Self.exit(ExitStatus.protocolError, "syncd's answer has no '\(field)'") }
        return value
    }

    func printJSON<T: Encodable>(_ value: T) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Written at once: `watch` output is read line by line while syncctl runs.
        if let data = try? encoder.encode(value) { FileHandle.standardOutput.write(data + Data("\n".utf8)) }
    }
}

/// The scans asked of Syncthing after publishes: where, how many, its last answer, and the last failure.
func describe(_ syncthing: SyncthingContact) -> [String] {
    let folder = syncthing.folderID.map { " folder \($0)\(syncthing.sub.map { $0.isEmpty ? "" : ", scanning \($0)" } ?? "")" } ?? ""
    let when = syncthing.lastAnswerAt.map { " at \(UTCTime.iso8601(milliseconds: $0))" } ?? ""
    var lines = [
        "syncthing  \(syncthing.url)\(folder) — \(syncthing.scans) scans for \(syncthing.requested) publishes, \(syncthing.failures) failed; "
            + "last answer: \(syncthing.lastAnswer ?? "none yet")\(when)"
    ]
    if let failure = syncthing.lastFailure, let at = syncthing.lastFailureAt {
        lines.append(
            syncthing.failing
                ? "  failing  \(failure) (syncing goes on: Syncthing's watcher carries the segments, later)"
                : "  last failure at \(UTCTime.iso8601(milliseconds: at)): \(failure)")
    }
    return lines
}

/// One line per peer: how far it is applied, and what it waits for and why.
func describe(_ peer: PeerStatus) -> String {
    var line = "\(peer.node)  applied \(peer.appliedSequence) of \(peer.availableSequence), lag \(peer.lag)"
    if let version = peer.schemaVersion { line += ", schema \(version)" }
    if let next = peer.waitingFor { line += ", waiting for \(next)\(peer.waitingReason.map { ": \($0)" } ?? "")" }
    return line
}

struct Trigger: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync now: wait until a sync round that started after this request has completed, and print what moved.")

    @OptionGroup var connection: Connection
    @Option(help: "Give up after this many seconds (exit 75).") var timeout: Double = 30

    func run() throws {
        try connection.show(.trigger, timeoutMilliseconds: Int(timeout * 1000), wait: .seconds(timeout + 2)) { response in
            guard let result = response.trigger else { return }
            for name in result.published { print("published \(name)") }
            for name in result.applied { print("applied \(name)") }
            for (node, next) in result.waiting.sorted(by: { $0.key < $1.key }) {
                print("waiting for \(node) sequence \(next)\(result.waitingReasons?[node].map { ": \($0)" } ?? "")")
            }
            for item in result.rejected { print("rejected \(item)") }
            for name in result.quarantined { print("quarantined \(name)") }
            let summary = result.summary
            print(summary.ok
                ? "sync completed in \(summary.finishedAt - summary.startedAt) ms: published \(summary.published), applied \(summary.appliedSegments) segments (\(summary.appliedTransactions) transactions)"
                : "sync failed: \(summary.error ?? "unknown error")")
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "State, account, node, last sync, pending exports, peers and their lag, what waits and why, ignored files, quarantined segments, last error.")

    @OptionGroup var connection: Connection

    func run() throws {
        let status = try connection.required(connection.request(.status).status, "status")
        if connection.json {
            connection.printJSON(status)
            return
        }
        let switching = status.accounts?.switching.map { "; switching accounts, step \($0.step)" } ?? ""
        print("state      \(status.state.rawValue)\(status.retryInMilliseconds.map { " (retry in \($0) ms)" } ?? "")\(switching)")
        print("account    \(status.account)")
        print("node       \(status.node)")
        print("store      \(status.store)")
        if let relay = status.relay {
            let when = relay.lastAnswerAt.map { " at \(UTCTime.iso8601(milliseconds: $0))" } ?? ""
            print("relay      \(relay.url) — last answer: \(relay.lastAnswer ?? "none yet")\(when)")
            if let refusal = relay.lastRefusal { print("refused    \(refusal)") }
            if let identity = relay.identity { print("relay id   \(identity) (database id/epoch)") }
            if let reset = relay.lastReset {
                print("reset      \(relay.lastResetAt.map { "\(UTCTime.iso8601(milliseconds: $0)): " } ?? "")\(reset)")
            }
        } else {
            print("shared     \(status.sharedFolder)")
        }
        if let syncthing = status.syncthing { describe(syncthing).forEach { print($0) } }
        if let last = status.lastSync {
            print("last sync  round \(last.round) at \(UTCTime.iso8601(milliseconds: last.finishedAt)) — \(last.ok ? "ok" : "failed: \(last.error ?? "?")"), published \(last.published), applied \(last.appliedSegments) segments (\(last.appliedTransactions) transactions)")
        } else {
            print("last sync  none yet")
        }
        print("pending    \(status.pendingTransactions) transactions not yet exported, \(status.pendingSegments) segments not yet published")
        if let retention = status.retention {
            let baseline = retention.newestBaseline.map { "newest baseline \($0)" } ?? "no baseline yet"
            print("retention  \(retention.retainedSegments) segments of this node kept, pruned through \(retention.prunedThrough); \(baseline)")
            for holder in retention.holdingBack {
                print("  held by \(holder.node) since \(UTCTime.iso8601(milliseconds: holder.activeAt)): \(holder.reason)")
            }
            for holder in retention.silent { print("  silent \(holder.node): \(holder.reason)") }
            if let problem = retention.lastProblem { print("  problem: \(problem)") }
        }
        if let schema = status.schema {
            var line = "schema     version \(schema.version)"
            if let newer = schema.newestPeerVersion { line += "; a peer writes with version \(newer): an update of the app is available" }
            if schema.keptTransactions > 0 { line += "; \(schema.keptTransactions) transactions kept in part until this app registers it" }
            print(line)
            for item in schema.undeclared { print("  not declared by this app's schema: \(item)") }
        }
        print(status.peers.isEmpty ? "peers      none seen" : "peers")
        for peer in status.peers { print("  \(describe(peer))") }
        if !status.quarantined.isEmpty {
            print("QUARANTINED \(status.quarantined.count) segments (same node and sequences, different content):")
            for item in status.quarantined { print("  \(item.node) \(item.firstSequence)-\(item.lastSequence): \(item.reason) (\(item.location))") }
        }
        let refused = status.refused ?? []
        if !refused.isEmpty {
            print("REFUSED    \(refused.count) segments, each holding its own node's stream ('syncctl quarantine list', docs/operations.md):")
            for item in refused { print("  \(item.segment): \(item.reason)") }
        }
        for item in status.rejected { print("rejected   \(item)") }
        if status.ignoredFiles > 0 {
            let listed = status.ignored ?? []
            print("ignored    \(status.ignoredFiles) files in the shared folder\(listed.count < status.ignoredFiles ? " (the first \(listed.count) below)" : ""):")
            for item in listed { print("  \(item.path): \(item.reason)") }
        }
        if let error = status.lastError { print("last error \(error)") }
        if let accounts = status.accounts { describe(accounts).forEach { print($0) } }
    }
}

struct Peers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Other nodes seen in the shared folder, with what has been applied from each, and what each waits for.")

    @OptionGroup var connection: Connection

    func run() throws {
        let peers = try connection.required(connection.request(.peers).peers, "peers")
        if connection.json { return connection.printJSON(peers) }
        for peer in peers { print(describe(peer)) }
    }
}

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A sealed account's devices: who is in, who waits for approval, who was revoked, and their keys (docs/security.md).",
        subcommands: [List.self, Approve.self, Revoke.self], defaultSubcommand: List.self)

    struct Approve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a waiting device in: the account's keys are wrapped to it.",
            discussion: "Compare the fingerprint with the one 'syncctl devices list' shows on the new device before you approve it.")

        @OptionGroup var connection: Connection
        @Argument(help: "The waiting device's fingerprint, as 'syncctl devices list' shows it.") var fingerprint: String

        func run() throws { try Devices.change(.devicesApprove, fingerprint, connection) }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a device out: a new key epoch it is not given, and what it signs from now on is refused.",
            discussion: "History sealed before stays readable to it; nothing written after the revocation is.")

        @OptionGroup var connection: Connection
        @Argument(help: "The member's node id or fingerprint.") var device: String

        func run() throws { try Devices.change(.devicesRevoke, device, connection) }
    }

    static func change(_ command: ControlRequest.Command, _ device: String, _ connection: Connection) throws {
        let report = try connection.required(connection.request(command, device: device, wait: .seconds(60)).devices, "devices")
        if connection.json { return connection.printJSON(report) }
        print(report.message ?? "done")
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The account key's fingerprint, this node's signing key's, and every other node's whose objects were opened here.")

        @OptionGroup var connection: Connection

        func run() throws {
            let report = try connection.required(connection.request(.devices).devices, "devices")
            if connection.json { return connection.printJSON(report) }
            guard report.sealed else {
                print("account \(report.account) is not sealed (docs/security.md: [seal] in syncd.toml)")
                return
            }
            print("account    \(report.account), sealed, account key \(report.accountKey ?? "not held yet")")
            if let this = report.this { print("this node  \(this.node)  key \(this.fingerprint)") }
            if report.awaitingApproval == true {
                print("waiting    for approval: on a device of the account, run 'syncctl devices approve \(report.this?.fingerprint ?? "?")'")
            }
            if report.revokedHere == true { print("revoked    a newer roster leaves this device out: it reads nothing written since") }
            print("epoch      \(report.epoch ?? 0), roster version \(report.rosterVersion ?? 0)")
            print(report.members.isEmpty ? "members    none known yet" : "members")
            for device in report.members { print("  \(device.node)  key \(device.fingerprint)") }
            if !report.waiting.isEmpty {
                print("waiting")
                for device in report.waiting { print("  \(device.node)  key \(device.fingerprint)  (syncctl devices approve \(device.fingerprint))") }
            }
            if !report.revoked.isEmpty {
                print("revoked")
                for device in report.revoked { print("  \(device.node)  key \(device.fingerprint)  taken through sequence \(device.verifiedThrough)") }
            }
            print(report.others.isEmpty ? "verified   none seen yet" : "verified")
            for device in report.others {
                print("  \(device.node)  key \(device.fingerprint)  verified through sequence \(device.verifiedThrough)")
            }
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Recent history transactions with author and origin.")

    @OptionGroup var connection: Connection
    @Option(help: "How many transactions.") var limit: Int = 20

    func run() throws {
        let entries = try connection.required(connection.request(.history, limit: limit).history, "history")
        if connection.json { return connection.printJSON(entries) }
        for entry in entries {
            print("#\(entry.token) at \(entry.time ?? entry.timestamp) origin=\(entry.origin) author=\(entry.author ?? "-") context=\(entry.context ?? "-") changes=\(entry.changes)")
        }
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print events as syncd works (one line each; JSON with --json) until interrupted or syncd stops.",
        discussion: "Exits 0 when syncd stops, 69 when the connection ends otherwise, 70 when syncd drops a watch that fell behind.")

    @OptionGroup var connection: Connection

    func run() throws {
        let client = try connection.client()
        try connection.check(try send(client))
        var stopping = false
        while let response = try next(client, afterStopping: stopping) {
            try connection.check(response)
            guard let event = response.event else { continue }
            if event.kind == .stopping { stopping = true }
            if connection.json {
                connection.printJSON(event)
            } else {
                FileHandle.standardOutput.write(Data("\(UTCTime.iso8601(milliseconds: event.at)) \(event.kind.rawValue) \(event.message)\n".utf8))
            }
        }
    }

    private func send(_ client: ControlClient) throws -> ControlResponse {
        do {
            return try client.send(.watch, accountEvents: true, refusalEvents: true, schemaEvents: true)
        } catch {
            throw connection.fail(error)
        }
    }

    /// The next line from syncd (waiting as long as it takes); nil when the connection ends after
    /// syncd said it is stopping.
    private func next(_ client: ControlClient, afterStopping stopping: Bool) throws -> ControlResponse? {
        while true {
            do {
                return try client.nextResponse()
            } catch {
                switch error {
                case .timedOut:
                    continue
                case .closed:
                    if stopping { return nil }
                    throw Connection.exit(ExitStatus.unavailable, "syncd closed the connection")
                default:
                    throw connection.fail(error)
                }
            }
        }
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make syncd re-read its configuration file; returns when the reload is done.",
        discussion: "A file with errors changes nothing: syncd keeps running on its previous configuration, and this prints the file and line (exit 78).")

    @OptionGroup var connection: Connection

    func run() throws {
        try connection.show(.reload, wait: .seconds(30)) { response in
            if let result = response.reload { print(result.message) }
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Have syncd run SQLite's full integrity_check on its store (syncing goes on meanwhile).",
        discussion: "Exit 0 when the store is intact; 65 when it is damaged (syncd then stops syncing it and says so in status); 75 when the check did not finish in time.")

    @OptionGroup var connection: Connection
    @Option(help: "Give up after this many seconds (exit 75).") var timeout: Double = 600

    func run() throws {
        let response = try connection.show(.check, timeoutMilliseconds: Int(timeout * 1000), wait: .seconds(timeout + 5)) { response in
            guard let result = response.check else { return }
            if result.intact {
                print("store intact: integrity_check found nothing wrong\(result.complete ? "" : " before its time ran out") (\(result.elapsedMilliseconds) ms)")
            } else {
                print("store DAMAGED: integrity_check reports (\(result.elapsedMilliseconds) ms):")
                for problem in result.problems { print("  \(problem)") }
            }
        }
        _ = try connection.required(response.check, "check")
    }
}

struct Prune: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete this node's segments that every active node has applied and every current baseline covers (docs/retention.md).",
        discussion: "With --dry-run, only say what would go, what holds the rest back, and why. Exit 0 on success.")

    @OptionGroup var connection: Connection
    @Flag(help: "Say what would be deleted and why; delete nothing.") var dryRun = false

    func run() throws {
        let response = try connection.show(dryRun ? .prunePlan : .prune, wait: .seconds(120)) { response in
            guard let retention = response.retention else { return }
            let verb = dryRun ? "would delete" : "deleted"
            print("\(verb) \(retention.wouldDelete.count) segments of this node (pruned through sequence \(retention.prunedThrough), prunable through \(retention.prunableThrough))")
            for name in retention.wouldDelete.prefix(20) { print("  \(name)") }
            if retention.wouldDelete.count > 20 { print("  … and \(retention.wouldDelete.count - 20) more") }
            for line in retention.explanation { print("why        \(line)") }
            for holder in retention.holdingBack {
                print("held by    \(holder.node): \(holder.reason) (active \(UTCTime.iso8601(milliseconds: holder.activeAt)))")
            }
            for holder in retention.silent { print("silent     \(holder.node): \(holder.reason)") }
            if let baseline = retention.newestBaseline { print("baseline   \(baseline)") }
            if let problem = retention.lastProblem { print("problem    \(problem)") }
        }
        _ = try connection.required(response.retention, "retention")
    }
}

struct Quarantine: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Segments this node refused or quarantined: list them, try one again, or give one up (docs/operations.md, \"Refused segments\").",
        subcommands: [List.self, Release.self, Drop.self], defaultSubcommand: List.self)

    /// Prints what is refused, divergent and dropped.
    static func describe(_ report: QuarantineReport) {
        if let message = report.message { print(message) }
        print(report.refused.isEmpty ? "refused    none" : "refused    \(report.refused.count) segments (each holds its own node's stream):")
        for item in report.refused {
            print("  \(item.segment) since \(UTCTime.iso8601(milliseconds: item.at)): \(item.reason) (\(item.location))")
        }
        if !report.divergent.isEmpty {
            print("divergent  \(report.divergent.count) segments (same node and sequences, different content; never applied):")
            for item in report.divergent { print("  \(item.node)/\(item.firstSequence)-\(item.lastSequence): \(item.reason) (\(item.location))") }
        }
        if !report.dropped.isEmpty {
            print("dropped    \(report.dropped.count) segments (given up by the operator; never applied here):")
            for item in report.dropped { print("  \(item.segment) at \(UTCTime.iso8601(milliseconds: item.at)): had been refused because \(item.reason)") }
        }
    }

    /// Sends a `quarantine_*` command and prints its answer (JSON with `--json`), failing as syncd did.
    static func send(_ command: ControlRequest.Command, segment: String?, through connection: Connection, wait: Duration) throws {
        let response = try connection.show(command, segment: segment, wait: wait) { response in response.quarantine.map(describe) }
        _ = try connection.required(response.quarantine, "quarantine")
    }

    /// Whether `text` is `NODE/FIRST-LAST` (optionally `.lseg`), the shape syncd takes.
    static func validate(_ text: String) throws {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        var range = parts.last.map(String.init) ?? ""
        if range.hasSuffix(".lseg") { range.removeLast(5) }
        let numbers = range.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, numbers.count == 2, numbers.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
        else { throw ValidationError("name the segment as NODE/FIRST-LAST, as 'syncctl quarantine list' shows it; got '\(text)'") }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Refused, divergent and dropped segments, with why.")

        @OptionGroup var connection: Connection

        func run() throws { try Quarantine.send(.quarantineList, segment: nil, through: connection, wait: .seconds(10)) }
    }

    struct Release: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a refusal (or a divergence record) and read the segment again: after its file was replaced or the app upgraded.",
            discussion: "Exit 0 when it was released; 1 when no such segment is recorded.")

        @OptionGroup var connection: Connection
        @Argument(help: "The segment, NODE/FIRST-LAST, as 'syncctl quarantine list' shows it.") var segment: String

        func validate() throws { try Quarantine.validate(segment) }

        func run() throws { try Quarantine.send(.quarantineRelease, segment: segment, through: connection, wait: .seconds(30)) }
    }

    struct Drop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give up on a refused segment: its transactions are never applied on this node, and its node's stream goes on after it.",
            discussion: "Recorded in the store and said in the journal. Only the segment its node's stream waits for can be dropped. Exit 0 when it was dropped; 1 when it could not be.")

        @OptionGroup var connection: Connection
        @Argument(help: "The segment, NODE/FIRST-LAST, as 'syncctl quarantine list' shows it.") var segment: String

        func validate() throws { try Quarantine.validate(segment) }

        func run() throws { try Quarantine.send(.quarantineDrop, segment: segment, through: connection, wait: .seconds(60)) }
    }
}
