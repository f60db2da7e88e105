import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Synchronization
import Testing
import LogsyncControl

extension AccountTests {
/// Nothing committed is lost at a switch, whoever commits and whenever (`docs/accounts.md`, "Nothing lost").
@Suite("every committed write survives account switches")
struct AccountLossTests {
    /// A foreign writer, in Python's sqlite3 module (the same SQLite the `sqlite3` shell runs): every
    /// ~10 ms it inserts a note into the store it finds active in `state.json` (or syncd's configured
    /// store before the first switch), the way a script that reads the state file would, and prints the
    /// id and the path of every insert that committed. `reopen` opens the file for each insert, like the
    /// shell; `hold` keeps its connection for a second across whatever happens, and opens the active store
    /// again only when a write fails or the second is up.
    static let writer = """
        import json, os, sqlite3, sys, time, uuid
        store, stop, mode = sys.argv[1:4]
        state = store + ".accounts/state.json"
        def active():
            try:
                with open(state) as f:
                    return json.load(f)["active"]["path"]
            except FileNotFoundError:
                return store
            except (ValueError, KeyError, OSError):
                return None
        conn, path, opened, n = None, None, 0.0, 0
        while not os.path.exists(stop):
            if conn is None or mode == "reopen" or time.monotonic() - opened > 1.0:
                target = active()
                if target is None:
                    time.sleep(0.005)
                    continue
                if conn is not None:
                    conn.close()
                path, opened = target, time.monotonic()
                conn = sqlite3.connect(path, timeout=5, isolation_level=None)
            note = str(uuid.uuid4())
            try:
                conn.execute("INSERT INTO Note(id, title) VALUES (?, ?)", (note, "%s %d" % (mode, n)))
                print(note, path, flush=True)
                n += 1
            except sqlite3.Error:
                conn.close()
                conn = None
            time.sleep(0.01)
        """

    /// The account a store path belongs to, for node `a`: its configured store until the first switch,
    /// then `a-<account>.<generation>.sqlite`.
    static func account(of path: String, node: SyncdNode) -> String? {
        if path == node.storePath { return node.account }
        let name = URL(fileURLWithPath: path).lastPathComponent
        guard name.hasPrefix("a-"), name.hasSuffix(".sqlite") else { return nil }
        let stem = name.dropFirst(2).dropLast(".sqlite".count)
        return stem.lastIndex(of: ".").map { String(stem[..<$0]) }
    }

    /// The note ids of a node's active store.
    static func ids(_ node: SyncdNode) throws -> Set<String> {
        let rows = try ForeignConnection(path: try node.activeStorePath()).execute("SELECT id FROM Note")
        return Set(rows.compactMap { row -> String? in
            if case .text(let id) = row[0] { return id }
            return nil
        })
    }

    /// What `notes add` printed: the id and the account, or nil when it did not save.
    static func saved(_ result: (status: Int32, stdout: String, stderr: String)) -> (id: String, account: String)? {
        guard result.status == 0, let line = result.stdout.split(separator: "\n").first(where: { $0.contains(" saved at token ") }),
            let range = line.range(of: " in account ")
        else { return nil }
        return (String(line.prefix(36)), String(line[range.upperBound...]))
    }

    @Test(
        "a foreign writer, a writer holding the store open and notes add commit throughout 20 switches, killed at every step in six of them: each committed write ends in the account active when it committed, on every node of it, and in no other",
        .enabled(if: Tools.installed("python3"), "needs python3"))
    func nothingLostAcrossSwitches() async throws {
        let cluster = try SyncdCluster("loss", schema: .notes)
        let a = try cluster.addNode("a", account: "x"), b = try cluster.addNode("b", account: "x"), c = try cluster.addNode("c", account: "y")
        // a's retiring step waits half a second between its look for what is left to ship and the deletion:
        // the writers commit dozens of times in that window.
        let slowly = ["LOGSYNC_FAULT": "switch.retire-slowly"]
        try await a.start(environment: slowly)
        for node in [b, c] { try await node.start() }
        defer { terminate(cluster) }
        let script = try cluster.directory.write("writer.py", Self.writer)
        let stopFile = cluster.directory.file("stop")
        let reopen = try Subprocess("/usr/bin/python3", [script, a.storePath, stopFile, "reopen"])
        defer { reopen.process.terminate() }
        /// What `notes add` saved, by account; and how many did not save (refused or timed out: allowed).
        let notesSaved = Mutex<[(id: String, account: String)]>([])
        let notesRefused = Mutex<[String]>([])
        let stopNotes = Atomic<Bool>(false)
        let notesLoop = Task.detached {
            var n = 0
            while !stopNotes.load(ordering: .acquiring) {
                let result = try await Subprocess.run(Products.path("notes"), ["add", "loop \(n)", "--config", a.configPath], timeout: .seconds(180))
                if let saved = Self.saved(result) {
                    notesSaved.withLock { $0.append(saved) }
                } else {
                    notesRefused.withLock { $0.append("exit \(result.status): \(result.stdout)\(result.stderr)") }
                }
                n += 1
            }
        }

        // Six of the twenty switches are killed, one at each step, in an order the seed chooses; while
        // syncd is dead with the switch persisted at that step, a `notes add` starts, and it saves once the
        // restarted syncd has finished the switch, in the new account.
        let steps = ["switch.will-change", "switch.exporting", "switch.retiring", "switch.building", "switch.swapping", "switch.did-change"]
        var generator = SeededRandom(seed: 34)
        let killedAt = Dictionary(uniqueKeysWithValues: zip(Array(0..<20).shuffled(using: &generator).prefix(6), steps))
        var holder: Subprocess?
        var durations: [Duration] = []
        for index in 0..<20 {
            // A writer that holds the store open across switches, through the first five of them.
            if index == 0 { holder = try Subprocess("/usr/bin/python3", [script, a.storePath, stopFile + "-holder", "hold"]) }
            if index == 5, let running = holder {
                try "".write(toFile: stopFile + "-holder", atomically: true, encoding: .utf8)
                _ = try await running.waitForExit()
            }
            let to = index % 2 == 0 ? "y" : "x"
            guard let point = killedAt[index] else {
                let started = ContinuousClock.now
                let switched = try await a.syncctl(["account", "switch", to, "--timeout", "120"], timeout: .seconds(180))
                #expect(switched.status == 0, "switch \(index) to \(to): \(switched)\n\(a.log)")
                durations.append(ContinuousClock.now - started)
                continue
            }
            #expect(try await a.stop() == 0)
            try await a.start(environment: ["LOGSYNC_FAULT": point])
            _ = try await a.syncctl(["account", "switch", to, "--timeout", "120"], timeout: .seconds(180))
            #expect(try await a.waitForExit() == SIGKILL, "syncd dies at \(point):\n\(a.log)")
            let step = try #require(try a.accountStores.load().pending, "the switch is persisted at \(point)").step
            let during = try Subprocess(Products.path("notes"), ["add", "during \(step.rawValue)", "--config", a.configPath])
            try during.closeInput()
            try await a.start(environment: slowly)
            let resumed = try await a.syncctl(["account", "switch", to, "--timeout", "120"], timeout: .seconds(180))
            #expect(resumed.status == 0, "switch \(index) to \(to), resumed after a kill at \(point): \(resumed)\n\(a.log)")
            #expect(try await during.waitForExit(timeout: .seconds(180)) == 0, "notes add during \(step.rawValue): \(during.stderr)")
            let saved = Self.saved((during.process.terminationStatus, during.stdout, during.stderr))
            #expect(saved?.account == to, "notes add run while the switch stood at \(step.rawValue) saved in \(to): \(during.stdout)")
            if let saved { notesSaved.withLock { $0.append(saved) } }
        }
        print("switches without a kill took \(durations.map { String(format: "%.1f s", Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18) })")
        stopNotes.store(true, ordering: .releasing)
        try await notesLoop.value
        try "".write(toFile: stopFile, atomically: true, encoding: .utf8)
        #expect(try await reopen.waitForExit() == 0, "\(reopen.stderr)")
        if let holder { _ = try await holder.waitForExit() }

        // Every committed write, by the account of the store it committed to.
        var expected: [String: Set<String>] = ["x": [], "y": []]
        for writer in [reopen, holder].compactMap({ $0 }) {
            for line in writer.stdout.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
                let account = try #require(Self.account(of: parts[1], node: a), "a write into \(parts[1]), which belongs to no account")
                expected[account, default: []].insert(parts[0])
            }
        }
        let byNotes = notesSaved.withLock { $0 }
        for saved in byNotes { expected[saved.account, default: []].insert(saved.id) }
        let foreign = expected.values.map(\.count).reduce(0, +) - byNotes.count
        let refused = notesRefused.withLock { $0 }
        print("committed: \(foreign) foreign inserts, \(byNotes.count) notes add (\(refused.count) refused and said so)")
        #expect(refused.allSatisfy { !$0.contains("saved") }, "a refused notes add says nothing was saved: \(refused)")
        #expect(foreign > 200 && byNotes.count > 20, "the writers really wrote throughout")

        let x = expected["x"]!, y = expected["y"]!
        // a ends on x (twenty switches from x); b is on x, c on y.
        func missing() -> String {
            let counts = [(x, a), (x, b), (y, c)].map { writes, node in "\(writes.subtracting((try? Self.ids(node)) ?? []).count) on \(node.name)" }
            return "committed writes missing: \(counts.joined(separator: ", ")) (of \(x.count) in x, \(y.count) in y)"
        }
        try await eventually(within: .seconds(120), every: .milliseconds(100), "every write in x on a and b, every write in y on c; \(missing())\n\(a.log)") {
            let (onA, onB, onC) = (try Self.ids(a), try Self.ids(b), try Self.ids(c))
            return x.isSubset(of: onA) && x.isSubset(of: onB) && y.isSubset(of: onC)
        }
        #expect(try Self.ids(c).isDisjoint(with: x), "nothing of x in y")
        #expect(try Self.ids(b).isDisjoint(with: y) && Self.ids(a).isDisjoint(with: y), "nothing of y in x")
        // Everything retired was shipped and deleted: nothing is kept.
        try await eventually(within: .seconds(60), every: .milliseconds(100), "no retained store is left:\n\(a.log)") {
            try a.accountStores.load().retained.isEmpty
        }
    }

    @Test("no program of ours makes a store at a retired path: notes waits for the switch and says where it wrote; a retired store refuses every writer")
    func retiredPathsStayRetired() async throws {
        let cluster = try SyncdCluster("retired", schema: .notes)
        let a = try cluster.addNode("a", account: "x")
        try await a.start()
        defer { terminate(cluster) }
        let old = a.storePath
        do {
            // A foreign connection that has read the store, and so holds it open through the switch.
            let keeper = try ForeignConnection(path: old)
            _ = try keeper.execute("SELECT count(*) FROM Note")
            #expect(try await a.syncctl(["account", "switch", "y"]).status == 0, "\(a.log)")
            // The configured store was retired: the connection that kept it open can no longer write to it.
            let refused = #expect(throws: ForeignConnection.Failure.self, "a write into the retired store is refused") {
                _ = try keeper.execute("INSERT INTO Note(id, title) VALUES ('\(UUID().uuidString.lowercased())', 'late')")
            }
            #expect(refused?.message.contains("retired by an account switch") == true, "\(String(describing: refused))")
        }  // The connection closes here.
        try await eventually(within: .seconds(60), every: .milliseconds(50), "the retired store, let go of, is deleted:\n\(a.log)") {
            try a.accountStores.load().retained.isEmpty && !FileManager.default.fileExists(atPath: old)
        }
        // The library makes no new store where the old one was, and says what happened.
        let error = #expect(throws: StoreError.self) { _ = try Store(path: old, schema: .notes) }
        #expect(error?.code == .retired, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: old), "no file was made at \(old)")
        // notes finds the active store and says which account it wrote to.
        let added = try await Subprocess.run(Products.path("notes"), ["add", "after", "--config", a.configPath])
        #expect(added.status == 0 && added.stdout.contains("saved at token") && added.stdout.hasSuffix(" in account y\n"), "\(added)")
        // logsync, given the retired path itself, is refused with 75 (try again where the store is now).
        let exec = try await Subprocess.run(
            Products.path("logsync"), ["exec", "--store", old, "--schema", cluster.schemaFile, "INSERT INTO Note(id, title) VALUES ('\(UUID().uuidString.lowercased())', 'x')"])
        #expect(exec.status == ExitStatus.temporaryFailure && exec.stderr.contains("retired"), "\(exec)")
        #expect(!FileManager.default.fileExists(atPath: old))
    }
}
}
