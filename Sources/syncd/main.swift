import Foundation
import Logging
import LogsyncDaemon
import LogsyncSystemd

// syncd [--config FILE]: keeps a logsync store in sync. SIGTERM or SIGINT stop it cleanly.

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("syncd: \(message)\n".utf8))
    exit(code)
}

// Only the executable chooses where logs go: the journal under systemd, stderr otherwise.
LoggingSystem.bootstrap { label in JournalLogHandler(label: label, identifier: "syncd") }
let logger = Logger(label: "logsync.syncd")

var arguments = Array(CommandLine.arguments.dropFirst())
var configFile: String?
while let argument = arguments.first {
    arguments.removeFirst()
    switch argument {
    case "--config":
        guard let value = arguments.first else { fail("--config needs a file", code: 2) }
        configFile = value
        arguments.removeFirst()
    case "--help", "-h":
        print("usage: syncd [--config FILE]\n\nKeeps a logsync store in sync through a shared folder; control it with syncctl.\nWithout --config: the first of $CONFIGURATION_DIRECTORY/syncd.toml, $XDG_CONFIG_HOME/logsync/syncd.toml,\n~/.config/logsync/syncd.toml (/etc/logsync/syncd.toml for root) that exists, else embedded defaults.")
        exit(0)
    default:
        fail("unknown argument '\(argument)' (usage: syncd [--config FILE])", code: 2)
    }
}

let configuration: DaemonConfiguration
do {
    configuration = try DaemonConfiguration.load(file: configFile)
} catch {
    fail("configuration error: \(error)", code: 78)
}

let daemon: SyncDaemon
do {
    daemon = try SyncDaemon(configuration: configuration, logger: logger)
} catch let error as DaemonError {
    fail(error.description, code: error.exitStatus)
} catch {
    fail("cannot start: \(error)", code: 71)
}

let done = DispatchSemaphore(value: 0)
var sources: [DispatchSourceSignal] = []
for signalNumber in [SIGTERM, SIGINT] {
    signal(signalNumber, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
    source.setEventHandler { done.signal() }
    source.resume()
    sources.append(source)
}
// SIGHUP re-reads the configuration; a broken file keeps the running one (and says where it is broken).
signal(SIGHUP, SIG_IGN)
let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "syncd.reload"))
hangup.setEventHandler { _ = daemon.reload() }
hangup.resume()
daemon.start()
done.wait()
daemon.stop()
exit(0)
