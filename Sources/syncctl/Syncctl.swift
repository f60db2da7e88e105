import ArgumentParser
import Foundation
import LogsyncDaemon

@main
struct Syncctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncctl",
        abstract: "Control a running syncd: sync now, see how far behind it is, watch it work.",
        discussion: """
            Exit codes: 0 success; 1 the sync failed; 3 syncd is not running; 4 the socket is not a syncd \
            control socket; 5 no answer in time; 6 the reload failed (syncd keeps its configuration); \
            78 bad configuration.
            """,
        subcommands: [Trigger.self, Status.self, Peers.self, History.self, Watch.self, Reload.self]
    )
}

enum ExitCodes {
    static let syncFailed: Int32 = 1
    static let notRunning: Int32 = 3
    static let notOurSocket: Int32 = 4
    static let timedOut: Int32 = 5
    static let reloadFailed: Int32 = 6
    static let badConfiguration: Int32 = 78
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
                FileHandle.standardError.write(Data("syncctl: configuration error: \(error)\n".utf8))
                throw ExitCode(ExitCodes.badConfiguration)
            }
        }
        do {
            return try ControlClient(path: path)
        } catch {
            throw fail(error)
        }
    }

    func fail(_ error: ControlClient.Failure) -> ExitCode {
        FileHandle.standardError.write(Data("syncctl: \(error)\n".utf8))
        switch error {
        case .notRunning: return ExitCode(ExitCodes.notRunning)
        case .notOurSocket: return ExitCode(ExitCodes.notOurSocket)
        case .timedOut: return ExitCode(ExitCodes.timedOut)
        }
    }

    func request(_ command: ControlRequest.Command, timeoutMilliseconds: Int? = nil, limit: Int? = nil, wait: TimeInterval = 10) throws -> ControlResponse {
        let client = try client()
        do {
            return try client.send(command, timeoutMilliseconds: timeoutMilliseconds, limit: limit, wait: wait)
        } catch {
            throw fail(error)
        }
    }

    func printJSON<T: Encodable>(_ value: T) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Written at once: `watch` output is read line by line while syncctl runs.
        if let data = try? encoder.encode(value) { FileHandle.standardOutput.write(data + Data("\n".utf8)) }
    }
}

struct Trigger: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync now: wait until a sync round that started after this request has completed, and print what moved.")

    @OptionGroup var connection: Connection
    @Option(help: "Give up after this many seconds (exit 5).") var timeout: Double = 30

    func run() throws {
        let response = try connection.request(.trigger, timeoutMilliseconds: Int(timeout * 1000), wait: timeout + 5)
        if connection.json {
            connection.printJSON(response)
        } else if let result = response.trigger {
            for name in result.published { print("published \(name)") }
            for name in result.applied { print("applied \(name)") }
            for (node, next) in result.waiting.sorted(by: { $0.key < $1.key }) { print("waiting for \(node) sequence \(next)") }
            for item in result.rejected { print("rejected \(item)") }
            for name in result.quarantined { print("quarantined \(name)") }
            let summary = result.summary
            print(summary.ok
                ? "sync completed in \(summary.finishedAt - summary.startedAt) ms: published \(summary.published), applied \(summary.appliedSegments) segments (\(summary.appliedTransactions) transactions)"
                : "sync failed: \(summary.error ?? "unknown error")")
        }
        guard response.ok else {
            if let error = response.error, !connection.json { FileHandle.standardError.write(Data("syncctl: \(error.message)\n".utf8)) }
            throw ExitCode(response.error?.code == .timeout ? ExitCodes.timedOut : ExitCodes.syncFailed)
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "State, account, node, last sync, pending exports, peers and their lag, quarantined segments, last error.")

    @OptionGroup var connection: Connection

    func run() throws {
        let response = try connection.request(.status)
        guard let status = response.status else { throw ExitCode(ExitCodes.notOurSocket) }
        if connection.json {
            connection.printJSON(status)
            return
        }
        print("state      \(status.state.rawValue)\(status.retryInMilliseconds.map { " (retry in \($0) ms)" } ?? "")")
        print("account    \(status.account)")
        print("node       \(status.node)")
        print("store      \(status.store)")
        print("shared     \(status.sharedFolder)")
        if let last = status.lastSync {
            let when = Date(timeIntervalSince1970: Double(last.finishedAt) / 1000)
            print("last sync  round \(last.round) at \(when) — \(last.ok ? "ok" : "failed: \(last.error ?? "?")"), published \(last.published), applied \(last.appliedSegments) segments (\(last.appliedTransactions) transactions)")
        } else {
            print("last sync  none yet")
        }
        print("pending    \(status.pendingTransactions) transactions not yet exported, \(status.pendingSegments) segments not yet published")
        print("peers      \(status.peers.isEmpty ? "none seen" : "")")
        for peer in status.peers {
            print("  \(peer.node)  applied \(peer.appliedSequence) of \(peer.availableSequence), lag \(peer.lag)\(peer.waitingFor.map { ", waiting for \($0)" } ?? "")")
        }
        if !status.quarantined.isEmpty {
            print("QUARANTINED \(status.quarantined.count) segments (same node and sequences, different content):")
            for item in status.quarantined { print("  \(item.node) \(item.firstSequence)-\(item.lastSequence): \(item.reason) (\(item.location))") }
        }
        for item in status.rejected { print("rejected   \(item)") }
        if let error = status.lastError { print("last error \(error)") }
    }
}

struct Peers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Other nodes seen in the shared folder, with what has been applied from each.")

    @OptionGroup var connection: Connection

    func run() throws {
        let peers = try connection.request(.peers).peers ?? []
        if connection.json { return connection.printJSON(peers) }
        for peer in peers {
            print("\(peer.node)  applied \(peer.appliedSequence) of \(peer.availableSequence), lag \(peer.lag)\(peer.waitingFor.map { ", waiting for \($0)" } ?? "")")
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Recent history transactions with author and origin.")

    @OptionGroup var connection: Connection
    @Option(help: "How many transactions.") var limit: Int = 20

    func run() throws {
        let entries = try connection.request(.history, limit: limit).history ?? []
        if connection.json { return connection.printJSON(entries) }
        for entry in entries {
            print("#\(entry.token) at \(entry.time ?? entry.timestamp) origin=\(entry.origin) author=\(entry.author ?? "-") context=\(entry.context ?? "-") changes=\(entry.changes)")
        }
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print events as syncd works (one line each; JSON with --json) until interrupted.")

    @OptionGroup var connection: Connection

    func run() throws {
        let client = try connection.client()
        do {
            _ = try client.send(.watch)
            while true {
                let response: ControlResponse
                do {
                    response = try client.nextResponse()
                } catch .timedOut {
                    continue
                }
                guard let event = response.event else { continue }
                if connection.json {
                    connection.printJSON(event)
                } else {
                    FileHandle.standardOutput.write(Data("\(Date(timeIntervalSince1970: Double(event.at) / 1000)) \(event.kind.rawValue) \(event.message)\n".utf8))
                }
            }
        } catch {
            throw connection.fail(error)
        }
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make syncd re-read its configuration file; returns when the reload is done.",
        discussion: "A file with errors changes nothing: syncd keeps running on its previous configuration, and this prints the file and line (exit 6).")

    @OptionGroup var connection: Connection

    func run() throws {
        let response = try connection.request(.reload, wait: 30)
        if connection.json { return connection.printJSON(response) }
        if let result = response.reload { print(result.message) }
        guard response.ok else { throw ExitCode(ExitCodes.reloadFailed) }
    }
}
