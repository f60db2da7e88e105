import ArgumentParser
import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncDaemon
import LogsyncPlatform
import LogsyncSystemd
import Synchronization

/// `syncd`: keeps a logsync store in sync. SIGTERM or SIGINT stop it cleanly, SIGHUP reloads its
/// configuration.
@main
struct Syncd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncd",
        abstract: "Keep a logsync store in sync through a shared folder; control it with syncctl.",
        discussion: """
            Without --config, the configuration is the first of $CONFIGURATION_DIRECTORY/syncd.toml, \
            $XDG_CONFIG_HOME/logsync/syncd.toml, ~/.config/logsync/syncd.toml (/etc/logsync/syncd.toml for root) \
            that exists, else embedded defaults. SIGTERM and SIGINT stop syncd after the batch at hand; SIGHUP \
            re-reads the configuration. Exit statuses: 0 stopped, 64 bad command line, 65 the store is damaged or \
            its tables were changed by another program, 71 cannot start, 75 another syncd runs on this store, \
            77 the control socket's folder is not private, 78 bad configuration (docs/exit-codes.md).
            """,
        version: LogsyncVersion.current)

    @Option(help: "The configuration file (see config/syncd.toml for every key).")
    var config: String?

    @Option(help: "Log entries at least this severe: trace, debug, info, notice, warning, error, critical (default: [log] level, else info).")
    var logLevel: Logger.Level?

    func run() throws {
        // Before any thread starts: a SIGTERM that comes while syncd starts waits for its handler.
        HandledSignals.block([SIGTERM, SIGINT, SIGHUP])
        FaultInjection.delay("syncd.starting", milliseconds: 1_500)
        let configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration.load(file: config)
        } catch {
            throw Self.fail("configuration error: \(error)", status: ExitStatus.configuration)
        }
        // Only the executable chooses where logs go: the journal under systemd, stderr otherwise.
        let level = LogLevelSetting(logLevel ?? .info, pinned: logLevel != nil)
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label, identifier: "syncd", level: level) }
        let logger = Logger(label: "logsync.syncd")

        let daemon: SyncDaemon
        do {
            daemon = try SyncDaemon(configuration: configuration, logger: logger, logLevel: level)
        } catch let error as DaemonError {
            throw Self.fail(error.description, status: error.exitStatus)
        } catch {
            throw Self.fail("cannot start: \(error)", status: DaemonError.startExitStatus(error))
        }

        let stopping = Atomic<Bool>(false)
        let done = Wakeup()
        var sources: [DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                stopping.store(true, ordering: .releasing)
                done.signal()
            }
            source.resume()
            sources.append(source)
        }
        // SIGHUP re-reads the configuration; a broken file keeps the running one (and says where it is broken).
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "syncd.reload"))
        hangup.setEventHandler { _ = daemon.reload() }
        hangup.resume()
        daemon.start()
        // Runs until SIGTERM or SIGINT; the hour only bounds each wait.
        while !stopping.load(ordering: .acquiring) { done.wait(timeout: .seconds(3_600)) }
        daemon.stop()
        withExtendedLifetime((sources, hangup)) {}
    }

    /// Prints `message` on stderr and returns the exit status to throw.
    static func fail(_ message: String, status: Int32) -> ExitCode {
        FileHandle.standardError.write(Data("syncd: \(message)\n".utf8))
        return ExitCode(status)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
