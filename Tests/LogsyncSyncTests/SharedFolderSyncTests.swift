import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncPlatform
import LogsyncTestKit
import LogsyncTransport
import Testing

@Suite("Sync through a shared folder")
struct SharedFolderSyncTests {
    /// Random writes on three stores, syncs at random moments with small segments; then everyone syncs
    /// until nothing moves. Every store equals the reference decoded from the files in the folder.
    @Test("three stores converge to the reference decoded from the shared folder", arguments: [UInt64(1), 2, 3, 4])
    func threeStoresConverge(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let cluster = try SyncCluster("conv")
        let stores = try ["a", "b", "c"].map { try cluster.store($0) }
        let engines = try stores.map { try cluster.engine($0, maximumChanges: 3) }
        for _ in 0..<40 {
            let store = stores.randomElement(using: &rng)!
            try SyncCluster.randomWrite(store, using: &rng)
            if Int.random(in: 0..<3, using: &rng) == 0 { _ = try engines.randomElement(using: &rng)!.sync() }
        }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        let expected = try cluster.reference()
        for store in stores {
            #expect(try store.syncedTables() == expected, "seed \(seed): \(store.nodeID) differs")
            #expect(try store.sync.quarantined().isEmpty)
        }
        let imported = try stores[0].history(filter: HistoryFilter(origins: [.remote(stores[1].nodeID)]), limit: 100_000).count
        #expect(UInt64(imported) <= (try stores[1].sync.exportedSequence()), "never more imported transactions than exported")
    }

    @Test("a second sync applies nothing again, and the history holds each imported transaction once")
    func redeliveryIsExactlyOnce() throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a"), b = try cluster.store("b")
        let ea = try cluster.engine(a, maximumChanges: 1), eb = try cluster.engine(b)
        for i in 0..<5 { try a.write(author: "alice") { try $0.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(i)")]) } }
        #expect(try ea.sync().published.count == 5)
        let first = try eb.sync()
        #expect(first.applied.count == 5)
        #expect(first.appliedTransactions == 5)
        let second = try eb.sync()
        #expect(second.applied.isEmpty)
        // A fresh engine (as after a restart) re-verifies what it sees, and still applies nothing.
        #expect(try cluster.engine(b).sync().applied.isEmpty)
        let imported = try b.history(filter: HistoryFilter(origins: [.remote(a.nodeID)]))
        #expect(imported.count == 5)
        #expect(imported.allSatisfy { $0.author == "alice" })
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(5)]])
        // No echo: b exported nothing, and a applies nothing back.
        #expect(try b.sync.exportedSequence() == 0)
        #expect(try ea.sync().applied.isEmpty)
    }

    @Test("a missing segment makes the reader wait; the rest applies in order once it arrives")
    func gapWaits() throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a"), b = try cluster.store("b")
        for i in 0..<3 {
            try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(i)")]) }
            _ = try cluster.engine(a, maximumChanges: 1).sync()
        }
        let source = cluster.shared + "/default/" + a.nodeID
        let files = try FileManager.default.contentsOfDirectory(atPath: source).filter { $0.hasSuffix(".lseg") }.sorted()
        #expect(files.count == 3)
        let other = cluster.directory.file("other")
        try FileManager.default.createDirectory(atPath: other + "/default/" + a.nodeID, withIntermediateDirectories: true)
        for file in files.dropFirst() { try FileManager.default.copyItem(atPath: source + "/" + file, toPath: other + "/default/" + a.nodeID + "/" + file) }
        let eb = try cluster.engine(b, shared: other)
        let waiting = try eb.sync()
        #expect(waiting.applied.isEmpty)
        #expect(waiting.waiting[NodeID(a.nodeID)] == 1)
        try FileManager.default.copyItem(atPath: source + "/" + files[0], toPath: other + "/default/" + a.nodeID + "/" + files[0])
        let done = try eb.sync()
        #expect(done.applied.map(\.firstSequence) == [1, 2, 3])
        #expect(try b.read("SELECT title FROM Note ORDER BY title") == [[.text("n0")], [.text("n1")], [.text("n2")]])
    }

    @Test("torn, bit-flipped, temporary and conflict-copy files are reported and never applied")
    func hostileFiles() throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a"), b = try cluster.store("b")
        for i in 0..<2 { try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(i)")]) } }
        _ = try cluster.engine(a, maximumChanges: 1).sync()
        let source = cluster.shared + "/default/" + a.nodeID
        let files = try FileManager.default.contentsOfDirectory(atPath: source).filter { $0.hasSuffix(".lseg") }.sorted()
        let good = try files.map { try Data(contentsOf: URL(fileURLWithPath: source + "/" + $0)) }

        let other = cluster.directory.file("other")
        let folder = other + "/default/" + a.nodeID
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try good[0].prefix(good[0].count / 2).write(to: URL(fileURLWithPath: folder + "/" + files[0]))  // torn
        var flipped = good[1]
        flipped[flipped.count / 2] ^= 0x10
        try flipped.write(to: URL(fileURLWithPath: folder + "/" + files[1]))  // bit flip
        let decoys = [
            "." + files[0] + ".x1y2.tmp", ".syncthing." + files[0] + ".tmp", "~" + files[0],
            files[0].replacingOccurrences(of: ".lseg", with: ".sync-conflict-20261121-123456-ABCDEFG.lseg"),
            files[0].replacingOccurrences(of: ".lseg", with: " (Alice's conflicted copy 2026-11-21).lseg"),
            "notes.txt", "1-1.lseg",
        ]
        for decoy in decoys { try good[0].write(to: URL(fileURLWithPath: folder + "/" + decoy)) }

        let eb = try cluster.engine(b, shared: other)
        let first = try eb.sync()
        #expect(first.applied.isEmpty)
        #expect(first.rejected.map(\.name.firstSequence) == [1])
        #expect(first.ignored.count == decoys.count)
        #expect(Set(first.ignored.map(\.reason)) == [.temporary, .conflictCopy, .unknownName])
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(0)]])

        try good[0].write(to: URL(fileURLWithPath: folder + "/" + files[0]))
        let second = try eb.sync()
        #expect(second.applied.map(\.firstSequence) == [1])
        #expect(second.rejected.map(\.name.firstSequence) == [2])
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(1)]])

        try good[1].write(to: URL(fileURLWithPath: folder + "/" + files[1]))
        #expect(try eb.sync().applied.map(\.firstSequence) == [2])
        #expect(try b.syncedTables() == a.syncedTables())
        // Nothing of a's was deleted by the reader.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).count == 2 + decoys.count)
    }

    @Test("Syncthing's own files (.stfolder, .stignore, .stversions/, .syncthing.*.tmp) and its conflict copies are ignored, reported, never applied")
    func syncthingFiles() throws {
        let cluster = try SyncCluster("stfiles")
        let a = try cluster.store("a"), b = try cluster.store("b")
        try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "n"]) }
        _ = try cluster.engine(a).sync()
        // The account folder is what Syncthing shares here: its marker, ignore file and versions folder
        // sit beside the node folders.
        let account = cluster.shared + "/default"
        let folder = account + "/" + a.nodeID
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasSuffix(".lseg") })
        let bytes = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + segment))
        try FileManager.default.createDirectory(atPath: account + "/.stfolder", withIntermediateDirectories: false)
        try "// logsync\n.*.lseg.*.tmp\n".write(toFile: account + "/.stignore", atomically: false, encoding: .utf8)
        // A versioned copy of a's segment with different bytes, named as Syncthing's versioning names it.
        let versions = account + "/.stversions/" + a.nodeID
        try FileManager.default.createDirectory(atPath: versions, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 64).write(to: URL(fileURLWithPath: versions + "/" + segment))
        let decoys = [
            ".syncthing." + segment + ".tmp",
            segment.replacingOccurrences(of: ".lseg", with: ".sync-conflict-20261121-123456-ABCDEFG.lseg"),
        ]
        for decoy in decoys { try bytes.write(to: URL(fileURLWithPath: folder + "/" + decoy)) }

        let report = try cluster.engine(b).sync()
        #expect(report.applied.map(\.firstSequence) == [1])
        #expect(report.rejected.isEmpty && report.quarantined.isEmpty)
        let ignored = Dictionary(uniqueKeysWithValues: report.ignored.map { (URL(fileURLWithPath: $0.path).lastPathComponent, $0.reason) })
        #expect(ignored[".stfolder"] == .temporary && ignored[".stignore"] == .temporary && ignored[".stversions"] == .temporary, "\(report.ignored)")
        #expect(ignored[decoys[0]] == .temporary && ignored[decoys[1]] == .conflictCopy, "\(report.ignored)")
        #expect(report.ignored.allSatisfy { !$0.reason.isSuspicious }, "the ordinary traces of a sync tool are not flagged")
        #expect(try b.syncedTables() == a.syncedTables())
        // Nothing of Syncthing's was touched.
        #expect(FileManager.default.fileExists(atPath: versions + "/" + segment) && FileManager.default.fileExists(atPath: account + "/.stfolder"))
    }

    @Test("FIFOs, sockets and links named like segments, and linked node folders, are reported with what they are and never opened")
    func notRegularFiles() throws {
        let cluster = try SyncCluster("odd")
        let a = try cluster.store("a"), b = try cluster.store("b")
        try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "n"]) }
        _ = try cluster.engine(a).sync()
        let account = cluster.shared + "/default/"
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: account + a.nodeID).first)
        let name = "00000000000000000001-00000000000000000001.lseg"
        func ghost() throws -> (node: String, folder: String) {
            let node = UUID().uuidString.lowercased()
            try FileManager.default.createDirectory(atPath: account + node, withIntermediateDirectories: false)
            return (node, account + node)
        }
        let fifo = try ghost(), link = try ghost()
        #expect(mkfifo(fifo.folder + "/" + name, 0o600) == 0)
        try FileManager.default.createSymbolicLink(atPath: link.folder + "/" + name, withDestinationPath: account + a.nodeID + "/" + segment)
        let linkedFolder = UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: account + linkedFolder, withDestinationPath: account + a.nodeID)

        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        let scan = try transport.scan(excluding: NodeID(b.nodeID))
        #expect(scan.segments.map(\.node.rawValue) == [a.nodeID], "only the regular file is a segment: \(scan.segments)")
        let reasons = Dictionary(uniqueKeysWithValues: scan.ignored.map { ($0.path, $0.reason) })
        #expect(reasons[fifo.folder + "/" + name] == .notRegularFile(.fifo))
        #expect(reasons[link.folder + "/" + name] == .notRegularFile(.symbolicLink))
        #expect(reasons[account + linkedFolder] == .notADirectory(.symbolicLink))
        #expect(scan.ignored.allSatisfy { !$0.path.hasPrefix(account + linkedFolder + "/") }, "the linked folder is not listed")
        // Read by name anyway (a file replaced after the scan): refused at once, never opened.
        let started = ContinuousClock.now
        let error = try #require(throws: TransportError.self) {
            try transport.read(SegmentName(node: NodeID(fifo.node), firstSequence: 1, lastSequence: 1), maximumBytes: 1 << 20)
        }
        #expect(error.code == .notRegularFile && error.message.contains("is a FIFO"), "\(error)")
        // Opening a FIFO for reading blocks until a writer comes: a read that opened it would never return.
        #expect(ContinuousClock.now - started < .seconds(30))

        let report = try cluster.engine(b).sync()
        #expect(report.applied.map(\.node.rawValue) == [a.nodeID], "a's segment applies all the same")
        #expect(report.waiting[NodeID(fifo.node)] == 1)
        #expect(report.waitingReasons[NodeID(fifo.node)]?.contains("is a FIFO named like a segment") == true, "\(report.waitingReasons)")
        #expect(report.waitingReasons[NodeID(link.node)]?.contains("is a symbolic link named like a segment") == true)
        #expect(report.available[NodeID(a.nodeID)] == 1)

        // A FIFO squatting the name of b's own next segment: b cannot publish, says why, and still receives.
        #expect(mkfifo(account + b.nodeID + "/" + name, 0o600) == 0)
        try b.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "from b"]) }
        try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "a again"]) }
        _ = try cluster.engine(a).sync()
        let blocked = try #require(throws: TransportError.self) { try cluster.engine(b).sync() }
        #expect(blocked.code == .conflict && blocked.message.contains("is a FIFO, not a segment"), "\(blocked)")
        #expect(try b.sync.appliedSequence(from: NodeID(a.nodeID)) == 2, "a's new segment was imported all the same")
    }

    @Test("the same node and sequence with different content is quarantined and never merged")
    func divergenceQuarantined() throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a"), b = try cluster.store("b")
        let note = SyncCluster.id()
        try a.write { try $0.insert("Note", ["id": note, "title": "original"]) }
        _ = try cluster.engine(a).sync()
        let eb = try cluster.engine(b)
        #expect(try eb.sync().applied.count == 1)

        // Another machine claiming a's node id writes different history under the same name.
        let path = cluster.shared + "/default/" + a.nodeID + "/" + SegmentName(node: NodeID(a.nodeID), firstSequence: 1, lastSequence: 1).fileName
        let forged = try SegmentEncoder.encode(
            schemaVersion: 1, account: "default", node: NodeID(a.nodeID),
            transactions: [LogTransaction(sequence: 1, timestamp: HLCTimestamp(rawValue: 1 << 40), author: "mallory", contextName: nil,
                                          changes: [LogChange(entity: "Note", primaryKey: note, kind: .update, causalLength: 1, values: ["title": "forged"])])])
        try Data(forged).write(to: URL(fileURLWithPath: path))
        let fresh = try cluster.engine(b)
        let report = try fresh.sync()
        #expect(report.quarantined.map(\.firstSequence) == [1])
        #expect(try b.sync.quarantined().map(\.reason).first?.contains("different content") == true)
        #expect(try b.read("SELECT title FROM Note") == [[.text("original")]])
        // Reported once, not again on every round.
        #expect(try fresh.sync().quarantined.isEmpty)
        #expect(try b.sync.quarantined().count == 1)
    }

    @Test("a write made with the sqlite3 shell on one node reaches the others")
    func shellWriteTravels() async throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a"), b = try cluster.store("b"), c = try cluster.store("c")
        let id = UUID().uuidString.lowercased()
        let result = try await runSQLiteShell(on: a.path, "INSERT INTO Note(id, title, rank) VALUES ('\(id)', 'from the shell', 7)")
        #expect(result.status == 0)
        _ = try cluster.engine(a).sync()
        _ = try cluster.engine(b).sync()
        _ = try cluster.engine(c).sync()
        for store in [b, c] {
            #expect(try store.read("SELECT title, rank FROM Note WHERE id = ?", [.text(id)]) == [[.text("from the shell"), .integer(7)]])
        }
    }

    @Test("a missing shared folder is a clear error with its own exit code, and nothing is created")
    func missingSharedFolder() async throws {
        let cluster = try SyncCluster()
        let a = try cluster.store("a")
        try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "kept"]) }
        let missing = cluster.directory.file("nowhere")
        let result = try await Subprocess.run(
            Products.path("logsync"), ["sync", "--store", a.path, "--schema", cluster.schemaFile, "--shared", missing])
        #expect(result.status == ExitStatus.ioError)
        #expect(result.stderr.contains("the shared folder \(missing) does not exist"))
        #expect(!FileManager.default.fileExists(atPath: missing))
        #expect(try a.sync.exportedSequence() == 0, "nothing exported to a folder that is not there")
    }

    /// `logsync sync` killed with SIGKILL at each fault point, then run again: nothing is lost, nothing
    /// applied twice, nothing republished differently.
    @Test(
        "kill -9 during export and during import, then resume",
        arguments: ["export.after-outbox", "export.after-publish", "import.mid-batch", "import.between-batches"])
    func crashAndResume(fault: String) async throws {
        let cluster = try SyncCluster("crash")
        let a = try cluster.store("a"), b = try cluster.store("b")
        for i in 0..<6 {
            try a.write(author: "alice") { tx in
                for j in 0..<3 { try tx.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(i).\(j)"), "rank": .integer(Int64(i))]) }
            }
        }
        func run(_ store: Store, fault: String?) async throws -> (status: Int32, stdout: String, stderr: String) {
            var environment = ProcessInfo.processInfo.environment
            environment["LOGSYNC_FAULT"] = fault
            return try await Subprocess.run(
                Products.path("logsync"),
                // Segments of two transactions, imported one transaction per batch: a kill between batches
                // leaves a segment half applied.
                ["sync", "--store", store.path, "--schema", cluster.schemaFile, "--shared", cluster.shared,
                 "--segment-changes", "6", "--batch-changes", "3"],
                environment: environment)
        }
        let exporter = fault.hasPrefix("export") ? fault : nil
        let crashedExport = try await run(a, fault: exporter)
        #expect(crashedExport.status == (exporter == nil ? 0 : -1) || crashedExport.status == 9, "\(crashedExport)")
        #expect(try await run(a, fault: nil).status == 0)

        let importer = fault.hasPrefix("import") ? fault : nil
        let crashedImport = try await run(b, fault: importer)
        if importer != nil { #expect(crashedImport.status != 0, "the fault point must have been reached") }
        let resumed = try await run(b, fault: nil)
        #expect(resumed.status == 0, "\(resumed.stderr)")

        #expect(try b.syncedTables() == a.syncedTables())
        #expect(try b.syncedTables() == cluster.reference())
        let imported = try b.history(filter: HistoryFilter(origins: [.remote(a.nodeID)]))
        #expect(imported.count == 6, "each of a's six transactions imported exactly once")
        #expect(try a.sync.exportedSequence() == 6)
        #expect(try b.sync.quarantined().isEmpty)
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(18)]])
    }
}
