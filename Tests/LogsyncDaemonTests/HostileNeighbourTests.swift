import Foundation
import LogsyncCore
import LogsyncControl
import LogsyncDaemon
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Neighbours that must not stop sync (`docs/architecture.md`, "No neighbour can stop sync"): a writer
/// holding the store, a client that stops reading, odd files in the shared folder, a peer with a wrong
/// clock, a damaged store, a squatted runtime folder, a stop in the middle of a large import.
@Suite("Hostile neighbours", .serialized)
struct HostileNeighbourTests {
    @Test("50 restarts of syncd while a foreign writer commits in a loop all start and stop cleanly")
    func restartsWhileAForeignWriterCommits() async throws {
        let cluster = try cluster("fw")
        let a = try cluster.addNode("a")
        try await a.start()
        #expect(try await a.stop() == 0)
        // From now on syncd reads the schema registered in the store, as it does without `[store] schema`.
        let configuration = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try configuration.split(separator: "\n").filter { !$0.hasPrefix("schema = ") }.joined(separator: "\n")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        // The sqlite3 shell committing one row after another as fast as it can: a writer that never
        // announces itself and, between syncd's runs, is the store's only connection.
        let writer = try ForeignWriter.start(store: a.storePath)
        defer { writer.process.terminate(SIGKILL) }
        _ = try await writer.line(startingWith: "committing", timeout: .seconds(20))
        for round in 1...50 {
            do {
                try await a.start(timeout: .seconds(30))
            } catch {
                Issue.record("start \(round) of 50 failed while the foreign writer commits: \(error)")
                return
            }
            let status = try await a.stop()
            #expect(status == 0, "stop \(round): exit \(status)\n\(a.log.suffix(2_000))")
        }
        #expect(writer.process.isRunning, "the foreign writer kept committing: \(writer.stderr)")
        let commits = try await ForeignWriter.stop(writer)
        print("foreign writer: \(commits) commits during 50 restarts of syncd")
        #expect(commits >= 50, "the writer really wrote throughout")
    }

    @Test("a watch client that never reads delays no import and no SIGTERM; it is dropped with a message")
    func stalledWatchClient() async throws {
        let cluster = try cluster("stall")
        // Rescans ten minutes apart: only the daemons' own wake-ups (inotify) carry changes across.
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 600_000)
        let b = try cluster.addNode("b", rescanIntervalMilliseconds: 600_000)
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        let source = try a.openStore(), target = try b.openStore()

        let before = try await Arrivals.measure(count: 30, from: source, to: target)
        // Connects, asks to watch, and never reads again: each import round on b has events for it, and
        // its socket buffer is full after a few dozen rounds.
        let stalled = try UnixSocket.connect(to: b.socketPath)
        try stalled.write(Array(#"{"v": 1, "id": 9, "command": "watch"}"#.utf8) + [10])
        let during = try await Arrivals.measure(count: 150, from: source, to: target)
        print("a commit on a visible on b: without a stalled watch client \(before); with one \(during)")
        #expect(during.missed == 0, "every import went through: \(during)")
        let latest = Array(during.delays.suffix(100))
        // A client that held the round up would add its 2 s write timeout to every import; the bound sits
        // well below that and well above what load does to the same machine's delay without the client.
        let bound = max(.seconds(1), Arrivals.percentile(before.delays, 0.5) * 4)
        #expect(Arrivals.percentile(latest, 0.5) <= bound, "median import delay with a stalled client: \(during); without: \(before)")
        try await b.awaitLog("dropped a watch client")

        // A second stalled client, connected when SIGTERM comes: the stop does not wait for it.
        let second = try UnixSocket.connect(to: b.socketPath)
        try second.write(Array(#"{"v": 1, "id": 10, "command": "watch"}"#.utf8) + [10])
        _ = try await Arrivals.measure(count: 40, from: source, to: target)
        let (status, elapsed) = try await b.stopTimed(timeout: .seconds(30))
        print("SIGTERM with a stalled watch client connected: exit \(status) after \(elapsed)")
        #expect(status == 0)
        // A stop that waited for the client would wait for ever (its socket is never read); the bound leaves
        // room for a loaded machine.
        #expect(elapsed < .seconds(15), "SIGTERM exits promptly: \(elapsed)")
        // What the first client finds when it reads at last: the events that fitted, then why it was dropped.
        stalled.setReceiveTimeout(milliseconds: 2_000)
        var reader = LineReader(stalled)
        var lines: [String] = []
        while let line = try? reader.next() { lines.append(String(decoding: line, as: UTF8.self)) }
        #expect(lines.count > 10, "the stalled client had events waiting")
        try await a.stop()
    }

    @Test("a FIFO, a socket and a link named like segments, and a linked node folder: reported, never opened, sync goes on")
    func oddFilesInTheSharedFolder() async throws {
        let cluster = try cluster("odd")
        let a = try cluster.addNode("a"), b = try cluster.addNode("b")
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        try a.openStore().write(author: "a") { try $0.insert("Note", note("before")) }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let account = cluster.shared + "/test/"
        let aSegment = try #require(try FileManager.default.contentsOfDirectory(atPath: account + a.nodeID!).first { $0.hasSuffix(".lseg") })
        let name = "00000000000000000001-00000000000000000001.lseg"

        let fifo = try OddFiles.ghost(in: account)
        #expect(mkfifo(fifo.folder + "/" + name, 0o644) == 0)
        let socket = try OddFiles.ghost(in: account)
        // Bound at a short path (socket paths are limited to 107 bytes), then moved into place.
        let short = "/tmp/ls-\(UUID().uuidString.prefix(8)).sock"
        let listener = try UnixSocket.listen(at: short)
        #expect(rename(short, socket.folder + "/" + name) == 0)
        let link = try OddFiles.ghost(in: account)
        try FileManager.default.createSymbolicLink(atPath: link.folder + "/" + name, withDestinationPath: account + a.nodeID! + "/" + aSegment)
        let linkedFolder = UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: account + linkedFolder, withDestinationPath: "/")

        try a.openStore().write(author: "a") { try $0.insert("Note", note("after")) }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let trigger = try await b.syncctl(["trigger", "--json", "--timeout", "20"])
        #expect(trigger.status == 0, "b's round completes: \(trigger)")
        #expect(try b.openStore().read("SELECT count(*) FROM Note") == [[.integer(2)]], "a's notes arrive all the same")

        let expected: [(path: String, says: String)] = [
            (fifo.folder + "/" + name, "a FIFO named like a segment"),
            (socket.folder + "/" + name, "a socket named like a segment"),
            (link.folder + "/" + name, "a symbolic link named like a segment"),
            (account + linkedFolder, "a symbolic link named like a node folder"),
        ]
        let status = try await b.status()
        let ignored = try #require(status["ignored"] as? [[String: Any]], "\(status)")
        for (path, says) in expected {
            let entry = ignored.first { $0["path"] as? String == path }
            #expect((entry?["reason"] as? String)?.contains(says) == true, "status lists \(path) as \(says): \(ignored)")
            try await b.awaitLog("ignoring \(path): \(says)")
        }
        #expect(status["ignored_files"] as? Int == ignored.count)
        #expect(!ignored.contains { ($0["path"] as? String)?.hasPrefix(account + linkedFolder + "/") == true }, "the linked folder is not listed")

        let peers = try await b.peers()
        let result = try JSONSerialization.jsonObject(with: Data(trigger.stdout.utf8)) as? [String: Any]
        let waiting = (result?["trigger"] as? [String: Any])?["waiting_reasons"] as? [String: String] ?? [:]
        for (ghost, kind) in [(fifo.node, "FIFO"), (socket.node, "socket"), (link.node, "symbolic link")] {
            let peer = peers.first { $0["node"] as? String == ghost }
            #expect(peer?["waiting_for"] as? Int == 1, "\(peers)")
            #expect((peer?["waiting_reason"] as? String)?.contains("is a \(kind) named like a segment") == true, "\(String(describing: peer))")
            #expect(waiting[ghost]?.contains(kind) == true, "trigger --json says why \(ghost) waits: \(waiting)")
        }

        // Gone again: nothing hangs on, the next round is clean.
        unlink(fifo.folder + "/" + name)
        listener.shutdown()
        #expect(try await b.syncctl(["trigger", "--timeout", "20"]).status == 0)
        let stop = try await b.stopTimed()
        #expect(stop.status == 0)
        #expect(stop.elapsed < .seconds(15), "a stop that a FIFO held would never end: \(stop.elapsed)")
        try await a.stop()
    }

    /// mknod needs CAP_MKNOD, which containers often drop: without it this case says so and is skipped.
    @Test("a device node named like a segment is reported and never opened")
    func deviceNodeInTheSharedFolder() async throws {
        let cluster = try cluster("dev")
        let a = try cluster.addNode("a"), b = try cluster.addNode("b")
        let account = cluster.shared + "/test/"
        try FileManager.default.createDirectory(atPath: account, withIntermediateDirectories: true)
        let ghost = try OddFiles.ghost(in: account)
        let path = ghost.folder + "/00000000000000000001-00000000000000000001.lseg"
        // The same device as /dev/null: character device 1, 3 (Linux's makedev, a macro Swift cannot call).
        guard mknod(path, S_IFCHR | 0o644, (1 << 8) | 3) == 0 else {
            let reason = String(cString: strerror(errno))
            try Test.cancel("mknod is not permitted here (\(reason)): a device node cannot be made, so this case is not run")
        }
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        try a.openStore().write(author: "a") { try $0.insert("Note", note("x")) }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        #expect(try await b.syncctl(["trigger", "--timeout", "20"]).status == 0)
        #expect(try b.openStore().read("SELECT count(*) FROM Note") == [[.integer(1)]])
        let ignored = try #require(try await b.status()["ignored"] as? [[String: Any]])
        #expect(ignored.contains { $0["path"] as? String == path && ($0["reason"] as? String)?.contains("a character device named like a segment") == true }, "\(ignored)")
        let peer = try await b.peers().first { $0["node"] as? String == ghost.node }
        #expect((peer?["waiting_reason"] as? String)?.contains("character device") == true)
        try await b.awaitLog("ignoring \(path)")
        try await a.stop()
        try await b.stop()
    }

    @Test("held segments say why in peers, status, trigger and the log; a stray name beyond a gap fakes no lag; a newer schema holds nothing")
    func heldSegmentsAreReported() async throws {
        let cluster = try cluster("held")
        let b = try cluster.addNode("b")
        try await b.start()
        defer { b.process?.process.terminate() }
        // A watch, subscribed (it has seen a round) before anything arrives: it hears of the newer schema.
        let watch = try Subprocess(Products.path("syncctl"), ["watch", "--json", "--socket", b.socketPath])
        defer { watch.process.terminate() }
        try await eventually(within: .seconds(20), every: .zero, "a sync_finished event in the watch:\n\(watch.stdout) \(watch.stderr)") { () async throws -> Bool in
            if watch.stdout.contains("\"sync_finished\"") { return true }
            #expect(try await b.syncctl(["trigger"]).status == 0)
            return false
        }
        let account = cluster.shared + "/test/"
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        // A node whose clock is a year ahead, one whose first segment is missing, and one with a good first
        // segment and a junk file named 90,000 sequences on; and one on a newer schema, which waits for nothing.
        let skewed = try HeldSegments.publish(in: account, sequence: 1, at: now + 365 * 24 * 3_600_000)
        let newer = try HeldSegments.publish(in: account, sequence: 1, at: now, schemaVersion: 2)
        let gap = try HeldSegments.publish(in: account, sequence: 2, at: now)
        let junk = try HeldSegments.publish(in: account, sequence: 1, at: now)
        try Data("not a segment".utf8).write(to: URL(fileURLWithPath: account + junk + "/00000000000000090000-00000000000000090000.lseg"))

        let trigger = try await b.syncctl(["trigger", "--json"])
        #expect(trigger.status == 0, "\(trigger)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(trigger.stdout.utf8)) as? [String: Any])
        let body = try #require(result["trigger"] as? [String: Any])
        let waiting = body["waiting"] as? [String: Int] ?? [:]
        let reasons = body["waiting_reasons"] as? [String: String] ?? [:]
        let expected: [(node: String, next: Int, says: String)] = [
            (skewed, 1, "ahead of this machine's clock"),
            (gap, 1, "sequence 1 is missing"),
            (junk, 2, "sequence 2 is missing from the shared folder; the segments from sequence 90000 on wait for it"),
        ]
        let peers = try await b.peers()
        let statusPeers = try #require(try await b.status()["peers"] as? [[String: Any]])
        for (node, next, says) in expected {
            #expect(waiting[node] == next, "trigger --json waiting: \(waiting)")
            #expect(reasons[node]?.contains(says) == true, "trigger --json says why \(node) waits: \(reasons)")
            for (source, list) in [("peers", peers), ("status", statusPeers)] {
                let peer = list.first { $0["node"] as? String == node }
                #expect(peer?["waiting_for"] as? Int == next, "\(source): \(String(describing: peer))")
                #expect((peer?["waiting_reason"] as? String)?.contains(says) == true, "\(source) says why: \(String(describing: peer))")
            }
            try await b.awaitLog("waiting for \(node) sequence \(next): ")
        }
        let junkPeer = try #require(peers.first { $0["node"] as? String == junk })
        #expect(junkPeer["applied_seq"] as? Int == 1)
        #expect(junkPeer["available_seq"] as? Int == 1, "the junk name is no evidence of sequences to come")
        #expect(junkPeer["lag"] as? Int == 0)
        let gapPeer = try #require(peers.first { $0["node"] as? String == gap })
        #expect(gapPeer["available_seq"] as? Int == 0 && gapPeer["lag"] as? Int == 0, "nothing follows on from what was applied: \(gapPeer)")
        #expect(peers.first { $0["node"] as? String == skewed }?["lag"] as? Int == 1, "a held segment is still to apply: \(peers)")
        // The newer schema's segment is applied (all it holds is declared here) and its version shown.
        let newerPeer = try #require(peers.first { $0["node"] as? String == newer })
        #expect(newerPeer["applied_seq"] as? Int == 1 && newerPeer["lag"] as? Int == 0 && newerPeer["waiting_for"] == nil, "\(newerPeer)")
        #expect(newerPeer["schema_version"] as? Int == 2, "\(newerPeer)")
        #expect(waiting[newer] == nil, "\(waiting)")
        let schema = try #require(try await b.status()["schema"] as? [String: Any])
        #expect(schema["version"] as? Int == 1 && schema["newest_peer_version"] as? Int == 2 && schema["kept_transactions"] as? Int == 0, "\(schema)")
        // Said once per peer and version: in the watch and in the journal.
        try await b.awaitLog("node \(newer) writes with schema version 2, newer than this app's")
        try await eventually(within: .seconds(20), "the newer_schema event in the watch:\n\(watch.stdout)") { watch.stdout.contains("\"newer_schema\"") }
        #expect(try await b.syncctl(["trigger"]).status == 0)
        #expect(watch.stdout.components(separatedBy: "\"newer_schema\"").count == 2, "once: \(watch.stdout)")
        let text = try await b.syncctl(["peers"])
        #expect(text.stdout.contains("waiting for 1: segment") && text.stdout.contains("ahead of this machine's clock"), "\(text.stdout)")
        try await b.stop()
    }

    @Test("a store damaged in the middle is refused at start; syncctl check finds damage in a running store and halts syncing")
    func damagedStore() async throws {
        let cluster = try cluster("dmg")
        let a = try cluster.addNode("a")
        try await a.start()
        try a.openStore().write(author: "a") { tx in
            for i in 0..<3_000 { try tx.insert("Note", note("note \(i) " + String(repeating: "x", count: 100))) }
        }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let intact = try await a.syncctl(["check"])
        #expect(intact.status == 0 && intact.stdout.contains("store intact"), "\(intact)")
        #expect(try await a.stop() == 0)

        // 4 KiB of garbage over a page in the middle of the file, while syncd is stopped.
        let copy = a.storePath + ".intact"
        try FileManager.default.copyItem(atPath: a.storePath, toPath: copy)
        try Damage.overwriteMiddlePage(of: a.storePath)
        let sqlite = try await runSQLiteShell(on: a.storePath, "PRAGMA integrity_check")
        #expect(!sqlite.stdout.hasPrefix("ok"), "SQLite itself finds the store malformed: \(sqlite)")
        let refused = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath], timeout: .seconds(30))
        #expect(refused.status == ExitStatus.dataError, "\(refused)")
        #expect(refused.stderr.contains("the store \(a.storePath) is damaged") && refused.stderr.contains("quick_check"), "\(refused.stderr)")
        #expect(refused.stderr.contains("does not sync it"), "\(refused.stderr)")

        // The same store, intact again, damaged while syncd runs: the full check finds it and syncing stops.
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: a.storePath + suffix) }
        try FileManager.default.removeItem(atPath: a.storePath)
        try FileManager.default.moveItem(atPath: copy, toPath: a.storePath)
        try await a.start()
        try Damage.overwriteMiddlePage(of: a.storePath)
        let check = try await a.syncctl(["check"])
        #expect(check.status == ExitStatus.dataError, "\(check)")
        #expect(check.stdout.contains("store DAMAGED"), "\(check)")
        let status = try await a.status()
        #expect(status["state"] as? String == "halted", "\(status)")
        #expect((status["last_error"] as? String)?.contains("syncing stopped") == true, "\(status)")
        let trigger = try await a.syncctl(["trigger"])
        #expect(trigger.status == 1 && trigger.stderr.contains("damaged"), "a halted daemon does not sync: \(trigger)")
        try await a.awaitLog("found the store damaged")
        try await a.stop()
    }

    @Test("a column renamed by another program: the running syncd stops syncing and says how to undo it; a new one refuses to start")
    func schemaDrift() async throws {
        let cluster = try cluster("drift")
        let a = try cluster.addNode("a")
        try await a.start()
        let rename = try await runSQLiteShell(on: a.storePath, "ALTER TABLE Note RENAME COLUMN title TO heading")
        #expect(rename.status == 0, "\(rename)")
        let trigger = try await a.syncctl(["trigger"])
        #expect(trigger.status == 1, "\(trigger)")
        #expect(trigger.stderr.contains("RENAME COLUMN \"heading\" TO \"title\""), "\(trigger)")
        let status = try await a.status()
        #expect((status["last_error"] as? String)?.contains("changed outside logsync") == true, "\(status)")
        #expect(try await a.stop() == 0)

        let refused = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath], timeout: .seconds(30))
        #expect(refused.status == ExitStatus.dataError, "\(refused)")
        #expect(refused.stderr.contains("does not sync") && refused.stderr.contains("\"Note\".\"title\" is missing"), "\(refused.stderr)")

        let back = try await runSQLiteShell(on: a.storePath, "ALTER TABLE Note RENAME COLUMN heading TO title")
        #expect(back.status == 0, "\(back)")
        try await a.start()
        #expect(try await a.syncctl(["trigger"]).status == 0)
        try await a.stop()
    }

    @Test("SIGTERM during a large import stops at the next batch; the next start resumes and loses nothing")
    func stopDuringLargeImport() async throws {
        // Large enough that the import takes several seconds here; LOGSYNC_TEST_IMPORT_CHANGES=1000000 for
        // the full-size run.
        let total = ProcessInfo.processInfo.environment["LOGSYNC_TEST_IMPORT_CHANGES"].flatMap(Int.init) ?? 150_000
        let cluster = try cluster("big")
        let b = try cluster.addNode("b", extra: ["batch_ms = 100"])
        let origin = try LargeImport.publish(changes: total, in: cluster.shared + "/test/")
        try await b.start()
        defer { b.process?.process.terminate() }
        let target = try b.openStore()
        // Wait until the import is well under way: a tenth of it committed, most still to come.
        try await eventually(within: .seconds(300), every: .milliseconds(5), "the import to start:\n\(b.log)") {
            try target.sync.appliedSequence(from: NodeID(origin.node)) >= UInt64(max(1, origin.transactions / 10))
        }
        let (status, elapsed) = try await b.stopTimed(timeout: .seconds(60))
        let applied = try target.sync.appliedSequence(from: NodeID(origin.node))
        print("SIGTERM during an import of \(total) changes: exit \(status) after \(elapsed), \(applied) of \(origin.transactions) transactions applied")
        #expect(status == 0)
        // The round stops at its next batch (each one SQLite transaction with its cursor): `applied` below
        // proves the stop did not wait for the import; the bound only catches a stop that hangs.
        #expect(elapsed < .seconds(20), "SIGTERM exits promptly: \(elapsed)")
        #expect(applied < UInt64(origin.transactions), "the stop came before the import finished, or the test proves nothing")

        try await b.start()
        try await eventually(within: .seconds(300), every: .milliseconds(50), "the import to finish after the restart:\n\(b.log)") {
            try target.sync.appliedSequence(from: NodeID(origin.node)) >= UInt64(origin.transactions)
        }
        #expect(try target.read("SELECT count(*) FROM Note") == [[.integer(Int64(total))]], "every change once")
        #expect(try target.history(filter: HistoryFilter(origins: [.remote(origin.node)]), limit: 1_000_000).count == origin.transactions)
        #expect(try target.sync.quarantined().isEmpty)
        try await b.stop()
    }

    @Test("a runtime folder owned by another user, writable by others, or a link, is refused", arguments: ["owner", "mode", "link"])
    func unsafeRuntimeFolder(problem: String) async throws {
        let cluster = try cluster("run")
        let a = try cluster.addNode("a")
        // Like the system's temporary folder, where syncd's fallback runtime folder logsync-<uid> goes:
        // anyone may create a folder there first.
        let temporary = cluster.directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        #expect(chmod(temporary, 0o1777) == 0)
        let runtime = temporary + "/logsync-\(getuid())"
        switch problem {
        case "owner":
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false)
            #expect(chown(runtime, 65534, 65534) == 0)
            #expect(chmod(runtime, 0o700) == 0)
        case "mode":
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false)
            #expect(chmod(runtime, 0o777) == 0)
        default:
            let elsewhere = cluster.directory.file("elsewhere")
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: runtime, withDestinationPath: elsewhere)
        }
        let configuration = try String(contentsOfFile: a.configPath, encoding: .utf8)
            .replacingOccurrences(of: "socket = \"s.sock\"", with: "socket = \"\(runtime)/syncd.sock\"")
        try configuration.write(toFile: a.configPath, atomically: true, encoding: .utf8)
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath], timeout: .seconds(30))
        #expect(result.status == ExitStatus.notPermitted, "\(result)")
        #expect(result.stderr.contains("refusing \(runtime)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: runtime + "/syncd.sock"))
        // syncctl, finding the socket through the same configuration, does not talk through it either.
        let syncctl = try await Subprocess.run(Products.path("syncctl"), ["status", "--config", a.configPath])
        #expect(syncctl.status == ExitStatus.notPermitted, "\(syncctl)")
        #expect(syncctl.stderr.contains("refusing \(runtime)"), "\(syncctl.stderr)")
    }

    @Test("the runtime folder syncd uses is made private (0700), and syncctl trusts its own user's folder")
    func runtimeFolderIsPrivate() async throws {
        let cluster = try cluster("priv")
        let a = try cluster.addNode("a")
        try await a.start()
        var info = stat()
        #expect(lstat(cluster.directory.file("a"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(try await a.syncctl(["status", "--config", a.configPath]).status == 0, "syncctl trusts its own user's folder")
        try await a.stop()
    }
}

/// Processes that write the store without logsync: the `sqlite3` shell, started again for every commit
/// (each one opens the store, recovers the WAL index if it is the only connection, commits, and on
/// closing checkpoints and removes the WAL when it is the last), in a loop that never pauses.
enum ForeignWriter {
    static let uuid = "printf('%s-%s-4%s-a%s-%s', lower(hex(randomblob(4))), lower(hex(randomblob(2))), substr(lower(hex(randomblob(2))), 2), substr(lower(hex(randomblob(2))), 2), lower(hex(randomblob(6))))"

    static func start(store: String) throws -> Subprocess {
        let script = """
            n=0
            trap 'echo "commits $n"; exit 0' TERM
            while :; do
                \(sqliteShell) -cmd '.timeout 30000' "$1" "INSERT INTO Note(id, title, rank) VALUES (\(uuid), 'foreign', $n)" || exit 1
                n=$((n + 1))
                [ $n = 1 ] && echo committing
            done
            """
        return try Subprocess("/bin/sh", ["-c", script, "sh", store])
    }

    /// Stops the loop and returns how many commits it made.
    static func stop(_ writer: Subprocess) async throws -> Int {
        writer.process.terminate(SIGTERM)
        let status = try await writer.waitForExit(timeout: .seconds(20))
        guard status == 0, let line = writer.stdout.split(separator: "\n").last(where: { $0.hasPrefix("commits ") }) else {
            throw SubprocessError.exited(status: status, stdout: writer.stdout, stderr: writer.stderr)
        }
        return Int(line.dropFirst("commits ".count)) ?? 0
    }
}

/// How long commits on one node take to become visible on another.
enum Arrivals {
    struct Measurement: CustomStringConvertible {
        var delays: [Duration]
        /// Commits not visible within the deadline (the first of them, and those never made after it).
        var missed: Int

        var description: String {
            guard !delays.isEmpty else { return "no arrivals, \(missed) missed" }
            let sorted = delays.sorted()
            func ms(_ value: Duration) -> String { String(format: "%.1f ms", Double(value.components.attoseconds) / 1e15 + Double(value.components.seconds) * 1000) }
            return "p50 \(ms(percentile(sorted, 0.5))), p90 \(ms(percentile(sorted, 0.9))), max \(ms(sorted.last!)) over \(delays.count), \(missed) missed"
        }
    }

    /// The nearest-rank percentile; `.zero` for no values.
    static func percentile(_ values: [Duration], _ fraction: Double) -> Duration {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .zero }
        return sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))]
    }

    /// Commits `count` notes on `source` one at a time and times each until `target` has it, watching
    /// from a thread of its own (polling every half millisecond); stops at the first one not visible
    /// within `deadline` (generous: on a loaded machine one fsync can take a second; a stalled import
    /// never arrives at all).
    static func measure(count: Int, from source: Store, to target: Store, deadline: Duration = .seconds(30)) async throws -> Measurement {
        var delays: [Duration] = []
        for i in 0..<count {
            let id = UUID().uuidString.lowercased()
            let arrived = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Duration?, any Error>) in
                Thread.detachNewThread {
                    do {
                        let start = ContinuousClock.now
                        try source.write(author: "a") { try $0.insert("Note", ["id": .text(id), "title": .text("arrival \(i)"), "rank": 1]) }
                        while ContinuousClock.now - start < deadline {
                            if try !target.read("SELECT 1 FROM Note WHERE id = ?", [.text(id)]).isEmpty {
                                return continuation.resume(returning: ContinuousClock.now - start)
                            }
                            usleep(500)
                        }
                        continuation.resume(returning: nil)
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
            guard let arrived else { return Measurement(delays: delays, missed: count - i) }
            delays.append(arrived)
        }
        return Measurement(delays: delays, missed: 0)
    }
}

/// Node folders with odd things in them.
enum OddFiles {
    /// A new node folder (a node that never wrote a segment) in the account folder.
    static func ghost(in account: String) throws -> (node: String, folder: String) {
        let node = UUID().uuidString.lowercased()
        try FileManager.default.createDirectory(atPath: account + node, withIntermediateDirectories: true)
        return (node, account + node)
    }
}

/// Segments a test writes by hand, as another node would publish them.
enum HeldSegments {
    /// Publishes one segment of one note insert at `sequence` for a new node, stamped `at` (ms since
    /// 1970); returns the node.
    static func publish(in account: String, sequence: UInt64, at milliseconds: UInt64, schemaVersion: Int = 1) throws -> String {
        let node = UUID().uuidString.lowercased()
        let transaction = LogTransaction(
            sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: milliseconds, logical: 0), author: "held", contextName: nil,
            changes: [LogChange(entity: "Note", primaryKey: .text(UUID().uuidString.lowercased()), kind: .insert, causalLength: 1, values: ["title": "held", "rank": 1])])
        let bytes = try SegmentEncoder.encode(schemaVersion: schemaVersion, account: "test", node: NodeID(node), transactions: [transaction])
        try FileManager.default.createDirectory(atPath: account + node, withIntermediateDirectories: true)
        let name = SegmentName(node: NodeID(node), firstSequence: sequence, lastSequence: sequence)
        try Data(bytes).write(to: URL(fileURLWithPath: account + node + "/" + name.fileName))
        return node
    }
}

/// A node's history published in full: `changes` note inserts in transactions of 1,000, segments of
/// 2,000 changes, written straight into the shared folder.
enum LargeImport {
    static func publish(changes: Int, in account: String) throws -> (node: String, transactions: Int) {
        let node = NodeID(UUID().uuidString.lowercased())
        try FileManager.default.createDirectory(atPath: account + node.rawValue, withIntermediateDirectories: true)
        let now = UInt64(Date().timeIntervalSince1970 * 1000) - 60_000
        var transactions: [LogTransaction] = []
        var sequence: UInt64 = 0
        var written = 0
        func flush() throws {
            guard !transactions.isEmpty else { return }
            let bytes = try SegmentEncoder.encode(schemaVersion: 1, account: "test", node: node, transactions: transactions)
            let name = SegmentName(node: node, firstSequence: transactions[0].sequence, lastSequence: sequence)
            try Data(bytes).write(to: URL(fileURLWithPath: account + node.rawValue + "/" + name.fileName))
            transactions = []
        }
        while written < changes {
            sequence += 1
            let count = min(1_000, changes - written)
            let inserts = (0..<count).map { i in
                LogChange(entity: "Note", primaryKey: .text(UUID().uuidString.lowercased()), kind: .insert, causalLength: 1,
                          values: ["title": .text("imported \(written + i)"), "rank": .integer(Int64(i))])
            }
            transactions.append(LogTransaction(
                sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: now + sequence, logical: 0), author: "big", contextName: nil, changes: inserts))
            written += count
            if transactions.count == 2 { try flush() }
        }
        try flush()
        return (node.rawValue, Int(sequence))
    }
}

/// Damage to a store file, as a disk or a careless program would do it.
enum Damage {
    /// Overwrites the 4 KiB page in the middle of the file with pseudo-random bytes.
    static func overwriteMiddlePage(of path: String) throws {
        guard let handle = FileHandle(forUpdatingAtPath: path) else { throw POSIXError(.ENOENT) }
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        let pages = size / 4096
        try handle.seek(toOffset: (pages / 2) * 4096)
        var generator = SeededRandom(seed: 13)
        try handle.write(contentsOf: Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        try handle.synchronize()
    }
}

extension SyncdNode {
    /// `syncctl peers --json`, decoded loosely.
    func peers() async throws -> [[String: Any]] {
        let result = try await syncctl(["peers", "--json"])
        guard result.status == 0, let peers = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] else {
            throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr)
        }
        return peers
    }

}
