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

    @Test("a device without the phrase waits, 'syncctl devices approve' lets it in, 'syncctl devices revoke' puts it out: its later writes are refused")
    func approvedThenRevoked() async throws {
        let cluster = try cluster("sealdevices")
        let keyFile = cluster.directory.file("account.key")
        #expect(try await Subprocess.run(Products.path("logsync"), ["seal", "new", keyFile]).status == 0)
        let a = try cluster.addNode("a", tables: ["seal": ["enabled = true", "key_file = \"\(keyFile)\""]])
        let b = try cluster.addNode("b", tables: ["seal": ["enabled = true", "await_approval = true"]])
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        try a.openStore().write { tx in try tx.insert("Note", note("from a")) }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        // b waits, and says how to let it in.
        func devices(_ node: SyncdNode) async throws -> [String: Any] {
            let listed = try await node.syncctl(["devices", "list", "--json"])
            return try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any] ?? [:]
        }
        let waiting = try await devices(b)
        let fingerprint = try #require((waiting["this"] as? [String: Any])?["fingerprint"] as? String)
        #expect(waiting["awaiting_approval"] as? Bool == true, "\(waiting)")
        let refused = try await b.syncctl(["trigger"])
        #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("syncctl devices approve \(fingerprint)"), "\(refused)")
        // a sees b's card, and approves it by the fingerprint b shows.
        try await eventually(within: .seconds(30), "a sees b waiting") {
            _ = try await a.syncctl(["trigger"])
            return ((try await devices(a))["waiting"] as? [[String: Any]] ?? []).contains { $0["fingerprint"] as? String == fingerprint }
        }
        let approved = try await a.syncctl(["devices", "approve", fingerprint])
        #expect(approved.status == 0 && approved.stdout.contains("approved device \(fingerprint)"), "\(approved)")
        try await eventually(within: .seconds(30), "b is let in") { try await b.syncctl(["trigger"]).status == 0 }
        try b.openStore().write { tx in try tx.insert("Note", note("from b")) }
        #expect(try await b.syncctl(["trigger"]).status == 0)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 2)
        // Revoked, b's later writes are refused by a, with why.
        let revoked = try await a.syncctl(["devices", "revoke", try #require(b.nodeID)])
        #expect(revoked.status == 0 && revoked.stdout.contains("key epoch 1"), "\(revoked)")
        try b.openStore().write { tx in try tx.insert("Note", note("from b after its revocation")) }
        _ = try await b.syncctl(["trigger"])
        try await eventually(within: .seconds(30), "a refuses b's write after its revocation") {
            _ = try await a.syncctl(["trigger"])
            return (try await a.syncctl(["quarantine", "list"])).stdout.contains("revoked")
        }
        #expect(try a.tables()["Note"]?.count == 2)
        let listed = try await devices(a)
        #expect((listed["revoked"] as? [[String: Any]] ?? []).contains { $0["fingerprint"] as? String == fingerprint }, "\(listed)")
        for node in [a, b] { #expect(try await node.stop() == 0, "\(node.log)") }
    }

    @Test(
        "a sealed node restored from an old backup and written to takes a new node id and signing key: 0 forks, 0 refused, every write everywhere (found at start, or by a round and remounted)",
        arguments: [false, true])
    func restoredBackup(foundByARound: Bool) async throws {
        let cluster = try cluster("sealrestore")
        let keyFile = cluster.directory.file("account.key")
        #expect(try await Subprocess.run(Products.path("logsync"), ["seal", "new", keyFile]).status == 0)
        let sealed = ["seal": ["enabled = true", "key_file = \"\(keyFile)\""]]
        let a = try cluster.addNode("a", tables: sealed), b = try cluster.addNode("b", tables: sealed)
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        func add(_ titles: [String], to node: SyncdNode) async throws {
            try node.openStore().write { tx in for title in titles { try tx.insert("Note", note(title)) } }
            #expect(try await node.syncctl(["trigger"]).status == 0)
        }
        try await add(["before the backup 0", "before the backup 1"], to: a)
        try await add(["from b"], to: b)
        _ = try await cluster.awaitConvergence()
        let old = try #require(a.nodeID)
        // A backup of a's store, taken while syncd is stopped.
        #expect(try await a.stop() == 0)
        let backup = cluster.directory.file("backup")
        try FileManager.default.createDirectory(atPath: backup, withIntermediateDirectories: false)
        for file in AccountStores.files(of: a.storePath) where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.copyItem(atPath: file, toPath: backup + "/" + URL(fileURLWithPath: file).lastPathComponent)
        }
        try await a.start()
        try await add(["after the backup 0", "after the backup 1"], to: a)
        _ = try await cluster.awaitConvergence()
        // a's disk is lost; its store comes back from the backup, and is written to.
        #expect(try await a.stop() == 0)
        a.closeStore()
        for file in AccountStores.files(of: a.storePath) { try? FileManager.default.removeItem(atPath: file) }
        for name in try FileManager.default.contentsOfDirectory(atPath: backup) {
            try FileManager.default.copyItem(atPath: backup + "/" + name, toPath: URL(fileURLWithPath: a.storePath).deletingLastPathComponent().path + "/" + name)
        }
        try await a.start(environment: foundByARound ? ["LOGSYNC_FAULT": "mount.carrier-unreachable"] : [:])
        try await a.awaitLog("took the new node id")
        if foundByARound {
            // The round that found it does not go on with the old id: the store is mounted again under the new one.
            try await eventually(within: .seconds(30), "a syncs again under its new node id") {
                (try await a.status()["node"] as? String).map { $0 != old && !$0.isEmpty } ?? false
            }
        }
        let new = try #require(a.nodeID)
        #expect(new != old)
        try await add(["after the restore"], to: a)
        #expect(try await b.syncctl(["trigger"]).status == 0)
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 6, "\(tables["Note"] ?? [])")
        for node in [a, b] {
            let store = try node.openStore()
            #expect(try store.sync.quarantined().isEmpty && store.sync.refusals().isEmpty, "\(node.name): \(node.log)")
        }
        // b verified the new node under a new signing key, and the old node's chain as it was.
        let devices = try await b.syncctl(["devices", "list", "--json"])
        #expect(devices.stdout.contains(new) && devices.stdout.contains(old), "\(devices)")
        for node in [a, b] { #expect(try await node.stop() == 0, "\(node.log)") }
    }

    @Test("a plain account sealed in place, one daemon after the other while both write ([seal] from_plain): every note on both, nothing refused, then nothing plain in the folder")
    func sealedInPlace() async throws {
        let cluster = try cluster("sealinplace")
        // Each device derives the key from the same passphrase on its own (`logsync seal derive`).
        var fingerprints: Set<String> = []
        for name in ["a", "b"] {
            let derive = try Subprocess(Products.path("logsync"), ["seal", "derive", cluster.directory.file("\(name).key"), "--account", "default"])
            try derive.send("a long passphrase of several words\n")
            try derive.closeInput()
            #expect(try await derive.waitForExit(timeout: .seconds(60)) == 0, "\(derive.stderr)")
            fingerprints.formUnion(derive.stdout.split(separator: "\n").filter { $0.hasPrefix("fingerprint: ") }.map(String.init))
        }
        #expect(fingerprints.count == 1, "both devices derived the same key: \(fingerprints)")
        let retention = ["retention": ["progress_interval_ms = 200", "prune_interval_ms = 500"]]
        let a = try cluster.addNode("a", tables: retention), b = try cluster.addNode("b", tables: retention)
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        var titles: [String] = []
        func add(_ title: String, to node: SyncdNode) async throws {
            try node.openStore().write { tx in try tx.insert("Note", note(title)) }
            titles.append(title)
            #expect(try await node.syncctl(["trigger"]).status == 0)
        }
        func seal(_ node: SyncdNode) async throws {
            #expect(try await node.stop() == 0, "\(node.log)")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: node.configPath))
            try handle.seekToEnd()
            let keyFile = cluster.directory.file("\(node.name).key")
            try handle.write(contentsOf: Data("\n[seal]\nenabled = true\nkey_file = \"\(keyFile)\"\nfrom_plain = true\n".utf8))
            try handle.close()
            try await node.start()
        }
        for index in 0..<3 {
            try await add("plain-secret-a-\(index)", to: a)
            try await add("plain-secret-b-\(index)", to: b)
        }
        _ = try await cluster.awaitConvergence()
        // a is sealed; b writes on unsealed, and a reads it.
        try await seal(a)
        try await add("sealed-secret-a", to: a)
        try await add("plain-secret-b-after", to: b)
        try await eventually(within: .seconds(60), "a reads what b wrote unsealed") {
            _ = try await a.syncctl(["trigger"])
            return try a.openStore().read("SELECT count(*) FROM Note WHERE title = 'plain-secret-b-after'") == [[.integer(1)]]
        }
        try await seal(b)
        try await add("sealed-secret-b", to: b)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == titles.count, "\(tables["Note"] ?? [])")
        for node in [a, b] {
            let store = try node.openStore()
            #expect(try store.sync.quarantined().isEmpty && store.sync.refusals().isEmpty, "\(node.name): \(node.log)")
        }
        // Each node prunes its plain segments once both applied them and both sealed baselines cover them.
        func plainFiles() throws -> [String] {
            var plain: [String] = []
            let enumerator = FileManager.default.enumerator(atPath: cluster.shared)!
            while let path = enumerator.nextObject() as? String {
                let full = cluster.shared + "/" + path
                var isDirectory: ObjCBool = false
                guard !URL(fileURLWithPath: path).lastPathComponent.hasPrefix("."),
                    FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue
                else { continue }
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: full)))
                if !SealedHeader.isSealed(bytes) || !PlaintextSearch.found(titles, in: bytes).isEmpty { plain.append(path) }
            }
            return plain
        }
        try await eventually(within: .seconds(90), "nothing plain left in the folder") {
            for node in [a, b] {
                _ = try await node.syncctl(["trigger"])
                _ = try await node.syncctl(["prune"])
            }
            return try plainFiles().isEmpty
        }
        for node in [a, b] { #expect(try await node.stop() == 0, "\(node.log)") }
    }
}
