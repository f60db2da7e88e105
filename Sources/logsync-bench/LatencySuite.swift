import ArgumentParser
import Dispatch
import Foundation
import LogsyncTestKit
import LogsyncContexts
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import Synchronization

/// `latency`: commit on node A → visible in node B's store, and → delivered by a live context on B,
/// through a local shared folder, with both daemons running as real `syncd` processes.
///
/// Setup: a fresh temporary directory with a shared folder and two node folders, each with a
/// `syncd.toml` (store, the Note schema as JSON, account `bench`, the shared folder, a control socket).
/// Both daemons are started from the folder of the running `logsync-bench` executable and must log
/// "syncd ready" within 20 s. The bench then opens both stores itself (second connections next to the
/// daemons', as an app on each node would), subscribes to B's commits, and opens a `Container` on B's
/// store (connections of its own, as B's app would) whose view context's events it collects, all before
/// writing anything.
///
/// One sample: one `storeA.write { INSERT one Note }`; the clock starts when the write returns (the
/// commit is durable and visible to A's daemon). The store figure (`dir_*`) stops when a read on B's
/// store finds the row, checked each time B's commit stream reports a commit and every 10 ms without one
/// (so that a commit the bench's own monitor misses does not count as the daemons' time). The context
/// figure (`context_*`) of the same sample stops when B's view context delivers the merge event naming
/// the note, taken by the task that consumes the events as it receives it: what an app on B waits for
/// before it can show the note. A sample that takes longer than 5 s counts as 5,000 ms and is reported
/// on stderr; three in a row end the run. Samples are separated by 20 ms of idle time, so each measures
/// a fresh pickup by both daemons rather than a queue. Five unmeasured warm-up samples come first.
///
/// For the breakdown on stderr a watcher thread (inotify) in the bench notes when each segment file
/// appears in A's folder of the shared folder: commit → segment published (A's daemon: wake, export,
/// fsync, rename) and segment → visible in B (B's daemon: wake, scan, verify, import; B's commit monitor).
struct LatencySuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Commit on node A → visible in node B's store and B's view context, two real syncd processes and a local shared folder.",
        discussion: """
            Starts syncd from the folder of this executable: build every product first \
            (swift build -c release), then run .build/release/logsync-bench latency.
            """)

    @OptionGroup var options: SuiteOptions

    struct Sizes {
        var samples: Int
        static let full = Sizes(samples: 200)
        static let quick = Sizes(samples: 50)
    }

    static let suite = "latency"
    static let warmUpSamples = 5
    static let sampleTimeout: Duration = .seconds(5)
    /// B is read again after this long without a wake-up from its commit stream, so that a commit the
    /// bench's own monitor misses costs at most this much (how often that happens is reported).
    static let recheckInterval: Duration = .milliseconds(10)
    static let spacing: Duration = .milliseconds(20)
    static let readyTimeout: Duration = .seconds(20)
    static let account = "bench"

    /// The schema file every daemon of the suites registers: ``NoteFixture/schema``, written from code.
    static var schemaJSON: String { NoteFixture.schema.json }

    func run() throws {
        let sizes = options.quick ? Sizes.quick : Sizes.full
        let syncd = try Self.locateSyncd()
        if options.quick {
            Report.progress(
                "--quick: \(sizes.samples) samples instead of \(Sizes.full.samples); p99 of \(sizes.samples) samples "
                    + "is their second-largest value")
        }
        Report.progress(
            "latency: commit on A → visible in B's store and delivered by B's view context, two syncd (\(syncd)) sharing a local folder; "
                + "\(sizes.samples) samples after \(Self.warmUpSamples) warm-up, \(formatted(Self.spacing.inMilliseconds, decimals: 0)) ms idle between; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores")

        let schema = NoteFixture.schema

        let samples = try withTemporaryDirectory { directory in
            try Self.measure(directory: directory, syncd: syncd, schema: schema, samples: sizes.samples)
        }

        let latencies = samples.map(\.latency)
        let contextLatencies = samples.map(\.context)
        Report.progress(
            "  commit → visible in B's store: "
                + Self.summary(latencies, timeouts: samples.filter(\.timedOut).count))
        Report.progress(
            "  commit → delivered by B's view context: "
                + Self.summary(contextLatencies, timeouts: samples.filter(\.contextTimedOut).count))
        let slow = latencies.filter { $0 >= 100 }
        let fast = latencies.filter { $0 < 100 }
        if !slow.isEmpty {
            Report.progress(
                "  \(slow.count) of \(latencies.count) samples took 100 ms or more (\(formatted(slow.min()!, decimals: 1))–"
                    + "\(formatted(slow.max()!, decimals: 1)) ms)"
                    + (fast.isEmpty ? "" : "; the other \(fast.count): p50 \(formatted(Stats.percentile(fast, 50), decimals: 2)) ms, "
                        + "max \(formatted(fast.max()!, decimals: 2)) ms"))
        }
        let rechecked = samples.filter(\.foundByRecheck).count
        Report.progress(
            "  \(rechecked) of \(samples.count) samples were seen by the \(formatted(Self.recheckInterval.inMilliseconds, decimals: 0)) ms "
                + "re-check of B rather than after a wake-up from B's commit stream (the bench's commit monitor missed the import)")
        Self.reportBreakdown(samples)
        // What the contexts layer adds: B's container has its own commit monitor, merges, then emits. The
        // store figure's read is only a probe, so the context may be first (a negative difference).
        let contextAfterStore = samples.filter { !$0.timedOut && !$0.contextTimedOut }.map { $0.context - $0.latency }
        if !contextAfterStore.isEmpty {
            Report.progress(
                "  visible in B's store → delivered by B's view context (B's container: commit monitor, merge, event; "
                    + "negative when the context was first): " + Self.summary(contextAfterStore, timeouts: 0))
        }

        // The design brief's goals through a local folder: p50 ≤ 5 ms, p99 ≤ 15 ms.
        for (prefix, values) in [("dir", latencies), ("context", contextLatencies)] {
            Report.emit(metric("\(prefix)_p50_ms", Stats.percentile(values, 50), unit: "ms", goal: 5, .lower))
            Report.emit(metric("\(prefix)_p99_ms", Stats.percentile(values, 99), unit: "ms", goal: 15, .lower))
            Report.emit(metric("\(prefix)_mean_ms", values.reduce(0, +) / Double(values.count), unit: "ms", goal: nil, .lower))
            Report.emit(metric("\(prefix)_max_ms", values.max()!, unit: "ms", goal: nil, .lower))
            emitDistribution(prefix, values)
        }
        Report.emit(Metric(
            suite: Self.suite, metric: "samples", value: Double(latencies.count), unit: "samples", goal: nil,
            better: .higher, decimals: 0))

        try measureSyncthing(syncd: syncd, schema: schema, quick: options.quick)
    }

    /// Percentiles, mean and extremes of `values` on one line, with how many were timeouts.
    static func summary(_ values: [Double], timeouts: Int) -> String {
        "p50 \(formatted(Stats.percentile(values, 50), decimals: 2)) ms, p90 \(formatted(Stats.percentile(values, 90), decimals: 2)) ms, "
            + "p99 \(formatted(Stats.percentile(values, 99), decimals: 2)) ms, "
            + "mean \(formatted(values.reduce(0, +) / Double(values.count), decimals: 2)) ms, "
            + "min \(formatted(values.min()!, decimals: 2)) ms, max \(formatted(values.max()!, decimals: 2)) ms"
            + (timeouts > 0 ? "; \(timeouts) samples timed out (counted as \(formatted(sampleTimeout.inMilliseconds, decimals: 0)) ms)" : "")
    }

    // MARK: - Finding syncd

    /// `syncd` next to the running executable (`LOGSYNC_BIN_DIR` overrides the folder); a clear error when
    /// it has not been built.
    static func locateSyncd() throws -> String {
        let (found, folders) = Products.sibling("syncd")
        if let found { return found }
        Report.progress(
            "error: the latency suite runs real syncd processes, but there is no syncd executable in "
                + (folders.isEmpty ? "the folder of logsync-bench" : folders.joined(separator: " or ")) + ".\n"
                + "  Build it first: swift build -c release --product syncd   (or all products: swift build -c release)\n"
                + "  then run: .build/release/logsync-bench latency")
        throw ExitCode(ExitStatus.unavailable)
    }

    // MARK: - One run

    struct Sample {
        /// Milliseconds from the end of A's write to the row being visible in B (the timeout when not).
        var latency: Double
        var timedOut: Bool
        /// Milliseconds from the end of A's write to A's segment file appearing in the shared folder.
        var published: Double?
        /// The row was found by the periodic re-check, not after a wake-up from B's commit stream.
        var foundByRecheck: Bool
        /// Milliseconds from the end of A's write to B's view context delivering the note (the timeout when not).
        var context: Double
        var contextTimedOut: Bool
    }

    /// `nodeConfig` adds lines to each node's syncd.toml (the relay suite's `[relay]` table), by node name.
    /// `sharedFolder` gives each node a folder of its own that a carrier keeps in step (Syncthing), by
    /// node name; without it both share one local folder. `spacing` is the idle time between samples,
    /// plus a random part up to `jitter` (so that samples do not fall into step with a carrier's timers);
    /// `warmUp` unmeasured samples come first.
    static func measure(
        directory: TemporaryDirectory, syncd: String, schema: Schema, samples count: Int, warmUp warmUpSamples: Int = Self.warmUpSamples,
        spacing: Duration = Self.spacing, jitter: Duration = .zero, sharedFolder: ((String) -> String)? = nil,
        nodeConfig: (String) -> String = { _ in "" }
    ) throws -> [Sample] {
        let local = directory.file("shared")
        let folders = ["a", "b"].map { sharedFolder?($0) ?? local }
        for folder in Set(folders) { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let schemaFile = directory.file("schema.json")
        try Data(schemaJSON.utf8).write(to: URL(fileURLWithPath: schemaFile))
        let configs = try zip(["a", "b"], folders).map {
            try writeNodeConfig(directory: directory, name: $0, schemaFile: schemaFile, shared: $1, extra: nodeConfig($0))
        }

        // Daemons are stopped on every way out of this function (and by the signal handler on Ctrl-C).
        let daemons = Daemons(scratch: directory.path)
        defer { daemons.stopAll() }
        let daemonA = try daemons.start(name: "A", executable: syncd, arguments: ["--config", configs[0]])
        let daemonB = try daemons.start(name: "B", executable: syncd, arguments: ["--config", configs[1]])
        let readyStart = ContinuousClock.now
        try daemonA.awaitReady(timeout: readyTimeout)
        try daemonB.awaitReady(timeout: readyTimeout)
        Report.progress("  both daemons ready after \(formatted((ContinuousClock.now - readyStart).inMilliseconds, decimals: 0)) ms (pids \(daemonA.pid), \(daemonB.pid))")

        let storeA = try Store(path: directory.file("a/store.sqlite"), schema: schema)
        let storeB = try Store(path: directory.file("b/store.sqlite"), schema: schema)
        // B's app: a container with store connections of its own, not the ones the store figure reads.
        let containerB = try Container(path: directory.file("b/store.sqlite"), schema: schema)
        defer { containerB.close() }
        let contextArrivals = ContextArrivals(containerB.viewContext)

        // Subscribe to B's commits before the first write; each commit wakes the waiting sample.
        let wakeups = DispatchSemaphore(value: 0)
        let commits = storeB.commits()
        let consumer = Task.detached {
            for await _ in commits { wakeups.signal() }
        }
        defer { consumer.cancel() }

        let segmentFolder = folders[0] + "/" + account + "/" + storeA.nodeID
        let watcher = SegmentWatcher(folder: segmentFolder)
        if watcher == nil { Report.progress("  (no inotify on \(segmentFolder): no breakdown)") }
        defer { watcher?.stop() }

        let rows = NoteFixture.rows(count: warmUpSamples + count)
        var results: [Sample] = []
        var consecutiveTimeouts = 0
        for (index, row) in rows.enumerated() {
            let measured = index >= warmUpSamples
            let sample = try takeSample(
                row, from: storeA, to: storeB, wakeups: wakeups, contextArrivals: contextArrivals, watcher: watcher,
                daemons: [daemonA, daemonB])
            if sample.timedOut || sample.contextTimedOut {
                Report.progress(
                    "  \(measured ? "sample \(index - warmUpSamples + 1)" : "warm-up sample \(index + 1)"): row \(row.id) "
                        + "not \(sample.timedOut ? "visible in B's store" : "delivered by B's view context") after "
                        + "\(formatted(sampleTimeout.inMilliseconds, decimals: 0)) ms"
                        + (sample.published.map { " (segment published after \(formatted($0, decimals: 1)) ms)" } ?? " (no segment seen)"))
                consecutiveTimeouts += 1
                if consecutiveTimeouts == 3 {
                    throw BenchError(
                        "3 samples in a row did not reach B's store or B's view context. The daemons' logs:\n"
                            + [daemonA, daemonB].map { "syncd \($0.name):\n\($0.log)" }.joined(separator: "\n"))
                }
            } else {
                consecutiveTimeouts = 0
            }
            if measured {
                results.append(sample)
                if results.count % 50 == 0 || results.count == count {
                    let latencies = results.map(\.latency)
                    let contextLatencies = results.map(\.context)
                    Report.progress(
                        "  \(results.count)/\(count) samples: store p50 \(formatted(Stats.percentile(latencies, 50), decimals: 2)) ms, "
                            + "max \(formatted(latencies.max()!, decimals: 2)) ms; "
                            + "view context p50 \(formatted(Stats.percentile(contextLatencies, 50), decimals: 2)) ms, "
                            + "max \(formatted(contextLatencies.max()!, decimals: 2)) ms")
                }
            } else if index == warmUpSamples - 1 {
                Report.progress("  warm-up done (\(warmUpSamples) samples, last \(formatted(sample.latency, decimals: 2)) ms)")
            }
            Thread.sleep(forTimeInterval: spacing.seconds + Double.random(in: 0...jitter.seconds))
        }

        let total = try storeB.read(#"SELECT count(*) FROM "Note""#)
        guard total.first?.first == .integer(Int64(rows.count)) else {
            throw BenchError("B holds \(String(describing: total.first?.first)) rows at the end, expected \(rows.count)")
        }
        return results
    }

    /// Makes the node folder `name` in `directory` with a `syncd.toml` (store, schema, account, shared folder,
    /// control socket; every other key at its default) and returns the configuration's path.
    static func writeNodeConfig(directory: TemporaryDirectory, name: String, schemaFile: String, shared: String, extra: String = "") throws -> String {
        let folder = directory.file(name)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let config = folder + "/syncd.toml"
        try Data(
            """
            [store]
            path = "store.sqlite"
            schema = "\(schemaFile)"

            [sync]
            account = "\(account)"
            shared_folder = "\(shared)"

            [control]
            socket = "s.sock"

            \(extra)
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        return config
    }

    /// Writes `row` on A and waits until B's store shows it and B's view context has delivered it.
    static func takeSample(
        _ row: NoteRow, from storeA: Store, to storeB: Store, wakeups: DispatchSemaphore, contextArrivals: ContextArrivals,
        watcher: SegmentWatcher?, daemons: [Daemon]
    ) throws -> Sample {
        // Forget wake-ups from earlier commits (B's own bookkeeping, the previous sample).
        while wakeups.wait(timeout: .now()) == .success {}
        for daemon in daemons where !daemon.isRunning {
            throw BenchError("syncd \(daemon.name) exited (status \(daemon.exitStatus)); its log:\n\(daemon.log)")
        }

        try storeA.write(author: "bench", context: "latency") { tx in
            try tx.execute(NoteFixture.plainInsertSQL, row.arguments)
        }
        let committed = ContinuousClock.now
        let deadline = committed + sampleTimeout
        let query = #"SELECT 1 FROM "Note" WHERE "id" = ?"#
        let key: [DatabaseValue] = [.text(row.id)]
        var visible: ContinuousClock.Instant?
        var woken = true
        while true {
            if try !storeB.read(query, key).isEmpty {
                visible = ContinuousClock.now
                break
            }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { break }
            let wait = min(remaining, recheckInterval)
            woken = wakeups.wait(timeout: .now() + .nanoseconds(Int(wait.inNanoseconds))) == .success
        }
        let end = visible ?? ContinuousClock.now
        let published = watcher?.firstArrival(from: committed, through: end).map { ($0 - committed).inMilliseconds }
        // The view context's delivery was timed by the events consumer when it happened, whichever came first.
        let delivered = contextArrivals.arrival(of: row.id, by: deadline)
        return Sample(
            latency: visible.map { ($0 - committed).inMilliseconds } ?? sampleTimeout.inMilliseconds,
            timedOut: visible == nil, published: published, foundByRecheck: visible != nil && !woken,
            context: delivered.map { ($0 - committed).inMilliseconds } ?? sampleTimeout.inMilliseconds,
            contextTimedOut: delivered == nil)
    }

    // MARK: - Statistics

    static func reportBreakdown(_ samples: [Sample]) {
        let matched = samples.filter { $0.published != nil && !$0.timedOut }
        guard !matched.isEmpty else {
            Report.progress("  breakdown: no segment arrivals were matched to samples")
            return
        }
        let exportTimes = matched.map { $0.published! }
        let importTimes = matched.map { $0.latency - $0.published! }
        func line(_ label: String, _ values: [Double]) -> String {
            "\(label): p50 \(formatted(Stats.percentile(values, 50), decimals: 2)) ms, p99 \(formatted(Stats.percentile(values, 99), decimals: 2)) ms, "
                + "mean \(formatted(values.reduce(0, +) / Double(values.count), decimals: 2)) ms, max \(formatted(values.max()!, decimals: 2)) ms"
        }
        Report.progress(
            "  breakdown over \(matched.count) of \(samples.count) samples (a segment file seen in A's folder between commit and visibility):\n"
                + "    " + line("commit on A → segment file in the shared folder (A's syncd: wake, export, publish)", exportTimes) + "\n"
                + "    " + line("segment file → row visible in B (B's syncd: wake, scan, import; B's commit monitor)", importTimes))
    }
}

// MARK: - Durations

extension Duration {
    var inMilliseconds: Double { seconds * 1e3 }
    var inNanoseconds: Int64 {
        let parts = components
        return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }
}

// MARK: - Daemon processes

extension LatencySuite {
    /// One `syncd` child (TestKit's ``Subprocess``, which reads its output without losing any): its
    /// process and everything it wrote to stderr.
    final class Daemon: Sendable {
        let name: String
        private let child: Subprocess
        private var process: ChildProcess { child.process }

        init(name: String, executable: String, arguments: [String]) throws {
            self.name = name
            child = try Subprocess(executable, arguments)
            try child.closeInput()
        }

        var pid: Int32 { process.processIdentifier }
        /// Sends `signal` unless the daemon has ended (and its pid may be another's).
        func signal(_ signal: Int32) { process.terminate(signal) }
        var isRunning: Bool { process.isRunning }
        var exitStatus: Int32 { process.isRunning ? -1 : process.terminationStatus }
        var log: String { child.stderr }

        /// Waits for "syncd ready" on stderr; throws with the daemon's log when it exits or the deadline passes.
        func awaitReady(timeout: Duration) throws {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if log.contains("syncd ready") { return }
                if !process.isRunning {
                    Thread.sleep(forTimeInterval: 0.05)  // let the pipe drain
                    throw BenchError("syncd \(name) exited with status \(process.terminationStatus) before it was ready; its log:\n\(log)")
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
            throw BenchError("syncd \(name) was not ready after \(formatted(timeout.inMilliseconds / 1000, decimals: 0)) s; its log:\n\(log)")
        }

        /// SIGTERM (again, if already sent), then waits up to `grace` for the exit; SIGKILL after that.
        /// Returns how it ended.
        @discardableResult
        func stop(grace: Duration = .seconds(10)) -> String {
            guard process.isRunning else { return "stopped (status \(process.terminationStatus))" }
            guard process.stop(grace: grace) else { return "killed with SIGKILL after \(formatted(grace.inMilliseconds / 1000, decimals: 0)) s" }
            return "stopped (status \(process.terminationStatus))"
        }
    }

    /// The daemons this run started. Stops them all when asked, and on SIGINT or SIGTERM to the bench.
    /// `@unchecked`: Dispatch's signal sources are not `Sendable`, so no lock type can hold them; they
    /// are touched only by `init` and `stopAll()`, both on the suite's thread.
    final class Daemons: @unchecked Sendable {
        private let members = Mutex<[Daemon]>([])
        private var signalSources: [DispatchSourceSignal] = []
        /// The run's temporary directory, removed when a signal ends the run.
        private let scratch: String

        init(scratch: String) {
            self.scratch = scratch
            var sources: [DispatchSourceSignal] = []
            for number in [SIGINT, SIGTERM] {
                HandledSignals.ignore(number)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [self] in
                    let running = members.withLock { $0 }
                    FileHandle.standardError.write(Data("logsync-bench: interrupted, stopping \(running.count) syncd\n".utf8))
                    for daemon in running { daemon.stop() }
                    try? FileManager.default.removeItem(atPath: scratch)
                    Foundation.exit(128 + number)
                }
                source.resume()
                sources.append(source)
            }
            signalSources = sources
        }

        func start(name: String, executable: String, arguments: [String]) throws -> Daemon {
            let daemon = try Daemon(name: name, executable: executable, arguments: arguments)
            members.withLock { $0.append(daemon) }
            return daemon
        }

        /// Stops every daemon (SIGTERM, SIGKILL after 10 s), waits for each, and restores default signal handling.
        func stopAll() {
            let daemons = members.withLock { list in
                defer { list.removeAll() }
                return list
            }
            // Ask all first, so they shut down in parallel.
            let signalled = daemons.map { daemon in
                guard daemon.isRunning else { return false }
                daemon.signal(SIGTERM)
                return true
            }
            for (daemon, wasRunning) in zip(daemons, signalled) {
                let outcome = daemon.stop()
                Report.progress("  syncd \(daemon.name): \(wasRunning ? outcome : "had already exited (status \(daemon.exitStatus))")")
            }
            for source in signalSources { source.cancel() }
            signalSources.removeAll()
            HandledSignals.restoreDefault(SIGINT)
            HandledSignals.restoreDefault(SIGTERM)
        }
    }
}

// MARK: - View context deliveries

extension LatencySuite {
    /// When B's view context delivered each note in a merge event (`Context.events()`), timed by the task
    /// that consumes the events as it receives each one, so that the sample loop, busy reading B's store,
    /// does not delay the measurement. The consuming task ends when the container closes, which ends the
    /// stream.
    final class ContextArrivals: Sendable {
        private let arrivals = Mutex<[String: ContinuousClock.Instant]>([:])
        private let wakeups = DispatchSemaphore(value: 0)

        init(_ context: Context) {
            let events = context.events()
            Task.detached { [self] in
                for await event in events where event.cause == .merge {
                    let now = ContinuousClock.now
                    if let error = event.error { Report.progress("  B's view context: an automatic merge failed: \(error)") }
                    arrivals.withLock { arrivals in
                        for object in event.inserted { arrivals[object.id.uuidString.lowercased()] = now }
                    }
                    wakeups.signal()
                }
            }
        }

        /// When the note with key `id` was delivered, waiting for it until `deadline`; nil if it was not.
        func arrival(of id: String, by deadline: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            while true {
                if let instant = arrivals.withLock({ $0.removeValue(forKey: id) }) { return instant }
                let remaining = deadline - ContinuousClock.now
                if remaining <= .zero { return nil }
                _ = wakeups.wait(timeout: .now() + .nanoseconds(Int(remaining.inNanoseconds)))
            }
        }
    }
}

// MARK: - Segment arrivals

extension LatencySuite {
    /// Notes the time each new segment file appears in one node's folder of the shared folder (inotify on
    /// the folder; the rename that publishes a segment is an event).
    final class SegmentWatcher: Sendable {
        private let watcher: WatchThread
        private let log = ArrivalLog()

        private final class ArrivalLog: Sendable {
            let times = Mutex<[ContinuousClock.Instant]>([])
        }

        init?(folder: String) {
            guard let watch = DirectoryWatch(directory: folder) else { return nil }
            let log = log
            watcher = WatchThread(name: "latency.segment-watcher", watch: watch) { waiter in
                var seen = Set<String>()
                while waiter.next(timeoutMilliseconds: 1_000).wake != .stopped {
                    let now = ContinuousClock.now
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
                    var fresh = 0
                    for name in names where !name.hasPrefix(".") && name.hasSuffix(".lseg") && !seen.contains(name) {
                        seen.insert(name)
                        fresh += 1
                    }
                    if fresh > 0 { log.times.withLock { $0.append(now) } }
                }
            }
        }

        /// The first arrival in `start...end`, if any.
        func firstArrival(from start: ContinuousClock.Instant, through end: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            log.times.withLock { list in list.first { $0 >= start && $0 <= end } }
        }

        func stop() { watcher.stop() }
    }
}
