import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Testing

/// Writes one note to the store a node has active now.
func add(_ title: String, to node: SyncdNode) throws {
    try node.withActiveStore { store in try store.write(author: node.name) { try $0.insert("Note", note(title)) } }
}

/// The titles of the notes in a node's active store, read with a plain SQLite connection (opening a
/// `Store` registers its schema, a write that would wake the daemon).
func titles(_ node: SyncdNode) throws -> Set<String> {
    let connection = try ForeignConnection(path: try node.activeStorePath())
    return Set(try connection.execute("SELECT title FROM Note").compactMap { row -> String? in
        if case .text(let title) = row[0] { return title }
        return nil
    })
}

/// How many history transactions a node's active store holds.
func transactionCount(_ node: SyncdNode) throws -> Int {
    try node.withActiveStore { store in try store.history(after: .zero, limit: 1_000_000).count }
}

/// Waits until a node's active store holds exactly `expected`: the daemons move changes by themselves
/// (commits and arrivals wake them).
func awaitTitles(_ node: SyncdNode, _ expected: Set<String>, within timeout: Duration = .seconds(30)) async throws {
    try await eventually(within: timeout, every: .milliseconds(20), "\(node.name) holds \(expected.sorted()); it holds \((try? titles(node))?.sorted() ?? []); log:\n\(node.log)") {
        try titles(node) == expected
    }
}

/// `syncctl account status --json` of a node.
func accountStatus(_ node: SyncdNode) async throws -> [String: Any] {
    let result = try await node.syncctl(["account", "status", "--json"])
    guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
        throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
    return object
}

/// Nodes a and b on account x, c on account y, all started.
func accountCluster(_ label: String) async throws -> (cluster: SyncdCluster, a: SyncdNode, b: SyncdNode, c: SyncdNode) {
    let cluster = try cluster(label)
    let a = try cluster.addNode("a", account: "x"), b = try cluster.addNode("b", account: "x"), c = try cluster.addNode("c", account: "y")
    for node in [a, b, c] { try await node.start() }
    return (cluster, a, b, c)
}

/// Ends the daemons a test started.
func terminate(_ cluster: SyncdCluster) {
    for node in cluster.nodes { node.process?.process.terminate() }
}

/// Every account test, one at a time: each runs three real daemons, and several clusters at once would
/// only slow each other (and every other suite) down.
@Suite("accounts", .serialized)
struct AccountTests {}

extension AccountTests {
@Suite("account switch with real syncd processes")
struct AccountSwitchTests {
    @Test("A switches from X to Y and back: each time exactly that account's data, rebuilt from its logs; what A wrote just before reaches the old account's nodes")
    func switchAndBack() async throws {
        let (cluster, a, b, c) = try await accountCluster("acct")
        defer { terminate(cluster) }
        try add("x from a", to: a)
        try add("x from b", to: b)
        try add("y from c", to: c)
        try await awaitTitles(a, ["x from a", "x from b"])
        try await awaitTitles(b, ["x from a", "x from b"])

        // A watch that asks for account events gets them; one that does not (an older client) never does.
        let watch = try Subprocess(Products.path("syncctl"), ["watch", "--json", "--socket", a.socketPath])
        defer { watch.process.terminate() }
        let older = try UnixSocket.connect(to: a.socketPath)
        try older.write(Array(#"{"v": 1, "id": 1, "command": "watch"}"#.utf8) + [10])
        try await eventually(within: .seconds(30), "syncctl watch is subscribed") {
            try await a.syncctl(["trigger"]).status == 0 && watch.stdout.contains("sync_finished")
        }

        try add("x from a just before the switch", to: a)
        let switchAsked = Int64(WallClock.milliseconds())
        let toY = try await a.syncctl(["account", "switch", "y"])
        #expect(toY.status == 0, "\(toY.stderr)\n\(a.log)")
        #expect(try titles(a) == ["y from c"], "A holds exactly Y's data")
        try await a.awaitLog("rebuilding the store of account y: 1 of 1 transactions applied")
        let xStore = a.storePath
        #expect(try a.activeStorePath() != xStore)
        _ = try await watch.line(containing: "stores_did_change")
        #expect(watch.stdout.contains("stores_will_change"), "\(watch.stdout)")
        // The older client's events, read until one of a round that ended after the switch was asked for:
        // everything the switch could have sent it comes before that one.
        older.setReceiveTimeout(milliseconds: 30_000)
        var olderReader = LineReader(older)
        var olderLines: [String] = []
        while let line = try? olderReader.next().map({ String(decoding: $0, as: UTF8.self) }) {
            olderLines.append(line)
            let event = (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["event"] as? [String: Any]
            if event?["kind"] as? String == "sync_finished", ((event?["at"] as? NSNumber)?.int64Value ?? 0) > switchAsked { break }
        }
        #expect(olderLines.contains { $0.contains("sync_finished") }, "the older watch client still gets events: \(olderLines)")
        #expect(!olderLines.contains { $0.contains("stores_") || $0.contains("switch_progress") }, "\(olderLines)")
        try await awaitTitles(b, ["x from a", "x from b", "x from a just before the switch"])
        // Everything in X's old store was shipped and nobody holds it: it is gone.
        try await eventually(within: .seconds(30), "A's retired store of X is deleted") { !FileManager.default.fileExists(atPath: xStore) }

        try add("y from a", to: a)
        try await awaitTitles(c, ["y from c", "y from a"])
        try add("y from a just before switching back", to: a)
        let toX = try await a.syncctl(["account", "switch", "x", "--json"])
        #expect(toX.status == 0, "\(toX.stderr)\n\(a.log)")
        #expect(try titles(a) == ["x from a", "x from b", "x from a just before the switch"], "A holds exactly X's data, rebuilt from X's logs")
        try await awaitTitles(c, ["y from c", "y from a", "y from a just before switching back"])
        // Rebuilt from logs: every transaction of X once, as on B, which never left X.
        try await awaitTitles(b, ["x from a", "x from b", "x from a just before the switch"])
        #expect(try transactionCount(a) == transactionCount(b))

        let status = try await accountStatus(a)
        #expect(status["active"] as? String == "x")
        #expect(status["switching"] == nil)
        let list = try await a.syncctl(["account", "list"])
        #expect(list.status == 0 && list.stdout.contains("active") && list.stdout.contains("x"), "\(list.stdout)")
        // The status of syncd carries the account state too.
        let full = try await a.status()
        #expect(full["account"] as? String == "x")
        #expect((full["accounts"] as? [String: Any])?["store"] as? String == (try a.activeStorePath()))
    }

    @Test("a switch while the old account's folder is unreachable keeps its unshipped changes and ships them once it is back")
    func offlineSwitchKeepsChanges() async throws {
        let (cluster, a, b, c) = try await accountCluster("offline")
        defer { terminate(cluster) }
        try add("x shipped", to: a)
        try add("y from c", to: c)
        try await awaitTitles(b, ["x shipped"])

        // A's folder in X becomes unusable: nothing A writes can be published there.
        let folder = cluster.shared + "/x/" + (try #require(a.nodeID))
        try FileManager.default.moveItem(atPath: folder, toPath: cluster.shared + "/x-aside")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: folder))
        try add("x written offline", to: a)
        let xStore = a.storePath
        a.closeStore()

        let switched = try await a.syncctl(["account", "switch", "y"])
        #expect(switched.status == 0, "\(switched.stderr)\n\(a.log)")
        #expect(try titles(a) == ["y from c"])
        let retained = try #require((try await accountStatus(a))["retained"] as? [[String: Any]])
        #expect(retained.count == 1 && retained.first?["path"] as? String == xStore, "\(retained)")
        #expect((retained.first?["reason"] as? String)?.contains("not yet shipped") == true, "\(retained)")
        #expect(FileManager.default.fileExists(atPath: xStore), "a store with unshipped changes is never deleted")
        #expect(try !titles(b).contains("x written offline"))

        // The folder comes back: the retained store ships, then goes.
        try FileManager.default.removeItem(atPath: folder)
        try FileManager.default.moveItem(atPath: cluster.shared + "/x-aside", toPath: folder)
        try await awaitTitles(b, ["x shipped", "x written offline"])
        try await eventually(within: .seconds(20), every: .milliseconds(50), "the retained store is shipped and deleted; log:\n\(a.log)") {
            let status = try await accountStatus(a)
            return (status["retained"] as? [Any])?.isEmpty == true && !FileManager.default.fileExists(atPath: xStore)
        }
    }

    @Test("a switch away from a store found damaged keeps that store, ships nothing from it, and syncing resumes on the new account")
    func switchAwayFromDamagedStore() async throws {
        let cluster = try cluster("damaged")
        defer { terminate(cluster) }
        let a = try cluster.addNode("a", account: "x"), c = try cluster.addNode("c", account: "y")
        for node in [a, c] { try await node.start() }
        try add("y from c", to: c)
        try a.withActiveStore { store in
            try store.write(author: "a") { tx in
                for i in 0..<3_000 { try tx.insert("Note", note("x \(i) " + String(repeating: "x", count: 100))) }
            }
        }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let xStore = try a.activeStorePath()
        a.closeStore()
        // A restart leaves the notes in the database file (syncd checkpoints when it stops); then damage.
        #expect(try await a.stop() == 0)
        try await a.start()
        try Damage.overwriteMiddlePage(of: xStore)
        #expect(try await a.syncctl(["check"]).status == ExitStatus.dataError)
        #expect(try await a.status()["state"] as? String == "halted")

        let switched = try await a.syncctl(["account", "switch", "y"])
        #expect(switched.status == 0, "\(switched.stderr)\n\(a.log)")
        #expect(try titles(a) == ["y from c"])
        let status = try await a.status()
        #expect(status["state"] as? String != "halted", "the halt was about the store let go of: \(status)")
        let trigger = try await a.syncctl(["trigger"])
        #expect(trigger.status == 0, "syncing resumes on the new account's store: \(trigger)")
        let retained = try #require((try await accountStatus(a))["retained"] as? [[String: Any]])
        #expect(retained.count == 1 && retained.first?["path"] as? String == xStore, "\(retained)")
        #expect((retained.first?["reason"] as? String)?.contains("damaged") == true, "\(retained)")
        #expect(FileManager.default.fileExists(atPath: xStore), "a damaged store is never deleted")
        try await a.awaitLog("was found damaged, so its pending changes are not shipped")
        // Switching back builds X's store from its logs, and the damaged one stays where it is.
        #expect(try await a.syncctl(["account", "switch", "x"]).status == 0)
        #expect(try titles(a).count == 3_000)
        let rebuilt = try a.activeStorePath()
        #expect(FileManager.default.fileExists(atPath: xStore) && rebuilt != xStore)
    }

    @Test("logout keeps the data as the local store, or starts it empty; the local store does not sync; logging in again rebuilds from the logs")
    func logoutKeepAndRemove() async throws {
        let (cluster, a, b, _) = try await accountCluster("logout")
        defer { terminate(cluster) }
        try add("x from a", to: a)
        try add("x from b", to: b)
        try await awaitTitles(a, ["x from a", "x from b"])

        // Under systemd, the unit's status line says which step the switch is at.
        let receiver = try NotifyReceiver(path: cluster.directory.file("notify.sock"))
        #expect(try await a.stop() == 0)
        try await a.start(environment: ["NOTIFY_SOCKET": receiver.path])
        let kept = try await a.syncctl(["account", "logout"])
        #expect(kept.status == 0, "\(kept.stderr)\n\(a.log)")
        let exporting = try await receiver.await("STATUS=switching accounts: account x → the local store, exporting")
        try await receiver.await("STATUS=idle", after: exporting.index)
        #expect(try titles(a) == ["x from a", "x from b"], "--keep: the local store is a copy of the account's data")
        #expect((try await accountStatus(a))["active"] == nil)
        let trigger = try await a.syncctl(["trigger"])
        #expect(trigger.status == 1 && trigger.stderr.contains("no account is active"), "\(trigger.stderr)")
        try add("local only", to: a)

        #expect(try await a.syncctl(["account", "switch", "x"]).status == 0)
        #expect(try titles(a) == ["x from a", "x from b"], "logging in builds the account's store from its logs; local data stays local")
        try add("x from a after login", to: a)
        try await awaitTitles(b, ["x from a", "x from b", "x from a after login"])

        let removed = try await a.syncctl(["account", "logout", "--remove"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try titles(a).isEmpty, "--remove: the local store starts empty")
        let list = try await a.syncctl(["account", "list", "--json"])
        let stores = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(stores.first?["role"] as? String == "active" && stores.first?["account"] == nil, "\(stores)")
        // Everything shipped and let go of: the account's store and the previous local store are gone.
        try await eventually(within: .seconds(20), every: .milliseconds(50), "only the new local store is left; log:\n\(a.log)") {
            try FileManager.default.contentsOfDirectory(atPath: a.accountStores.folder).filter { $0.hasSuffix(".sqlite") } == [
                URL(fileURLWithPath: try a.activeStorePath()).lastPathComponent
            ]
        }
        #expect(try !titles(b).contains("local only"))
    }
}
}
