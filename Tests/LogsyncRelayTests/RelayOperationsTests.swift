import Foundation
import LogsyncTestKit
import Testing

/// The relay's unit and configuration file, as shipped.
@Suite struct RelayOperationsTests {
    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    @Test func unitVerifiesAndIsHardened() async throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            print("skipped: systemd-analyze is not installed (scripts/install-deps.sh installs it)")
            return
        }
        let directory = try TemporaryDirectory("relayunit")
        let text = try String(contentsOfFile: Self.root + "/systemd/sync-relay.service", encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/", with: Products.directory + "/")
        let path = try directory.write("sync-relay.service", text)
        let verify = try await Subprocess.run(analyze, ["verify", path])
        #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
        let security = try await Subprocess.run(analyze, ["security", "--offline=yes", "--threshold=20", path])
        let score = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") }
        let value = score.flatMap { line in line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) } }
        print("systemd/sync-relay.service: \(score.map(String.init) ?? security.stdout)")
        #expect((value ?? 10) <= 2.0, "exposure \(String(describing: value))")
        for setting in ["DynamicUser=yes", "StateDirectory=sync-relay", "LimitNOFILE=", "Type=notify", "WatchdogSec="] {
            #expect(text.contains(setting), "the unit sets \(setting)")
        }
    }

    @Test func sigtermWhileStartingStopsGracefully() async throws {
        let directory = try TemporaryDirectory("relay-early-term")
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_FAULT"] = "relay.starting"  // 1.5 s at the top of serve
        let relay = try Subprocess(
            Products.path("sync-relay"), ["serve", "--database", directory.file("relay.sqlite"), "--host", "127.0.0.1", "--port", "0"],
            environment: environment)
        // Signalled once its first line of `serve` has run (the kernel shows the signals blocked), inside
        // the fault's pause: a signal before `main` gets the default action, which no program can change.
        try await ProcessSignals.awaitBlocked([SIGTERM], pid: relay.process.processIdentifier)
        relay.process.terminate(SIGTERM)
        let status = try await relay.waitForExit(timeout: .seconds(20))
        #expect(status == 0 && !relay.process.endedBySignal, "exit \(status):\n\(relay.stdout)\(relay.stderr)")
        #expect(relay.stderr.contains("sync-relay stopped"), "\(relay.stderr)")
    }

    @Test func everyDocumentedKeyIsAccepted() async throws {
        let directory = try TemporaryDirectory("relayconf")
        let shipped = try String(contentsOfFile: Self.root + "/config/sync-relay.toml", encoding: .utf8)
        // Every key shown commented out, with its default, taken as set; the database in this test's folder.
        var lines: [String] = []
        var keys = 0
        for line in shipped.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# "), !line.contains("tls_"), line.wholeMatch(of: /# [a-z_]+ = .+/) != nil {
                lines.append(String(line.dropFirst(2)))
                keys += 1
            } else if line.hasPrefix("database = ") {
                lines.append("database = \"\(directory.file("relay.sqlite"))\"")
            } else {
                lines.append(String(line))
            }
        }
        #expect(keys >= 14)
        let config = try directory.write("sync-relay.toml", lines.joined(separator: "\n"))
        let list = try await Subprocess.run(Products.path("sync-relay"), ["account", "list", "--config", config])
        #expect(list.status == 0, "every documented key is accepted: \(list.stderr)")
        let unknown = try directory.write("bad.toml", "[limits]\nmax_segment_byte = 5\n")
        let refused = try await Subprocess.run(Products.path("sync-relay"), ["account", "list", "--config", unknown])
        #expect(refused.status == 78 && refused.stderr.contains("bad.toml:2"), "\(refused.stderr)")
    }

    @Test func tokenInSyncdConfigIsRefused() async throws {
        let directory = try TemporaryDirectory("relaytok")
        let config = try directory.write("syncd.toml", "[relay]\nurl = \"http://127.0.0.1:1\"\ntoken = \"lsr1_x\"\n")
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", config])
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("never written in syncd.toml"))
        #expect(!result.stderr.contains("lsr1_x"), "the refused token is not echoed")
    }
}
