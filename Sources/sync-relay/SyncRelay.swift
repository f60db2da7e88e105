import ArgumentParser
import Foundation
import Logging
import LogsyncCore
import LogsyncControl
import LogsyncPlatform
import LogsyncRelay
import LogsyncRelayPostgres
import LogsyncSystemd
import Synchronization

/// `sync-relay`: the HTTP relay nodes push their segments to and pull each other's from, and the
/// commands that manage its accounts and tokens.
@main
struct SyncRelay: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-relay",
        abstract: "Relay logsync segments between nodes over HTTP(S); manage its accounts and tokens.",
        discussion: """
            Without --config, the configuration is $CONFIGURATION_DIRECTORY/sync-relay.toml or \
            /etc/logsync/sync-relay.toml when one exists, else embedded defaults (the database in \
            $STATE_DIRECTORY, else the current folder). Exit statuses: 0 stopped, 1 a command failed, \
            64 bad command line, 69 the database cannot be opened, 71 cannot listen on the address (in use, not \
            permitted), 78 bad configuration (docs/exit-codes.md).
            """,
        version: LogsyncVersion.current,
        subcommands: [Serve.self, Account.self, Token.self, Migrate.self],
        defaultSubcommand: Serve.self)

    /// A synchronous main, so that `serve` can block the signals it handles on the main thread before any
    /// other thread starts (an async main runs its body on a pool thread, and the main thread would take
    /// a SIGTERM that comes while the relay starts, and die of it); it then runs `serve` on the pool.
    static func main() {
        var command: ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        guard let serve = command as? Serve else {
            do { try command.run() } catch { exit(withError: error) }
            return
        }
        HandledSignals.block([SIGTERM, SIGINT, SIGHUP])
        let outcome = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do { try await serve.run() } catch { outcome.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        if let error = outcome.withLock({ $0 }) { exit(withError: error) }
    }
}

struct Location: ParsableArguments {
    @Option(help: "The configuration file (config/sync-relay.toml lists every key).")
    var config: String?

    @Option(help: "The relay's SQLite database, overriding [storage] database (and [storage] backend).")
    var database: String?

    func settings() throws -> (RelaySettings, String) {
        do {
            var (settings, source) = try RelayConfiguration.load(file: config)
            if let database {
                settings.databasePath = database
                settings.backend = .sqlite
            }
            return (settings, source)
        } catch {
            throw fail("configuration error: \(error)", status: ExitStatus.configuration)
        }
    }

    func storage(serving: Bool = false) throws -> SQLiteRelayStorage {
        let (settings, _) = try settings()
        do {
            return try SQLiteRelayStorage(path: settings.databasePath, serving: serving, maximumQueuedPushes: settings.maximumQueuedPushes)
        } catch {
            throw fail(error.message, status: ExitStatus.unavailable)
        }
    }
}

/// Prints `message` on stderr and returns the exit status to throw.
func fail(_ message: String, status: Int32) -> ExitCode {
    FileHandle.standardError.write(Data("sync-relay: \(message)\n".utf8))
    return ExitCode(status)
}

func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the relay (the default command). SIGTERM stops it, SIGHUP reloads the TLS certificate and key.")

    @OptionGroup var location: Location

    @Option(help: "Listen on this address, overriding [server] host.")
    var host: String?

    @Option(help: "Listen on this port (0: any free one), overriding [server] port.")
    var port: Int?

    @Option(help: "Log entries at least this severe (debug: a line per request), overriding [log] level.")
    var logLevel: Logger.Level?

    func run() async throws {
        FaultInjection.delay("relay.starting", milliseconds: 1_500)
        var (settings, source) = try location.settings()
        if let host { settings.host = host }
        if let port { settings.port = port }
        let level = LogLevelSetting(logLevel ?? Logger.Level(rawValue: settings.logLevel) ?? .info, pinned: logLevel != nil)
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label, identifier: "sync-relay", level: level) }
        let logger = Logger(label: "logsync.relay")

        let opened = try await location.open(serving: true, logger: logger)
        let storage = opened.storage
        if let change = opened.epochChange {
            logger.notice("relay \(opened.identity.id): \(change)", metadata: ["MESSAGE_ID": "\(MessageID.relayEpochChanged)"])
        }
        var tls: TLSCredentials?
        if let certificate = settings.tlsCertificatePath, let key = settings.tlsKeyPath {
            do {
                tls = try TLSCredentials(certificatePath: certificate, keyPath: key)
            } catch {
                throw fail(error.message, status: ExitStatus.configuration)
            }
        }
        HandledSignals.ignore(SIGHUP)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "sync-relay.reload"))
        hangup.setEventHandler { [tls] in
            guard let tls else {
                logger.notice("SIGHUP: no TLS certificate to reload (the relay serves plain HTTP)")
                return
            }
            do {
                try tls.reload()
                logger.notice("reloaded the TLS certificate \(tls.certificatePath) and key \(tls.keyPath)", metadata: ["MESSAGE_ID": "\(MessageID.reloaded)"])
            } catch {
                logger.error("\(error); still serving the previous certificate", metadata: ["MESSAGE_ID": "\(MessageID.reloadFailed)"])
            }
        }
        hangup.resume()

        let notifier = SystemdNotifier()
        let watchdog = Task {
            guard let interval = notifier.watchdogInterval else { return }
            while !Task.isCancelled {
                if await storage.isReady() { notifier.watchdog() }
                try? await Task.sleep(for: interval / 2)
            }
        }
        // Hummingbird's own lines (lifecycle, connections) only from warning up, unless tracing.
        let frameworkLevel = LogLevelSetting(level.level == .trace ? .trace : .warning, pinned: true)
        let frameworkLogger = Logger(label: "logsync.relay.http") { label in
            JournalLogHandler(label: label, identifier: "sync-relay", level: frameworkLevel)
        }
        let server = RelayServer(settings: settings, storage: storage, tls: tls, logger: logger, frameworkLogger: frameworkLogger)
        let (host, database, origin, identity) = (settings.host, opened.location, source, opened.identity)
        let scheme = tls == nil ? "http" : "https"
        do {
            try await server.run { port in
                // Tests and scripts read the port from this line.
                FileHandle.standardOutput.write(Data("sync-relay listening on \(scheme)://\(host):\(port)\n".utf8))
                logger.info(
                    "sync-relay ready on \(scheme)://\(host):\(port), database \(database) (relay \(identity)), configuration \(origin)",
                    metadata: ["MESSAGE_ID": "\(MessageID.ready)"])
                notifier.ready(status: "serving \(scheme)://\(host):\(port)")
            }
        } catch {
            watchdog.cancel()
            await opened.close()
            throw fail("cannot serve on \(settings.host):\(settings.port): \(error)", status: ExitStatus.systemError)
        }
        notifier.stopping()
        watchdog.cancel()
        await opened.close()
        logger.info("sync-relay stopped", metadata: ["MESSAGE_ID": "\(MessageID.stopping)"])
        withExtendedLifetime(hangup) {}
    }
}

struct Account: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, list or delete accounts.", subcommands: [Create.self, List.self, Delete.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an account.")
        @OptionGroup var location: Location
        @Argument(help: "The account's name: 1 to 128 ASCII letters, digits, '-', '_', '.'; not starting with '.'.")
        var name: String
        @Option(help: "Bytes the account may hold: segments, baselines and progress records (default: [storage] default_quota_bytes).")
        var quotaBytes: Int64?

        func run() throws {
            do {
                try location.administer { [name, quotaBytes] in try await $0.createAccount(name, quotaBytes: quotaBytes) }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            print("created account \(name)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the accounts with what they hold.")
        @OptionGroup var location: Location
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let accounts: [AccountInfo]
            do {
                accounts = try location.administer { try await $0.accounts() }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            if json { return try printJSON(accounts) }
            for account in accounts {
                print("\(account.name)\t\(account.segments) segments\t\(account.usedBytes) bytes\tquota \(account.quotaBytes.map(String.init) ?? "default")\tcreated \(account.createdAt)")
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an account with all its segments and tokens.")
        @OptionGroup var location: Location
        @Argument var name: String

        func run() throws {
            do {
                try location.administer { [name] in try await $0.deleteAccount(name) }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            print("deleted account \(name) with its segments and tokens")
        }
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Issue, list or revoke tokens.", subcommands: [Issue.self, List.self, Revoke.self])

    struct Issue: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a token for an account; it is printed once and only its digest is kept.")
        @OptionGroup var location: Location
        @Argument var account: String
        @Option(help: "Bind the token to one node id: it may push only as that node.")
        var node: String?
        @Flag(help: "Print JSON (id, account, node, token).") var json = false

        func run() throws {
            let issued: (info: TokenInfo, token: String)
            do {
                issued = try location.administer { [account, node] in try await $0.issueToken(account: account, node: node.map(NodeID.init)) }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            if json {
                struct Issued: Encodable { var id, account, token: String; var node: String? }
                return try printJSON(Issued(id: issued.info.id, account: issued.info.account, token: issued.token, node: issued.info.node))
            }
            print(issued.token)
            FileHandle.standardError.write(Data("sync-relay: token \(issued.info.id) for account \(account)\(node.map { ", node \($0)" } ?? ""): shown once, keep it in a file only its node can read\n".utf8))
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens (ids, accounts, nodes; never secrets).")
        @OptionGroup var location: Location
        @Option(help: "Only this account's tokens.") var account: String?
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let tokens: [TokenInfo]
            do {
                tokens = try location.administer { [account] in try await $0.tokens(account: account) }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            if json { return try printJSON(tokens) }
            for token in tokens { print("\(token.id)\t\(token.account)\t\(token.node ?? "any node")\tcreated \(token.createdAt)") }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a token by its id: the relay refuses it from its next request on.")
        @OptionGroup var location: Location
        @Argument var id: String

        func run() throws {
            do {
                try location.administer { [id] in try await $0.revokeToken(id: id) }
            } catch let error as RelayError {
                throw fail(error.message, status: ExitStatus.failed)
            }
            print("revoked token \(id)")
        }
    }
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a SQLite relay database into the PostgreSQL one the configuration names ([storage] backend = \"postgres\").",
        discussion: """
            Stop the SQLite relay first (what it stores after the copy began is not copied). Arrival numbers, cursors, \
            tokens, progress records, baselines and the relay's identity and epoch are kept: nodes need only the new \
            address. The PostgreSQL database must hold no account yet; the copy is one transaction.
            """)

    @Option(help: "The configuration naming the PostgreSQL database (config/sync-relay.toml, [postgres]).")
    var config: String?

    @Option(help: "The SQLite relay database to copy.")
    var from: String

    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let settings: RelaySettings
        do {
            settings = try RelayConfiguration.load(file: config).0
        } catch {
            throw fail("configuration error: \(error)", status: ExitStatus.configuration)
        }
        guard settings.backend == .postgres else {
            throw fail("the configuration's [storage] backend is \(settings.backend.rawValue): migrate copies into PostgreSQL (set backend = \"postgres\" and [postgres])", status: ExitStatus.configuration)
        }
        let from = self.from
        let summary: SQLiteRelayImport.Summary
        do {
            summary = try runBlocking {
                var logger = Logger(label: "logsync.relay.migrate")
                logger.logLevel = .warning
                let storage: PostgresRelayStorage
                do {
                    storage = try await PostgresRelayStorage.open(settings: settings.postgres, serving: false, logger: logger)
                } catch {
                    throw fail((error as? RelayError)?.message ?? "\(error)", status: ExitStatus.unavailable)
                }
                do {
                    let summary = try await SQLiteRelayImport.copy(from: from, into: storage)
                    await storage.close()
                    return summary
                } catch {
                    await storage.close()
                    throw error
                }
            }
        } catch let error as RelayError {
            throw fail(error.description, status: ExitStatus.failed)
        }
        if json { return try printJSON(summary) }
        print(
            "copied \(summary.accounts) accounts (\(summary.retiredAccounts) retired), \(summary.tokens) tokens, \(summary.segments) segments (\(summary.segmentBytes) bytes), \(summary.progressRecords) progress records, \(summary.baselines) baselines into PostgreSQL database \(settings.postgres.database); relay \(summary.identity)"
        )
    }
}
