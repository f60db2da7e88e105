import Foundation
import LogsyncControl
import LogsyncDaemon
@testable import LogsyncSystemd
import LogsyncPlatform
import LogsyncTestKit
import Testing

@Suite("systemd integration", .serialized)
struct SystemdTests {
    /// Starts a node's syncd with a fake NOTIFY_SOCKET and a watchdog of `watchdogMilliseconds`.
    private func start(_ node: SyncdNode, _ receiver: NotifyReceiver, watchdogMilliseconds: Int = 400, fault: String? = nil) async throws {
        var environment = ["NOTIFY_SOCKET": receiver.path, "WATCHDOG_USEC": String(watchdogMilliseconds * 1000)]
        if let fault { environment["LOGSYNC_FAULT"] = fault }
        try await node.start(environment: environment)
    }

    @Test("READY after the socket is bound, STATUS lines, WATCHDOG at half the interval, STOPPING on SIGTERM")
    func lifecycle() async throws {
        let cluster = try cluster("sd")
        let a = try cluster.addNode("a")
        let receiver = try NotifyReceiver(path: cluster.directory.file("notify.sock"))
        try await start(a, receiver, watchdogMilliseconds: 3_000)
        let ready = try await receiver.await("READY=1")
        #expect(try await a.syncctl(["status"]).status == 0, "the control socket answers once READY was sent")
        #expect(ready.message.contains("STATUS="))
        try a.openStore().write(author: "a") { try $0.insert("Note", note("x")) }
        try await receiver.await("STATUS=idle; round", after: ready.index + 1)

        // A 3 s watchdog: a ping about every 1.5 s from the sync loop's timer, plus one at the start of each
        // round (a rescan every second wakes one). Six pings are awaited and the window they span is
        // measured: load can only delay pings, so it cannot make too many of them; a gap as long as the
        // interval is what systemd would restart the service for.
        let first = try await receiver.await("WATCHDOG=1", after: ready.index + 1)
        let sixth = try await eventually(within: .seconds(60), every: .milliseconds(50), "six watchdog pings:\n\(receiver.messages)") { () -> Int? in
            let pings = receiver.messages.indices.filter { $0 >= first.index && receiver.messages[$0].message == "WATCHDOG=1" }
            return pings.count >= 6 ? pings[5] : nil
        }
        let pings = receiver.messages[first.index...sixth].filter { $0.message == "WATCHDOG=1" }
        let window = pings.last!.at - pings.first!.at
        #expect(pings.count <= Int(window / .milliseconds(1_500)) * 2 + 4, "\(pings.count) pings in \(window): the loop pings far more often than it should")
        let gaps = zip(pings.dropFirst(), pings).map { $0.at - $1.at }
        #expect(gaps.allSatisfy { $0 < .seconds(3) }, "every gap under the watchdog interval: \(gaps)")

        #expect(try await a.stop() == 0)
        try await receiver.await("STOPPING=1")
    }

    @Test("a hung sync loop stops the watchdog pings")
    func hungLoopStopsPings() async throws {
        let cluster = try cluster("hang")
        let a = try cluster.addNode("a")
        let receiver = try NotifyReceiver(path: cluster.directory.file("notify.sock"))
        try await start(a, receiver, fault: "loop.hang")
        try await receiver.await("READY=1")
        try await receiver.await("WATCHDOG=1")
        // The loop hangs at the start of its second round.
        try a.openStore().write(author: "a") { try $0.insert("Note", note("wake the loop")) }
        try await a.awaitLog("fault injection: loop.hang hangs here")
        // Absence can only be seen over a window: five watchdog intervals from the moment the hang was
        // seen. Load can delay a ping, never make one, so a busy machine cannot fail this.
        let quietStart = ContinuousClock.now
        try await Task.sleep(for: .seconds(2))
        let late = receiver.messages.filter { $0.message == "WATCHDOG=1" && $0.at >= quietStart }
        #expect(late.isEmpty, "no pings from a hung loop (systemd would restart it): \(late)")
        #expect(a.process?.process.isRunning == true, "the process itself is alive: only the watchdog can tell")
        try await a.kill9()
    }

    @Test("SIGHUP and syncctl reload: RELOADING with MONOTONIC_USEC, then READY; a broken file keeps the old config")
    func reload() async throws {
        let cluster = try cluster("reload")
        let a = try cluster.addNode("a")
        let receiver = try NotifyReceiver(path: cluster.directory.file("notify.sock"))
        try await start(a, receiver, watchdogMilliseconds: 10_000)
        let ready = try await receiver.await("READY=1")

        // A good change through syncctl: applied, and syncctl returns when it is done.
        let original = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try original.replacingOccurrences(of: "rescan_interval_ms = 1000", with: "rescan_interval_ms = 2000")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        let reloaded = try await a.syncctl(["reload"])
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(reloaded.stdout.contains("reloaded \(a.configPath)"))
        let reloading = try await receiver.await("RELOADING=1", after: ready.index + 1)
        #expect(reloading.message.contains("MONOTONIC_USEC="))
        try await receiver.await("READY=1", after: reloading.index + 1)

        // A broken file through SIGHUP: syncd keeps running on the previous configuration and says where.
        try (original + "\n[sync]\nbogus = 1\n").write(toFile: a.configPath, atomically: true, encoding: .utf8)
        kill(a.process!.process.processIdentifier, SIGHUP)
        let second = try await receiver.await("RELOADING=1", after: reloading.index + 1)
        try await receiver.await("READY=1", after: second.index + 1)
        try await a.awaitLog("reload failed, still running on the previous configuration")
        #expect(a.log.contains("\(a.configPath):"), "the error names the file and line")
        #expect(a.process?.process.isRunning == true)
        #expect(try await a.syncctl(["status"]).status == 0)
        let failed = try await a.syncctl(["reload"])
        #expect(failed.status == ExitStatus.configuration)
        try await a.stop()
    }

    @Test(
        "every unit passes systemd-analyze verify; the system units score 2.0 or better on security",
        .enabled(if: Tools.installed("systemd-analyze"), "systemd-analyze is not installed (scripts/install-deps.sh installs it)"))
    func unitsVerify() async throws {
        let analyze = try #require(Tools.find("systemd-analyze"))
        let root = Products.packageRoot
        let directory = try TemporaryDirectory("units")
        let units: [(source: String, name: String, system: Bool)] = [
            ("systemd/syncd.service", "syncd.service", true),
            ("systemd/syncd@.service", "syncd@profile.service", true),
            ("systemd/user/syncd.service", "syncd-user.service", false),
        ]
        for unit in units {
            // verify checks that ExecStart= exists: point it at the built binaries.
            let text = try String(contentsOfFile: root + "/" + unit.source, encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/", with: Products.directory + "/")
            let path = try directory.write(unit.name, text)
            let verify = try await Subprocess.run(analyze, ["verify", path])
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(unit.source): \(verify.stderr)")
            guard unit.system else { continue }
            let security = try await Subprocess.run(analyze, ["security", "--offline=yes", "--threshold=20", path])
            let score = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") }
            let value = score.flatMap { line in line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) } }
            print("\(unit.source): \(score.map(String.init) ?? security.stdout)")
            #expect(security.status == 0, "\(unit.source): \(security.stdout)")
            #expect((value ?? 10) <= 2.0, "\(unit.source) exposure \(String(describing: value))")
        }
    }
}

@Suite("Journal fields and installation")
struct JournalAndInstallTests {
    @Test("journal field names are upper-case and priorities follow the level")
    func journalFields() {
        #expect(JournalLogHandler.fieldName("segment") == "SEGMENT")
        #expect(JournalLogHandler.fieldName("peer-node.id") == "PEER_NODE_ID")
        #expect(JournalLogHandler.fieldName("_private") == "PRIVATE")
        #expect(JournalLogHandler.priority(.critical) == 2)
        #expect(JournalLogHandler.priority(.error) == 3)
        #expect(JournalLogHandler.priority(.warning) == 4)
        #expect(JournalLogHandler.priority(.notice) == 5)
        #expect(JournalLogHandler.priority(.info) == 6)
        #expect(JournalLogHandler.priority(.debug) == 7)
        let ids = [MessageID.ready, MessageID.stopping, MessageID.reloaded, MessageID.reloadFailed, MessageID.syncCompleted, MessageID.syncFailed, MessageID.quarantined]
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
    }

    @Test("scripts/install.sh puts binaries, man pages, completions, units, config and docs in place under DESTDIR")
    func installIntoStagingRoot() async throws {
        let root = Products.packageRoot
        let staging = try TemporaryDirectory("inst")
        var environment = ProcessInfo.processInfo.environment
        environment["DESTDIR"] = staging.path
        environment["PREFIX"] = "/opt/logsync"
        environment["LOGSYNC_BIN_DIR"] = Products.directory
        let result = try await Subprocess.run("/bin/bash", [root + "/scripts/install.sh"], environment: environment, timeout: .seconds(60))
        #expect(result.status == 0, "\(result.stderr)")
        for tool in ["syncd", "syncctl", "logsync", "notes"] {
            #expect(FileManager.default.isExecutableFile(atPath: staging.file("opt/logsync/bin/\(tool)")), "\(tool)")
            // A man page and completions for bash, zsh and fish, generated from the tool's own parser.
            let page = try String(contentsOfFile: staging.file("opt/logsync/share/man/man1/\(tool).1"), encoding: .utf8)
            #expect(page.hasPrefix(".TH \"\(tool.uppercased())\" \"1\""), "\(tool).1: \(page.prefix(200))")
            #expect(page.contains(".SH OPTIONS") && page.contains("\\-\\-version"), "\(tool).1")
            let bash = try String(contentsOfFile: staging.file("opt/logsync/share/bash-completion/completions/\(tool)"), encoding: .utf8)
            #expect(bash.contains("-F _\(tool) \(tool)"), "bash completion of \(tool)")
            let zsh = try String(contentsOfFile: staging.file("opt/logsync/share/zsh/site-functions/_\(tool)"), encoding: .utf8)
            #expect(zsh.hasPrefix("#compdef \(tool)"), "zsh completion of \(tool)")
            let fish = try String(contentsOfFile: staging.file("opt/logsync/share/fish/vendor_completions.d/\(tool).fish"), encoding: .utf8)
            #expect(fish.contains("complete -c '\(tool)'"), "fish completion of \(tool)")
        }
        let syncctlPage = try String(contentsOfFile: staging.file("opt/logsync/share/man/man1/syncctl.1"), encoding: .utf8)
        #expect(syncctlPage.contains(".SS trigger") && syncctlPage.contains("\\-\\-timeout"), "subcommands are in the page")
        let unit = try String(contentsOfFile: staging.file("etc/systemd/system/syncd.service"), encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/logsync/bin/syncd --config /etc/logsync/syncd.toml"))
        #expect(FileManager.default.fileExists(atPath: staging.file("etc/systemd/system/syncd@.service")))
        #expect(FileManager.default.fileExists(atPath: staging.file("etc/systemd/user/syncd.service")))
        #expect(FileManager.default.fileExists(atPath: staging.file("etc/logsync/syncd.toml")))
        #expect(FileManager.default.fileExists(atPath: staging.file("opt/logsync/share/doc/logsync/operations.md")))
        // The installed example configuration is valid as shipped (everything commented: the defaults).
        let configuration = try DaemonConfiguration.load(
            file: staging.file("etc/logsync/syncd.toml"), environment: ["STATE_DIRECTORY": staging.file("state"), "RUNTIME_DIRECTORY": staging.file("run")])
        #expect(configuration.storePath == staging.file("state") + "/store.sqlite")
        #expect(configuration.socketPath == staging.file("run") + "/syncd.sock")
    }
}
