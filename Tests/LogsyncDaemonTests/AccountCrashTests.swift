import Foundation
import LogsyncCore
import LogsyncTestKit
import Testing

extension AccountTests {
@Suite("account switch killed at every step")
struct AccountCrashTests {
    /// Every fault point of the switch, in step order (`switch.building-round` is in the middle of a
    /// rebuild, after its first round applied something).
    static let points = [
        "switch.will-change", "switch.exporting", "switch.retiring", "switch.building-round", "switch.building", "switch.swapping",
        "switch.did-change",
    ]

    @Test("SIGKILL at each step: the next syncd start finishes the switch, with exactly the new account's data, each transaction once, and nothing the old account had lost")
    func killedAtEveryStep() async throws {
        let (cluster, a, b, c) = try await accountCluster("kill")
        defer { terminate(cluster) }
        var expected: [String: Set<String>] = ["x": ["x from b"], "y": ["y from c"]]
        let other = ["x": b, "y": c]
        try add("x from b", to: b)
        try add("y from c", to: c)
        try await awaitTitles(a, expected["x"]!)

        for (index, point) in Self.points.enumerated() {
            let (from, to) = index % 2 == 0 ? ("x", "y") : ("y", "x")
            #expect(try await a.stop() == 0)
            try await a.start(environment: ["LOGSYNC_FAULT": point])
            let marker = "\(from) written by a just before a kill at \(point)"
            try add(marker, to: a)
            expected[from]!.insert(marker)
            let killed = try await a.syncctl(["account", "switch", to, "--timeout", "60"])
            #expect(killed.status != 0, "the switch must not complete with \(point) set: \(killed.stdout)")
            let status = try await a.waitForExit()
            #expect(status == SIGKILL, "syncd dies at \(point) (exit \(status)):\n\(a.log)")
            // A script that opens the store the state file still names active, after the kill deleted it,
            // leaves an empty file there (what Python's sqlite3.connect does): it holds nothing to ship.
            let active = try a.accountStores.load().active.path
            if !FileManager.default.fileExists(atPath: active) { FileManager.default.createFile(atPath: active, contents: nil) }
            try await a.start()
            let resumed = try await a.syncctl(["account", "switch", to, "--timeout", "60"])
            #expect(resumed.status == 0, "after a kill at \(point): \(resumed.stderr)\n\(a.log)")
            #expect(try titles(a) == expected[to]!, "after a kill at \(point), a holds exactly \(to)'s data")
            // Nothing the old account had is lost: a's last write reached its other node.
            try await awaitTitles(other[from]!, expected[from]!)
            // Each transaction once: the rebuilt store holds as many as the node that never left.
            try await awaitTitles(other[to]!, expected[to]!)
            #expect(try transactionCount(a) == transactionCount(other[to]!), "after a kill at \(point)")
            let state = try a.accountStores.load()
            #expect(state.pending == nil && state.active.account == to)
        }
        // Everything old was shipped and let go of: no retired store is left.
        try await eventually(within: .seconds(20), every: .milliseconds(50), "no retained store is left; log:\n\(a.log)") {
            (try a.accountStores.load().retained).isEmpty
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: a.accountStores.folder).filter { $0.hasSuffix(".sqlite") || $0.hasSuffix(".building") }
        #expect(left == [URL(fileURLWithPath: try a.activeStorePath()).lastPathComponent], "\(left)")
    }

    @Test("without [store] schema, a switch killed after the old store was deleted resumes with the stores' own schema")
    func schemaKeptAcrossACrash() async throws {
        let (cluster, a, _, c) = try await accountCluster("kschema")
        defer { terminate(cluster) }
        try add("y from c", to: c)
        // From now on the schema comes from the store itself, as for a store that was set up once.
        #expect(try await a.stop() == 0)
        let config = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try config.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("schema = ") }.joined(separator: "\n")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        try await a.start(environment: ["LOGSYNC_FAULT": "switch.retiring"])
        _ = try await a.syncctl(["account", "switch", "y"])
        #expect(try await a.waitForExit() == SIGKILL)
        #expect(!FileManager.default.fileExists(atPath: a.storePath), "the old store is gone before the crash")
        try await a.start()
        #expect(try await a.syncctl(["account", "switch", "y"]).status == 0, "\(a.log)")
        let columns = try ForeignConnection(path: try a.activeStorePath()).execute("SELECT name FROM pragma_table_info('Note')")
        #expect(columns.contains([.text("rank")]), "the new store has the schema of the old one, not the embedded notes: \(columns)")
        #expect(try titles(a) == ["y from c"])
    }
}
}
