import Foundation
import LogsyncContexts
import LogsyncCore
import LogsyncPlatform
import LogsyncTestKit
import Testing
import LogsyncControl

/// The part of the `notes` app's note this test writes; the other columns keep their defaults.
private struct Note: Record {
    var id = UUID()
    var title: String?
}

/// The whole path a user sees: an app on node A saves through a context, A's `syncd` exports, B's
/// `syncd` imports, and the `notes watch` running on B shows the change as it merges.
@Suite("notes on two syncd nodes", .serialized)
struct NotesEndToEndTests {
    @Test("a note saved through a context on A shows in B's notes watch, added, edited and deleted, merged from A")
    func contextSaveReachesWatchOnAnotherNode() async throws {
        // syncd registers the schema the notes app opens the store with.
        let cluster = try SyncdCluster("e2e", schema: .notes)
        // Rescans ten minutes apart: within the deadlines below, only the daemons' own pickup of the commit
        // and of the segment file (inotify) can carry a change across; nothing here triggers a sync.
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 600_000)
        let b = try cluster.addNode("b", rescanIntervalMilliseconds: 600_000)
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        let nodeA = try #require(a.nodeID)

        let watch = try Subprocess(
            Products.path("notes"), ["watch", "--config", b.configPath, "--timestamps", "--seconds", "300"])
        defer { watch.process.terminate() }
        _ = try await watch.line(containing: "0 note(s)", timeout: .seconds(30))

        let container = try Container(path: a.storePath, schema: .notes)
        defer { container.close() }
        let context = container.viewContext
        var note = Note(title: "written on a")
        let id = note.id.uuidString.lowercased()

        let added = try await arrival(of: "+ \(id)   written on a", in: watch) {
            try context.insert(note)
            try context.save(author: "alice")
        }
        let edited = try await arrival(of: "~ \(id)   edited on a", in: watch) {
            note.title = "edited on a"
            try context.update(note)
            try context.save(author: "alice")
        }
        let deleted = try await arrival(of: "- \(id)", in: watch) {
            try context.delete(note)
            try context.save(author: "alice")
        }
        print("A's save → B's notes watch, ms: added \(added), edited \(edited), deleted \(deleted)")

        // Each of the three transactions was imported into B once, with A as its origin, and each was
        // announced by the watch as merged from A's node, at B's token for it.
        let imported = try b.openStore().history(filter: HistoryFilter(origins: [.remote(nodeA)]))
        #expect(imported.count == 3, "each of A's saves imported once: \(imported.map(\.token))")
        let merges = try await watch.output(waitingFor: "three 'merged token' lines") { stdout -> [String]? in
            let lines = stdout.split(separator: "\n").map(Self.withoutTimestamp).filter { $0.hasPrefix("merged token ") }
            return lines.count >= 3 ? lines : nil
        }
        #expect(merges == imported.map { "merged token \($0.token) from \(nodeA)" })

        watch.process.terminate()
        _ = try await watch.waitForExit(timeout: .seconds(30))
        #expect(try await a.stop() == 0, "clean exit on SIGTERM:\n\(a.log)")
        #expect(try await b.stop() == 0, "clean exit on SIGTERM:\n\(b.log)")
    }

    /// Runs `change` (a save on A), then waits for B's watch to print a line containing `text`; returns the
    /// milliseconds from the start of the change to the line's timestamp.
    private func arrival(of text: String, in watch: Subprocess, after change: () throws -> Void) async throws -> String {
        let start = WallClock.nanoseconds()
        try change()
        // Far below the ten-minute rescan, and far above what inotify needs even on a loaded machine.
        let line = try await watch.line(containing: text, timeout: .seconds(30))
        let printed = try #require(UInt64(line.dropFirst().prefix { $0 != " " }), "a timestamped line: \(line)")
        #expect(printed >= start, "the watch printed '\(text)' after A saved it")
        return String(format: "%.1f", (Double(printed) - Double(start)) / 1e6)
    }

    /// A `notes watch --timestamps` line without its leading `@<nanoseconds> `.
    private static func withoutTimestamp(_ line: Substring) -> String {
        String(line.drop { $0 != " " }.dropFirst())
    }
}
