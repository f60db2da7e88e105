import Foundation
import LogsyncContexts
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Synchronization
import Testing
import LogsyncControl

/// A folder of the daemon tests' schema, as a record.
struct TestFolder: Record {
    static let entityName = "Folder"
    var id = UUID()
    var name: String?
}

/// A note of the daemon tests' schema, as a record.
struct TestNote: Record {
    static let entityName = "Note"
    var id = UUID()
    var title: String?
    var rank: Int?
    var folder: Reference<TestFolder>?
}

extension AccountTests {
@Suite("apps and other programs across an account switch")
struct AccountAppTests {
    @Test("a writer saving through a context every 10 ms while A switches X → Y → X loses nothing and never writes into the wrong account; the container says will and did change")
    func contextWriterAcrossSwitches() async throws {
        let (cluster, a, b, c) = try await accountCluster("writer")
        defer { terminate(cluster) }
        try add("y from c", to: c)
        let app = try AccountContainer(accounts: a.accountStores, schema: cluster.schema)
        defer { app.close() }
        let changes = app.accountChanges()
        let seen = Task {
            var list: [AccountContainer.Change] = []
            for await change in changes {
                list.append(change)
                if list.count == 4 { break }
            }
            return list
        }
        /// What the writer saved, by the account it was saving to.
        let committed = Mutex<[String: [String]]>([:])
        let stop = Atomic<Bool>(false)
        let ended = Atomic<Bool>(false)
        Thread.detachNewThread {
            var next = 0
            while !stop.load(ordering: .acquiring) {
                if let (account, container) = app.current() {
                    let title = "\(account ?? "local") #\(next)"
                    let context = container.viewContext
                    do {
                        try context.insert(TestNote(title: title, rank: next))
                        if try context.save(author: "writer") != nil {
                            committed.withLock { $0[account ?? "local", default: []].append(title) }
                            next += 1
                        }
                    } catch {
                        context.rollback()
                    }
                }
                usleep(10_000)
            }
            ended.store(true, ordering: .releasing)
        }
        func count(_ account: String) -> Int { committed.withLock { $0[account]?.count ?? 0 } }
        try await eventually(within: .seconds(30), "the writer saves in x") { count("x") >= 10 }
        #expect(try await a.syncctl(["account", "switch", "y"]).status == 0)
        try await eventually(within: .seconds(30), "the writer saves in y") { count("y") >= 10 }
        let xBefore = count("x")
        #expect(try await a.syncctl(["account", "switch", "x"]).status == 0)
        try await eventually(within: .seconds(30), "the writer saves in x again") { count("x") >= xBefore + 10 }
        stop.store(true, ordering: .releasing)
        try await eventually(within: .seconds(30), "the writer stops") { ended.load(ordering: .acquiring) }

        let saved = committed.withLock { $0 }
        let xSaved = Set(saved["x"] ?? []), ySaved = Set(saved["y"] ?? [])
        // Nothing lost: every save reached its account's other node.
        try await eventually(within: .seconds(30), every: .milliseconds(20), "b has every note saved in x") { xSaved.isSubset(of: try titles(b)) }
        try await eventually(within: .seconds(30), every: .milliseconds(20), "c has every note saved in y") { ySaved.isSubset(of: try titles(c)) }
        // Never into the wrong account.
        #expect(try titles(b).allSatisfy { !$0.hasPrefix("y #") && !$0.hasPrefix("local") })
        #expect(try titles(c).allSatisfy { !$0.hasPrefix("x #") && !$0.hasPrefix("local") })
        try await awaitTitles(a, try titles(b))
        #expect(await seen.value == [.willChange(from: "x", to: "y"), .didChange(from: "x", to: "y"), .willChange(from: "y", to: "x"), .didChange(from: "y", to: "x")])
    }

    @Test(
        "a sqlite3 shell holding the old store open during a switch: the store is kept while held, stays intact, refuses what the shell writes after the switch closed it, and goes once it is let go of",
        .enabled(if: Tools.installed("sqlite3"), "needs the sqlite3 shell"))
    func foreignHolderDuringSwitch() async throws {
        let (cluster, a, b, c) = try await accountCluster("foreign")
        defer { terminate(cluster) }
        try add("x before", to: a)
        try add("y from c", to: c)
        try await awaitTitles(b, ["x before"])
        let old = a.storePath
        let shell = try Subprocess(sqliteShell, ["-cmd", ".timeout 10000", old])
        try shell.send("SELECT 'held', count(*) FROM Note;\n")
        _ = try await shell.line(startingWith: "held")
        let pid = shell.process.processIdentifier

        let switched = try await a.syncctl(["account", "switch", "y"])
        #expect(switched.status == 0, "\(switched.stderr)\n\(a.log)")
        #expect(try titles(a) == ["y from c"])
        let retained = try #require((try await accountStatus(a))["retained"] as? [[String: Any]])
        #expect(retained.count == 1 && (retained.first?["reason"] as? String)?.contains("held open by process \(pid)") == true, "\(retained)")
        #expect(FileManager.default.fileExists(atPath: old))

        // The shell goes on with a consistent old store, which refuses its write with the reason: the
        // switch closed it to writes before it looked for what was left to ship (docs/accounts.md).
        try shell.send("INSERT INTO Note(id, title, rank) VALUES ('\(UUID().uuidString.lowercased())', 'x written by sqlite3 after the switch', 1);\nSELECT 'after';\nPRAGMA integrity_check;\n")
        _ = try await shell.line(startingWith: "after")
        #expect(try await shell.line(startingWith: "ok") == "ok")
        try shell.closeInput()
        _ = try await shell.waitForExit()
        #expect(shell.stderr.contains("logsync: this store was retired by an account switch"), "\(shell.stderr)")

        #expect(try titles(b) == ["x before"])
        try await eventually(within: .seconds(20), every: .milliseconds(50), "the old store is shipped and deleted; log:\n\(a.log)") {
            ((try await accountStatus(a))["retained"] as? [Any])?.isEmpty == true && !FileManager.default.fileExists(atPath: old)
        }
        #expect(try titles(c) == ["y from c"])
    }

    @Test("notes watch shows stores will change and did change, then the new account's notes, and goes on watching them")
    func notesWatchAcrossSwitch() async throws {
        let cluster = try SyncdCluster("notesw", schema: .notes)
        let a = try cluster.addNode("a", account: "x"), c = try cluster.addNode("c", account: "y")
        for node in [a, c] { try await node.start() }
        defer { terminate(cluster) }
        func notes(_ node: SyncdNode, _ arguments: [String]) async throws {
            let result = try await Subprocess.run(Products.path("notes"), arguments + ["--config", node.configPath])
            #expect(result.status == 0, "\(result.stderr)")
        }
        try await notes(a, ["add", "a note of x"])
        try await notes(c, ["add", "a note of y"])
        #expect(try await c.syncctl(["trigger"]).status == 0)

        let watch = try Subprocess(Products.path("notes"), ["watch", "--config", a.configPath, "--seconds", "120"])
        defer { watch.process.terminate() }
        _ = try await watch.line(containing: "a note of x", timeout: .seconds(30))
        #expect(try await a.syncctl(["account", "switch", "y"]).status == 0)
        _ = try await watch.line(containing: "stores will change: account x → account y")
        _ = try await watch.line(containing: "stores did change: account x → account y")
        _ = try await watch.line(containing: "a note of y")
        // And it watches the new store: a note added on c arrives.
        try await notes(c, ["add", "another note of y"])
        #expect(try await c.syncctl(["trigger"]).status == 0)
        _ = try await watch.line(containing: "+ ", timeout: .seconds(30))
        #expect(watch.stdout.contains("another note of y"), "\(watch.stdout)")
        // notes itself now finds the store of y.
        let listed = try await Subprocess.run(Products.path("notes"), ["list", "--config", a.configPath])
        #expect(listed.stdout.contains("a note of y") && !listed.stdout.contains("a note of x"), "\(listed.stdout)")
    }

    @Test("unsaved changes at will-change are saved into the old account, or discarded, as the app chose")
    func unsavedChangesPolicy() async throws {
        let (cluster, a, b, c) = try await accountCluster("policy")
        defer { terminate(cluster) }
        let app = try AccountContainer(accounts: a.accountStores, schema: cluster.schema)
        defer { app.close() }
        app.storesWillChangePolicy = .save(author: "app")
        do {
            let context = try #require(app.viewContext)
            try context.insert(TestNote(title: "unsaved in x at the switch", rank: 1))
        }
        #expect(try await a.syncctl(["account", "switch", "y"]).status == 0)
        try await awaitTitles(b, ["unsaved in x at the switch"])

        app.storesWillChangePolicy = .discard
        try await eventually(within: .seconds(30), "the app holds y's store") { app.current()?.account == "y" }
        do {
            let context = try #require(app.viewContext)
            try context.insert(TestNote(title: "discarded in y at the switch", rank: 2))
        }
        #expect(try await a.syncctl(["account", "switch", "x"]).status == 0)
        #expect(try await c.syncctl(["trigger"]).status == 0)
        #expect(try titles(c).isEmpty, "a discarded change is nowhere")
        #expect(try titles(a) == ["unsaved in x at the switch"])
    }
}
}
