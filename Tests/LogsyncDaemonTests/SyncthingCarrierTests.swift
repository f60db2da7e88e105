import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// Two real `syncd` processes, each with a shared folder of its own that two real Syncthing instances
/// keep in step (`SyncthingPair`: loopback only, discovery and relays off), each daemon asking its
/// Syncthing to scan after every publish (`[syncthing]`, docs/carriers.md).
@Suite("Syncthing as the carrier", .serialized)
struct SyncthingCarrierTests {
    /// The `[syncthing]` lines for a node using instance `index` of `pair`; with `folderID`, the
    /// folder is named, else found by path.
    static func syncthingLines(_ pair: SyncthingPair, _ index: Int, folderID: String? = nil) throws -> [String] {
        ["", "[syncthing]", "url = \"\(pair.instance(index).url)\"", "api_key_file = \"\(try pair.apiKeyFile(index))\""]
            + (folderID.map { ["folder_id = \"\($0)\""] } ?? [])
    }

    /// How many of `store`'s history transactions came from `origin`: each exported one must be
    /// imported exactly once.
    static func imported(_ store: Store, from origin: SyncdNode) throws -> Int {
        try store.history(filter: HistoryFilter(origins: [.remote(try #require(origin.nodeID))])).count
    }

    static func syncthingStatus(_ node: SyncdNode) async throws -> [String: Any] {
        try #require(try await node.status()["syncthing"] as? [String: Any], "status --json has a 'syncthing' object")
    }

    @Test(
        "writes both ways converge through Syncthing, each imported once; a Syncthing stopped and restarted mid-run loses nothing",
        .enabled(if: Tools.installed("syncthing"), "syncthing is not installed (scripts/install-deps.sh installs it)"),
        .timeLimit(.minutes(3)))
    func convergeThroughSyncthing() async throws {
        let cluster = try SyncdCluster("st", schema: daemonTestSchema)
        // SyncthingPair blocks its thread while it waits (with deadlines): off the cooperative pool.
        let pair = try await onOwnThread { try SyncthingPair(directory: cluster.directory) }
        defer { pair.stopAll() }
        try await onOwnThread { try pair.start() }

        // A long rescan interval: what arrives is seen by inotify on the folder Syncthing writes into.
        let a = try cluster.addNode(
            "a", rescanIntervalMilliseconds: 60_000, sharedFolder: pair.instance(0).folder, extra: try Self.syncthingLines(pair, 0))
        let b = try cluster.addNode(
            "b", rescanIntervalMilliseconds: 60_000, sharedFolder: pair.instance(1).folder,
            extra: try Self.syncthingLines(pair, 1, folderID: SyncthingPair.folderID))
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        let storeA = try a.openStore(), storeB = try b.openStore()

        for i in 0..<10 {
            try storeA.write(author: "a") { try $0.insert("Note", note("a\(i)")) }
            try storeB.write(author: "b") { try $0.insert("Note", note("b\(i)")) }
        }
        var tables = try await cluster.awaitConvergence(timeout: .seconds(40))
        #expect(tables["Note"]?.count == 20)
        #expect(try Self.imported(storeA, from: b) == 10 && Self.imported(storeB, from: a) == 10, "each transaction imported once")

        // a found its Syncthing folder by path, b was told its id; both scan only their node folder.
        for (node, store) in [(a, storeA), (b, storeB)] {
            let contact = try await Self.syncthingStatus(node)
            #expect(contact["folder_id"] as? String == SyncthingPair.folderID)
            #expect(contact["sub"] as? String == "test/\(store.nodeID)")
            #expect((contact["scans"] as? Int ?? 0) > 0 && contact["failures"] as? Int == 0, "\(contact)")
            #expect((contact["last_answer"] as? String)?.hasPrefix("200 OK") == true, "\(contact)")
        }

        // a's Syncthing goes away: a goes on publishing into its folder, reports the failed scans, and
        // keeps importing nothing twice.
        try await onOwnThread { pair.stop(0) }
        for i in 0..<5 {
            try storeA.write(author: "a") { try $0.insert("Note", note("a while down \(i)")) }
            try storeB.write(author: "b") { try $0.insert("Note", note("b while down \(i)")) }
        }
        try await eventually(within: .seconds(20), "a reports its Syncthing's failure and has published everything") {
            let status = try await a.status()
            let contact = status["syncthing"] as? [String: Any] ?? [:]
            return contact["last_failure"] != nil && contact["last_answer"] as? String == contact["last_failure"] as? String
                && status["pending_segments"] as? Int == 0 && status["pending_transactions"] as? Int == 0
        }
        #expect(try await a.status()["state"] as? String != "backoff", "a failed scan never fails a round")
        let shown = try await a.syncctl(["status"])
        #expect(shown.status == 0 && shown.stdout.contains("syncthing  \(pair.instance(0).url)") && shown.stdout.contains("failing"), "\(shown.stdout)")

        try await onOwnThread {
            try pair.start(0)
            try pair.awaitConnected()
        }
        tables = try await cluster.awaitConvergence(timeout: .seconds(40))
        #expect(tables["Note"]?.count == 30)
        #expect(try Self.imported(storeA, from: b) == 15 && Self.imported(storeB, from: a) == 15, "each transaction imported once")

        // The next publish is scanned again.
        try storeA.write(author: "a") { try $0.insert("Note", note("a after restart")) }
        try await eventually(within: .seconds(20), "a's Syncthing scans again after its restart") {
            let contact = try await Self.syncthingStatus(a)
            return (contact["last_answer"] as? String)?.hasPrefix("200 OK") == true
        }
        tables = try await cluster.awaitConvergence(timeout: .seconds(40))
        #expect(tables["Note"]?.count == 31)
        #expect(try Self.imported(storeB, from: a) == 16)
        try await a.awaitLog("Syncthing did not take the request to scan")
        for node in [a, b] { #expect(try await node.stop() == 0, "clean exit on SIGTERM:\n\(node.log)") }
    }
}
