import ArgumentParser
import Dispatch
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTransport

/// `scale`: what one arrival costs as the shared folder fills with history, and whether a daemon's CPU
/// stays flat under steady load. Two parts, both with real `syncd` processes:
///
/// - **Arrivals.** A third node's history is written into the shared folder as segment files (one
///   transaction of one row each), 1k, then 10k, then 100k of them; two daemons A and B import it. At each
///   level, rounds of samples: one commit on A → visible in B's store (as in `latency`), and the CPU time
///   of both daemons (`utime + stime` from `/proc/PID/stat`) over the round divided by its samples. The
///   1k level is the baseline, measured in the same run.
/// - **Soak.** Three daemons on one folder, each store written by a foreign writer (a `python3` loop
///   with its `sqlite3` module, never through logsync) at about 7 transactions per second of 1–5 rows,
///   for `--minutes` (8 by default). Each daemon's CPU rate in the last quarter against the first, files
///   per minute in the folder against transactions per minute, and every node identical at the end: the
///   suite fails when they are not.
struct ScaleSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Cost of one arrival with 1k, 10k and 100k segments in the folder, and a soak of three daemons under steady writes.",
        discussion: """
            Starts syncd from the folder of this executable: build every product first \
            (swift build -c release), then run .build/release/logsync-bench scale. \
            The soak needs python3 with its sqlite3 module.
            """)

    @OptionGroup var options: SuiteOptions

    @Option(help: "How long the soak writes, in minutes (default 8; 0.35 with --quick).")
    var minutes: Double?

    @Flag(help: "Only the soak.")
    var soakOnly = false

    @Flag(help: "Only the arrivals part (no soak).")
    var noSoak = false

    static let suite = "scale"
    static let account = LatencySuite.account

    struct Sizes {
        var levels: [Int]
        var samples: Int
        var rounds: Int
        var soakMinutes: Double
        static let full = Sizes(levels: [1_000, 10_000, 100_000], samples: 100, rounds: 3, soakMinutes: 8)
        static let quick = Sizes(levels: [1_000, 10_000], samples: 40, rounds: 2, soakMinutes: 0.35)
    }

    func run() throws {
        let sizes = options.quick ? Sizes.quick : Sizes.full
        let syncd = try LatencySuite.locateSyncd()
        if options.quick {
            Report.progress(
                "--quick: history levels \(sizes.levels.map(grouped).joined(separator: ", ")) instead of \(Sizes.full.levels.map(grouped).joined(separator: ", ")) "
                    + "(the *_100k metrics are measured at \(grouped(sizes.levels.last!))), \(sizes.samples) samples × \(sizes.rounds) rounds, "
                    + "soak \(formatted((minutes ?? sizes.soakMinutes) * 60, decimals: 0)) s instead of \(formatted(Sizes.full.soakMinutes, decimals: 0)) min")
        }
        let schema = NoteFixture.schema
        if !soakOnly { try arrivals(sizes: sizes, syncd: syncd, schema: schema) }
        if !noSoak { try soak(minutes: minutes ?? sizes.soakMinutes, syncd: syncd, schema: schema) }
    }

    // MARK: - Arrivals

    func arrivals(sizes: Sizes, syncd: String, schema: Schema) throws {
        Report.progress(
            "scale/arrivals: commit on A → visible in B, two syncd (\(syncd)), with \(sizes.levels.map(grouped).joined(separator: ", ")) "
                + "segments of other nodes in the folder; \(sizes.samples) samples × \(sizes.rounds) rounds per level; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores")
        struct Level {
            var files: Int
            var cpuPerArrival: [Double] = []
            var latencies: [Double] = []
        }
        let levels: [Level] = try withTemporaryDirectory { directory in
            let shared = directory.file("shared")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            let schemaFile = directory.file("schema.json")
            try Data(LatencySuite.schemaJSON.utf8).write(to: URL(fileURLWithPath: schemaFile))
            let configs = try ["a", "b"].map {
                try LatencySuite.writeNodeConfig(directory: directory, name: $0, schemaFile: schemaFile, shared: shared)
            }
            let history = History(folder: shared + "/" + Self.account)
            try history.extend(to: sizes.levels[0])

            let daemons = LatencySuite.Daemons(scratch: directory.path)
            defer { daemons.stopAll() }
            let daemonA = try daemons.start(name: "A", executable: syncd, arguments: ["--config", configs[0]])
            let daemonB = try daemons.start(name: "B", executable: syncd, arguments: ["--config", configs[1]])
            try daemonA.awaitReady(timeout: LatencySuite.readyTimeout)
            try daemonB.awaitReady(timeout: LatencySuite.readyTimeout)
            let storeA = try Store(path: directory.file("a/store.sqlite"), schema: schema)
            let storeB = try Store(path: directory.file("b/store.sqlite"), schema: schema)
            let wakeups = DispatchSemaphore(value: 0)
            let commits = storeB.commits()
            let consumer = Task.detached { for await _ in commits { wakeups.signal() } }
            defer { consumer.cancel() }

            var results: [Level] = []
            var rows = NoteFixture.rows(count: sizes.levels.count * sizes.rounds * (sizes.samples + 5))[...]
            for files in sizes.levels {
                let written = try timed { try history.extend(to: files) }
                let imported = try timed {
                    for (node, count) in history.nodes {
                        try Self.awaitApplied(node, through: UInt64(count), in: [storeA, storeB], daemons: [daemonA, daemonB])
                    }
                }
                Report.progress(
                    "  \(grouped(files)) segments in the folder (written in \(formatted(written, decimals: 1)) s); "
                        + "both daemons applied them after \(formatted(imported, decimals: 1)) s more")
                // Let the daemons finish what the import left (checkpoints, the last rounds).
                Thread.sleep(forTimeInterval: 1)
                var level = Level(files: files)
                for round in 1...sizes.rounds {
                    // A few unmeasured samples first: the first arrival after the import may still meet its tail.
                    for _ in 0..<5 { _ = try Self.sample(rows.popFirst()!, from: storeA, to: storeB, wakeups: wakeups, daemons: [daemonA, daemonB]) }
                    let before = try [daemonA, daemonB].map { try ProcessCPU.seconds($0.pid) }
                    var latencies: [Double] = []
                    for _ in 0..<sizes.samples {
                        latencies.append(try Self.sample(rows.popFirst()!, from: storeA, to: storeB, wakeups: wakeups, daemons: [daemonA, daemonB]))
                        Thread.sleep(forTimeInterval: LatencySuite.spacing.seconds)
                    }
                    let after = try [daemonA, daemonB].map { try ProcessCPU.seconds($0.pid) }
                    let spent = zip(before, after).map { $1 - $0 }
                    let perArrival = spent.reduce(0, +) / Double(sizes.samples) * 1000
                    level.cpuPerArrival.append(perArrival)
                    level.latencies += latencies
                    Report.progress(
                        "    round \(round): CPU per arrival \(formatted(perArrival, decimals: 3)) ms (A \(formatted(spent[0] / Double(sizes.samples) * 1000, decimals: 3)), "
                            + "B \(formatted(spent[1] / Double(sizes.samples) * 1000, decimals: 3))); commit → visible in B p50 "
                            + "\(formatted(Stats.percentile(latencies, 50), decimals: 2)) ms, p99 \(formatted(Stats.percentile(latencies, 99), decimals: 2)) ms")
                }
                results.append(level)
            }
            return results
        }
        let baseline = Stats.median(levels[0].cpuPerArrival)
        for level in levels {
            let label = Self.label(level.files)
            Report.emit(metric("arrival_cpu_ms_\(label)", Stats.median(level.cpuPerArrival), unit: "ms", goal: nil, .lower, decimals: 3))
            // The largest level's p50 is `dir_p50_ms_100k`, below.
            if level.files != levels.last!.files {
                Report.emit(metric("dir_p50_ms_\(label)", Stats.percentile(level.latencies, 50), unit: "ms", goal: nil, .lower))
            }
            Report.emit(metric("dir_p99_ms_\(label)", Stats.percentile(level.latencies, 99), unit: "ms", goal: nil, .lower))
        }
        let largest = levels.last!
        Report.emit(metric("arrival_cpu_100k_vs_1k", Stats.median(largest.cpuPerArrival) / baseline, unit: "x", goal: 1.5, .lower, decimals: 3))
        Report.emit(metric("dir_p50_ms_100k", Stats.percentile(largest.latencies, 50), unit: "ms", goal: 5, .lower))
    }

    static func label(_ files: Int) -> String { files >= 1000 ? "\(files / 1000)k" : "\(files)" }

    /// Waits until every store has applied `node`'s history through `sequence` (10 minutes at most).
    static func awaitApplied(_ node: NodeID, through sequence: UInt64, in stores: [Store], daemons: [LatencySuite.Daemon]) throws {
        let deadline = ContinuousClock.now + .seconds(600)
        while try stores.contains(where: { try $0.sync.appliedSequence(from: node) < sequence }) {
            for daemon in daemons where !daemon.isRunning {
                throw BenchError("syncd \(daemon.name) exited (status \(daemon.exitStatus)); its log:\n\(daemon.log)")
            }
            guard ContinuousClock.now < deadline else {
                throw BenchError("the daemons did not apply \(grouped(Int(sequence))) segments of history within 10 minutes")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// One commit on A, then milliseconds until B's store shows it (5 s at most; a timeout is an error).
    static func sample(_ row: NoteRow, from storeA: Store, to storeB: Store, wakeups: DispatchSemaphore, daemons: [LatencySuite.Daemon]) throws -> Double {
        while wakeups.wait(timeout: .now()) == .success {}
        try storeA.write(author: "bench", context: "scale") { try $0.execute(NoteFixture.plainInsertSQL, row.arguments) }
        let committed = ContinuousClock.now
        let deadline = committed + LatencySuite.sampleTimeout
        while try storeB.read(#"SELECT 1 FROM "Note" WHERE "id" = ?"#, [.text(row.id)]).isEmpty {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                throw BenchError(
                    "row \(row.id) did not reach B within \(formatted(LatencySuite.sampleTimeout.inMilliseconds, decimals: 0)) ms; the daemons' logs:\n"
                        + daemons.map { "syncd \($0.name):\n\($0.log)" }.joined(separator: "\n"))
            }
            _ = wakeups.wait(timeout: .now() + .nanoseconds(Int(min(remaining, LatencySuite.recheckInterval).inNanoseconds)))
        }
        return (ContinuousClock.now - committed).inMilliseconds
    }

    /// History of other nodes, written straight into the shared folder as segment files of one transaction
    /// each (one `Note` insert), numbered from 1 without gaps. Each extension is a node of its own, written
    /// into a dot folder (which readers ignore) and then renamed into place whole, so that the daemons do
    /// not scan a folder that is still being filled: the files stand for history that arrived long ago.
    final class History {
        let account: String
        private(set) var nodes: [(node: NodeID, count: Int)] = []
        var count: Int { nodes.reduce(0) { $0 + $1.count } }

        init(folder: String) {
            account = folder
        }

        func extend(to files: Int) throws {
            guard files > count else { return }
            let node = NodeID(UUID().uuidString.lowercased())
            let staging = account + "/." + node.rawValue
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
            let start = WallClock.milliseconds() - 60_000
            let rows = NoteFixture.rows(count: files - count)
            for (index, row) in rows.enumerated() {
                let sequence = UInt64(index + 1)
                let transaction = LogTransaction(
                    sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: start, logical: UInt16(truncatingIfNeeded: sequence)),
                    author: "history", contextName: nil,
                    changes: [LogChange(entity: "Note", primaryKey: .text(row.id), kind: .insert, causalLength: 1, values: row.values.filter { $0.key != "id" })])
                let bytes = try SegmentEncoder.encode(schemaVersion: 1, account: ScaleSuite.account, node: node, transactions: [transaction])
                let name = SegmentName(node: node, firstSequence: sequence, lastSequence: sequence).fileName
                guard FileManager.default.createFile(atPath: staging + "/" + name, contents: Data(bytes)) else {
                    throw BenchError("cannot write \(staging)/\(name)")
                }
            }
            try FileManager.default.moveItem(atPath: staging, toPath: account + "/" + node.rawValue)
            nodes.append((node, rows.count))
        }
    }

    // MARK: - Soak

    func soak(minutes: Double, syncd: String, schema: Schema) throws {
        guard minutes > 0 else { return }
        let seconds = minutes * 60
        let nodes = ["a", "b", "c"]
        Report.progress(
            "scale/soak: \(nodes.count) syncd on one folder, each store written by a foreign writer (python3 sqlite3) at "
                + "\(formatted(Self.soakRate, decimals: 0)) transactions/s of 1–5 rows, for \(formatted(seconds, decimals: 0)) s")
        try withTemporaryDirectory { directory in
            let shared = directory.file("shared")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            let schemaFile = directory.file("schema.json")
            try Data(LatencySuite.schemaJSON.utf8).write(to: URL(fileURLWithPath: schemaFile))
            let configs = try nodes.map { try LatencySuite.writeNodeConfig(directory: directory, name: $0, schemaFile: schemaFile, shared: shared) }
            let script = directory.file("writer.py")
            try Data(Self.writerScript.utf8).write(to: URL(fileURLWithPath: script))

            let daemons = LatencySuite.Daemons(scratch: directory.path)
            defer { daemons.stopAll() }
            let started = try zip(nodes, configs).map { name, config in
                try daemons.start(name: name.uppercased(), executable: syncd, arguments: ["--config", config])
            }
            for daemon in started { try daemon.awaitReady(timeout: LatencySuite.readyTimeout) }
            let stores = try nodes.map { try Store(path: directory.file("\($0)/store.sqlite"), schema: schema) }

            let writers = try nodes.enumerated().map { index, name in
                try Writer(script: script, store: directory.file("\(name)/store.sqlite"), rate: Self.soakRate, seconds: seconds, seed: index + 1)
            }
            defer { for writer in writers { writer.stop() } }
            let account = shared + "/" + Self.account
            let begin = ContinuousClock.now
            var marks: [(at: Double, cpu: [Double], files: Int)] = []
            func mark() throws {
                marks.append(((ContinuousClock.now - begin).seconds, try started.map { try ProcessCPU.seconds($0.pid) }, try Self.segmentFiles(in: account)))
            }
            try mark()
            // Quarters, each split in steps that report progress.
            let steps = 4 * max(1, Int((seconds / 4 / 30).rounded(.up)))
            for step in 1...steps {
                let due = begin + .milliseconds(Int(seconds * 1000 * Double(step) / Double(steps)))
                while ContinuousClock.now < due {
                    for daemon in started where !daemon.isRunning {
                        throw BenchError("syncd \(daemon.name) exited (status \(daemon.exitStatus)); its log:\n\(daemon.log)")
                    }
                    Thread.sleep(forTimeInterval: min(0.5, max(0, (due - ContinuousClock.now).seconds)))
                }
                try mark()
                let (previous, current) = (marks[marks.count - 2], marks[marks.count - 1])
                let interval = current.at - previous.at
                Report.progress(
                    "  \(formatted(current.at, decimals: 0)) s: \(grouped(current.files)) files; CPU "
                        + zip(started, zip(previous.cpu, current.cpu)).map { "\($0.name) \(formatted(($1.1 - $1.0) / interval * 100, decimals: 1)) %" }.joined(separator: ", "))
            }
            var transactions = 0
            var rows = 0
            for writer in writers {
                let (count, inserted) = try writer.finish()
                transactions += count
                rows += inserted
            }
            let elapsed = marks.last!.at
            let quarter = steps / 4
            let first = marks[quarter], last = marks[steps - quarter]
            var growth: [Double] = []
            for (index, daemon) in started.enumerated() {
                let firstRate = (first.cpu[index] - marks[0].cpu[index]) / (first.at - marks[0].at)
                let lastRate = (marks[steps].cpu[index] - last.cpu[index]) / (marks[steps].at - last.at)
                growth.append(lastRate / firstRate)
                Report.progress(
                    "  syncd \(daemon.name): \(formatted(firstRate * 100, decimals: 2)) % of a core in the first quarter, "
                        + "\(formatted(lastRate * 100, decimals: 2)) % in the last (× \(formatted(lastRate / firstRate, decimals: 2)))")
            }
            let files = marks[steps].files - marks[0].files
            Report.progress(
                "  \(grouped(transactions)) transactions (\(grouped(rows)) rows) written in \(formatted(elapsed, decimals: 0)) s; "
                    + "\(grouped(files)) segment files (\(formatted(Double(files) / Double(max(transactions, 1)), decimals: 3)) per transaction)")

            // Every node must end with the same rows, all of them.
            let converged = try Self.awaitIdentical(stores, rows: rows, timeout: .seconds(120))
            guard converged else {
                let counts = try stores.map { try $0.read(#"SELECT count(*) FROM "Note""#).first?.first.map { "\($0)" } ?? "?" }
                throw BenchError(
                    "the nodes are not identical 120 s after the writers stopped (rows: \(counts.joined(separator: ", ")), expected \(rows) each); the daemons' logs:\n"
                        + started.map { "syncd \($0.name):\n\($0.log.suffix(4_000))" }.joined(separator: "\n"))
            }
            Report.progress("  all \(nodes.count) nodes identical: \(grouped(rows)) rows each")
            Report.emit(metric("soak_cpu_growth", growth.max()!, unit: "x", goal: 1.5, .lower, decimals: 3))
            Report.emit(metric("soak_files_per_min", Double(files) / (elapsed / 60), unit: "files/min", goal: nil, .lower, decimals: 0))
            Report.emit(metric("soak_transactions_per_min", Double(transactions) / (elapsed / 60), unit: "transactions/min", goal: nil, .higher, decimals: 0))
            Report.emit(metric("soak_files_per_transaction", Double(files) / Double(max(transactions, 1)), unit: "x", goal: nil, .lower, decimals: 3))
            Report.emit(metric("soak_minutes", elapsed / 60, unit: "min", goal: nil, .higher))
        }
    }

    static let soakRate = 7.0

    /// Segment files in every node folder of the account folder.
    static func segmentFiles(in account: String) throws -> Int {
        var count = 0
        for node in try FileManager.default.contentsOfDirectory(atPath: account) {
            count += try FileManager.default.contentsOfDirectory(atPath: account + "/" + node).filter { $0.hasSuffix(".lseg") && !$0.hasPrefix(".") }.count
        }
        return count
    }

    /// Whether every store holds the same `rows` notes, value for value, within `timeout`.
    static func awaitIdentical(_ stores: [Store], rows: Int, timeout: Duration) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            let contents = try stores.map { try $0.read(SegmentFixture.selectRows) }
            if contents.allSatisfy({ $0.count == rows }), Set(contents.map { "\($0)" }).count == 1 { return true }
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.25)
        }
    }

    /// A foreign writer: `python3` with its own `sqlite3` module, at `rate` transactions per second on a
    /// fixed schedule, 1–5 inserted rows each, retrying while the store is busy. Prints how many
    /// transactions and rows it committed.
    static let writerScript = #"""
        import random, sqlite3, sys, time, uuid
        path, rate, seconds, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
        rng = random.Random(seed)
        con = sqlite3.connect(path, timeout=30, isolation_level=None)
        start = time.monotonic()
        n = rows = 0
        while True:
            due = start + n / rate
            if due - start >= seconds:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            k = rng.randint(1, 5)
            while True:
                try:
                    con.execute("BEGIN IMMEDIATE")
                    for i in range(k):
                        con.execute('INSERT INTO "Note"("id", "title", "body", "rank", "score") VALUES (?, ?, ?, ?, ?)',
                                    (str(uuid.UUID(int=rng.getrandbits(128), version=4)), "soak %d.%d" % (n, i), "x" * 40, n, rng.random()))
                    con.execute("COMMIT")
                    break
                except sqlite3.OperationalError:
                    try:
                        con.execute("ROLLBACK")
                    except sqlite3.OperationalError:
                        pass
                    time.sleep(0.01)
            n += 1
            rows += k
        print(n, rows, flush=True)
        """#

    /// One foreign writer process.
    final class Writer {
        let process: ChildProcess
        let output: FileHandle

        init(script: String, store: String, rate: Double, seconds: Double, seed: Int) throws {
            let pipe = try ChildProcess.pipe()
            process = try ChildProcess(
                "/usr/bin/env", ["python3", script, store, "\(rate)", "\(seconds)", "\(seed)"],
                standardInput: .null, standardOutput: .descriptor(pipe.write.fileDescriptor))
            try pipe.write.close()
            output = pipe.read
        }

        /// Waits for the writer to end; returns the transactions and rows it committed.
        func finish() throws -> (transactions: Int, rows: Int) {
            let data = ChildProcess.readToEnd(output)
            process.waitUntilExit()
            let fields = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            guard process.terminationStatus == 0, fields.count == 2 else {
                throw BenchError("a foreign writer failed (status \(process.terminationStatus)); is python3 with its sqlite3 module installed?")
            }
            return (fields[0], fields[1])
        }

        func stop() {
            if process.isRunning { process.terminate() }
        }
    }
}

/// The CPU time a process has used so far: `utime + stime` from `/proc/PID/stat`, in seconds (clock ticks,
/// 10 ms each here), threads that ended included.
enum ProcessCPU {
    static func seconds(_ pid: Int32) throws -> Double {
        let fields = fields(pid)
        // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw BenchError("cannot read or parse /proc/\(pid)/stat")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The fields of `/proc/PID/stat` after the command name (which may hold spaces, so they are counted
    /// after its closing parenthesis): `fields[0]` is field 3, the state. Empty when it cannot be read.
    static func fields(_ pid: Int32) -> [Substring] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return [] }
        return text[text.index(after: close)...].split(separator: " ")
    }
}
