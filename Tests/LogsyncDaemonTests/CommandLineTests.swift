import Foundation
import LogsyncCore
import LogsyncControl
import LogsyncDaemon
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Testing

/// One convention for every executable (`docs/exit-codes.md`): swift-argument-parser, `--version`,
/// `--help`, 64 for a bad command line, `--json` where the output is data, ISO 8601 UTC times.
@Suite("command-line conventions")
struct CommandLineTests {
    static let tools = ["syncd", "syncctl", "logsync", "notes", "sync-relay", "logsync-bench"]

    @Test("every command answers --version with logsync's version, --help with its usage, and a bad command line with 64", arguments: tools)
    func versionHelpUsage(tool: String) async throws {
        let version = try await Subprocess.run(Products.path(tool), ["--version"])
        #expect(version.status == ExitStatus.ok && version.stdout == LogsyncVersion.current + "\n", "\(version)")
        let help = try await Subprocess.run(Products.path(tool), ["--help"])
        #expect(help.status == ExitStatus.ok && help.stdout.contains("USAGE: \(tool)"), "\(help)")
        #expect(help.stdout.contains("--version"), "\(help.stdout)")
        #expect(help.stdout.contains("Exit statuses"), "every --help names its exit statuses: \(help.stdout)")
        let bad = try await Subprocess.run(Products.path(tool), ["--no-such-option"])
        #expect(bad.status == ExitStatus.usage, "\(bad)")
    }

    @Test("scripts/run.sh stop stops the syncd it started without installing or building anything")
    func runStopDoesNotBuild() async throws {
        let cluster = try cluster("runstop")
        let a = try cluster.addNode("a")
        try await a.start()
        let pid = try #require(a.process).process.processIdentifier
        let runtime = cluster.directory.file("runtime")
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        // Where run.sh notes the syncd it started.
        try "\(pid)\n".write(toFile: runtime + "/logsync-run-\(getuid()).pid", atomically: true, encoding: .utf8)
        // Stand-ins for the build and the package tools, first on PATH: each call is noted, and fails.
        let stubs = cluster.directory.file("stubs"), called = cluster.directory.file("called")
        try FileManager.default.createDirectory(atPath: stubs, withIntermediateDirectories: true)
        for tool in ["swift", "apt-get", "dpkg-query", "sudo"] {
            try "#!/bin/sh\necho \(tool) >>\(called)\nexit 1\n".write(toFile: stubs + "/" + tool, atomically: true, encoding: .utf8)
            chmod(stubs + "/" + tool, 0o755)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = stubs + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["XDG_RUNTIME_DIR"] = runtime
        // Nothing of this machine's own syncd (its configuration, state or socket) is in reach.
        environment["HOME"] = cluster.directory.path
        for name in ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "CONFIGURATION_DIRECTORY"] { environment[name] = nil }
        let stop = try await Subprocess.run("/bin/bash", [Products.packageRoot + "/scripts/run.sh", "stop"], environment: environment)
        #expect(stop.status == 0 && stop.stdout.contains("syncd (pid \(pid)) stopped"), "\(stop)")
        #expect(!FileManager.default.fileExists(atPath: called), "stop ran \((try? String(contentsOfFile: called, encoding: .utf8)) ?? "")")
        #expect(try await a.waitForExit() == 0, "a clean stop:\n\(a.log)")
        let again = try await Subprocess.run("/bin/bash", [Products.packageRoot + "/scripts/run.sh", "stop"], environment: environment)
        #expect(again.status == 0 && again.stdout.contains("syncd is not running"), "\(again)")
    }

    @Test("logsync-bench exits 69 when a suite's executable is not built: syncd for latency, sync-relay for relay")
    func benchWithoutExecutables() async throws {
        let directory = try TemporaryDirectory("bench")
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_BIN_DIR"] = directory.path
        let latency = try await Subprocess.run(Products.path("logsync-bench"), ["latency", "--quick"], environment: environment)
        #expect(latency.status == ExitStatus.unavailable, "\(latency)")
        #expect(latency.stderr.contains("no syncd executable"), "\(latency.stderr)")
        try FileManager.default.copyItem(atPath: Products.path("syncd"), toPath: directory.file("syncd"))
        let relay = try await Subprocess.run(Products.path("logsync-bench"), ["relay", "--quick"], environment: environment)
        #expect(relay.status == ExitStatus.unavailable, "\(relay)")
        #expect(relay.stderr.contains("no sync-relay next to syncd"), "\(relay.stderr)")
    }

    @Test("syncd takes its log level from --log-level, else [log] level; a wrong level is a configuration error with file:line")
    func logLevel() async throws {
        let directory = try TemporaryDirectory("lvl")
        let file = try directory.write("syncd.toml", "[log]\nlevel = \"loud\"\n")
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", file])
        #expect(result.status == ExitStatus.configuration, "\(result)")
        #expect(result.stderr.contains("\(file):2:") && result.stderr.contains("'log.level' must be one of"), "\(result.stderr)")
        let option = try await Subprocess.run(Products.path("syncd"), ["--log-level", "loud"])
        #expect(option.status == ExitStatus.usage, "\(option)")

        let cluster = try cluster("lvl")
        let a = try cluster.addNode("a", extra: ["", "[log]", "level = \"debug\""])
        try await a.start()
        try await a.awaitLog("[debug]")
        try await a.stop()
    }

    @Test("logsync schema check: 0 and what is added for a safe release, 1 and each refusal with its advice for an unsafe one, 65 for a bad file")
    func schemaCheck() async throws {
        let directory = try TemporaryDirectory("schema-check")
        var v2 = Schema.notes
        v2.version += 1
        let note = try #require(v2.entities.firstIndex { $0.name == "Note" })
        v2.entities[note].attributes.append(Attribute("color", .text))
        var unsafe = v2
        unsafe.entities[note].attributes.removeAll { $0.name == "body" }
        let old = try directory.write("v1.json", Schema.notes.json)
        let safe = try directory.write("v2.json", v2.json)
        let bad = try directory.write("v2-unsafe.json", unsafe.json)
        let ok = try await Subprocess.run(Products.path("logsync"), ["schema", "check", old, safe])
        #expect(ok.status == ExitStatus.ok && ok.stdout.hasPrefix("safe: version \(Schema.notes.version) to \(v2.version)"), "\(ok)")
        #expect(ok.stdout.contains("adds: Note.color"), "\(ok.stdout)")
        let refused = try await Subprocess.run(Products.path("logsync"), ["schema", "check", old, bad])
        #expect(refused.status == ExitStatus.failed && refused.stdout.contains("unsafe: Note.body: attribute 'body' of 'Note' was removed, and 'color' is new and of the same type: if it is the new name, this is a rename without its identifier. Declare 'color' with renamingIdentifier 'body'"), "\(refused)")
        let json = try await Subprocess.run(Products.path("logsync"), ["schema", "check", "--json", old, bad])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["safe"] as? Bool == false && (object["findings"] as? [[String: Any]])?.first?["location"] as? String == "Note.body", "\(object)")
        let garbage = try directory.write("garbage.json", "{\"version\": 0}")
        let invalid = try await Subprocess.run(Products.path("logsync"), ["schema", "check", old, garbage])
        #expect(invalid.status == ExitStatus.dataError && invalid.stderr.contains("is not a valid schema declaration"), "\(invalid)")
        let missing = try await Subprocess.run(Products.path("logsync"), ["schema", "check", old, directory.file("none.json")])
        #expect(missing.status == ExitStatus.usage, "\(missing)")
    }

    @Test("logsync history --json keeps every value exactly; notes list --json lists the notes; syncctl prints ISO 8601 UTC times")
    func jsonAndTimes() async throws {
        let directory = try TemporaryDirectory("json")
        let path = directory.file("s.sqlite")
        let store = try Store(path: path, schema: .notes)
        let id = UUID().uuidString.lowercased()
        try store.write(author: "ann") { try $0.execute("INSERT INTO Note(id, title, body) VALUES (?, 'a' || char(0) || 'b', CAST(x'ff' AS TEXT))", [.text(id)]) }
        try store.write(author: "ann") { try $0.execute("DELETE FROM Note") }
        let history = try await Subprocess.run(Products.path("logsync"), ["history", "--store", path, "--json"])
        #expect(history.status == 0, "\(history)")
        let transactions = try #require(try JSONSerialization.jsonObject(with: Data(history.stdout.utf8)) as? [[String: Any]])
        #expect(transactions.count == 2)
        #expect((transactions[0]["time"] as? String)?.hasSuffix("Z") == true, "\(transactions[0])")
        let deleted = try #require((transactions[1]["changes"] as? [[String: Any]])?.first)
        #expect(deleted["kind"] as? String == "delete" && deleted["key"] as? String == id, "\(deleted)")
        let tombstone = try #require(deleted["tombstone"] as? [String: Any])
        #expect(tombstone["title"] as? String == "a\u{0}b", "\(tombstone)")

        let notes = try await Subprocess.run(Products.path("notes"), ["add", "Hello", "--store", path])
        #expect(notes.status == 0, "\(notes)")
        let list = try await Subprocess.run(Products.path("notes"), ["list", "--json", "--store", path])
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(listed.map { $0["title"] as? String } == ["Hello"], "\(list)")

        let cluster = try cluster("iso")
        let a = try cluster.addNode("a")
        try await a.start()
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let status = try await a.syncctl(["status"])
        let iso = #/last sync  round \d+ at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#
        #expect(status.stdout.contains(iso), "\(status.stdout)")
        try await a.stop()
    }
}
