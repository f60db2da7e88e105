import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// Sealed accounts with real daemons (`docs/security.md`): a key made by `logsync seal new`, two syncd
/// processes that converge through a shared folder holding nothing readable, a node given another key
/// that stops at start with nothing applied, and a node without a key that refuses what it cannot open.
@Suite("sealed accounts with real syncd processes")
struct SealedDaemonTests {
    @Test("two sealed daemons converge and leave no plaintext in the folder; the wrong key stops at start, no key refuses")
    func sealedDaemons() async throws {
        let cluster = try cluster("sealed")
        let keyFile = cluster.directory.file("account.key"), otherKey = cluster.directory.file("other.key")
        for file in [keyFile, otherKey] {
            let made = try await Subprocess.run(Products.path("logsync"), ["seal", "new", file])
            #expect(made.status == 0 && made.stdout.contains("fingerprint: "), "\(made)")
        }
        func sealed(_ file: String) -> [String: [String]] { ["seal": ["enabled = true", "key_file = \"\(file)\""]] }
        let a = try cluster.addNode("a", tables: sealed(keyFile)), b = try cluster.addNode("b", tables: sealed(keyFile))
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        var secrets: [String] = []
        for (index, node) in [a, b].enumerated() {
            try node.openStore().write(author: "sealed-author-\(index)") { tx in
                for i in 0..<5 {
                    let secret = "sealed-secret-\(node.name)-\(i)-\(UUID().uuidString.prefix(6))"
                    secrets.append(secret)
                    try tx.insert("Note", note(secret))
                }
            }
        }
        for node in [a, b] { #expect(try await node.syncctl(["trigger"]).status == 0) }
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 10)
        // Nothing readable in the shared folder, whatever file it is.
        let enumerator = FileManager.default.enumerator(atPath: cluster.shared)!
        var files = 0
        while let path = enumerator.nextObject() as? String {
            let full = cluster.shared + "/" + path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: full))
            files += 1
            let found = PlaintextSearch.found(secrets + ["sealed-author-0", "sealed-author-1"], in: Array(bytes))
            #expect(found.isEmpty, "readable in \(path): \(found)")
        }
        #expect(files >= 2)
        // Each node shows its own signing key, and the other's as it verified it: the same fingerprints.
        let (fromA, fromB) = (try await a.syncctl(["devices", "list", "--json"]), try await b.syncctl(["devices", "list", "--json"]))
        func devices(_ text: String) throws -> [String: Any] { try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:] }
        let (listA, listB) = (try devices(fromA.stdout), try devices(fromB.stdout))
        let thisA = listA["this"] as? [String: Any], thisB = listB["this"] as? [String: Any]
        let othersA = listA["others"] as? [[String: Any]] ?? [], othersB = listB["others"] as? [[String: Any]] ?? []
        #expect(listA["sealed"] as? Bool == true && listA["account_key"] as? String == listB["account_key"] as? String, "\(fromA)")
        #expect(othersA.count == 1 && othersA.first?["fingerprint"] as? String == thisB?["fingerprint"] as? String, "\(fromA) \(fromB)")
        #expect(othersB.count == 1 && othersB.first?["fingerprint"] as? String == thisA?["fingerprint"] as? String, "\(fromA) \(fromB)")
        #expect(othersA.first?["node"] as? String == b.nodeID && (othersA.first?["verified_through"] as? Int ?? 0) >= 1)
        let text = try await a.syncctl(["devices"])
        #expect(text.status == 0 && text.stdout.contains("sealed, account key") && text.stdout.contains(b.nodeID ?? "?"), "\(text)")
        // Another key: syncd stops at start, naming the keys, and applies nothing.
        let c = try cluster.addNode("c", tables: sealed(otherKey))
        await #expect(throws: (any Error).self) { try await c.start(timeout: .seconds(30)) }
        _ = try? await c.waitForExit(timeout: .seconds(30))
        #expect(c.log.contains("sealed under account key") && c.log.contains("recovery phrase"), "\(c.log)")
        #expect(try c.openStore().read("SELECT count(*) FROM Note") == [[.integer(0)]])
        // No key at all: it runs, and refuses every segment with why.
        let d = try cluster.addNode("d")
        try await d.start()
        defer { d.process?.process.terminate() }
        #expect(try await d.syncctl(["trigger"]).status == 0)
        let list = try await d.syncctl(["quarantine", "list"])
        #expect(list.stdout.contains("it is sealed"), "\(list)")
        // The same reason in peers and the journal.
        let peers = try await d.syncctl(["peers"])
        #expect(peers.stdout.contains("it is sealed"), "\(peers)")
        try await d.awaitLog("it is sealed")
        #expect(try d.openStore().read("SELECT count(*) FROM Note") == [[.integer(0)]])
        let plainDevices = try await d.syncctl(["devices"])
        #expect(plainDevices.status == 0 && plainDevices.stdout.contains("is not sealed"), "\(plainDevices)")
        for node in [a, b, d] { #expect(try await node.stop() == 0, "\(node.log)") }
    }
}
