import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncStore
import Synchronization

/// `stall`: how long a local writer waits while a large remote import runs on the same store.
///
/// N remote changes (Note inserts written into a source store in transactions of 1,000 rows and exported
/// as segments of at most 2,000 changes) are imported into a fresh target store with `importSegments`,
/// decoding each segment as the import asks for it (as `syncd` does), on the calling thread. Meanwhile a second thread performs one-row
/// local writes (`target.write(author: "local") { INSERT … }`), back to back, until the import finishes,
/// and records each write's latency with a monotonic clock.
///
/// Two variants: the writer uses the same `Store` object as the import (it waits on the store's writer
/// lock), or a second `Store` opened on the same file in the same process (it waits in SQLite's busy
/// handler).
///
/// Against: the same writer with no import running (`idle`): a fresh target store set up as for the
/// same-store variant, the same writer loop, for as long as the latest same-store import took (round 1
/// starts with one). Its longest write is what this disk's fsync and checkpoints cost a one-row commit
/// anyway; `writer_stall_vs_idle` is the stall over it, so it says what the import adds. The idle store
/// stays small (only the local writes), as the import's target starts empty.
///
/// Each round runs the three on fresh files, in one order (same store, other connection, idle) and the
/// next round in the reverse order, so that which goes first alternates; a figure is the median over rounds
/// of the per-round figure (the longest wait of a round, its p50, the stall over the idle longest write, …).
struct StallSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "stall",
        abstract: "Longest local write while a large remote import applies to the same store.")

    @OptionGroup var options: SuiteOptions

    typealias Sizes = ImportSizes

    static let suite = "stall"

    enum Variant: String {
        case sameStore = "same store"
        case otherConnection = "other connection"
        /// The same-store setup and writer with no import running.
        case idle = "idle, no import"
    }

    func run() throws {
        let sizes = options.quick ? Sizes.quick : Sizes.full
        if options.quick {
            Report.progress(
                "--quick: sizes scaled down to \(grouped(sizes.changes)) remote changes, \(sizes.rounds) rounds "
                    + "(full run: \(grouped(Sizes.full.changes)) changes, \(Sizes.full.rounds) rounds)")
        }
        Report.progress(
            "stall: one-row local writes while \(grouped(sizes.changes)) remote changes import "
                + "(segments of at most \(grouped(SegmentFixture.maximumChanges)) changes), \(sizes.rounds) rounds; "
                + "SQLite \(PlainDatabase.libraryVersion), \(ProcessInfo.processInfo.activeProcessorCount) cores")

        let rows = NoteFixture.rows(count: sizes.changes)
        let segments = try SegmentFixture.segments(rows[...])
        let changes = try SegmentFixture.changeCount(segments)
        guard changes == sizes.changes else {
            throw BenchError("the source exported \(changes) changes, expected \(sizes.changes)")
        }
        Report.progress("  source: \(segments.count) segments, \(grouped(segments.reduce(0) { $0 + $1.bytes.count })) bytes")

        // Untimed: pages in code and warms the file system before the first measured round.
        let warmUp = try SegmentFixture.segments(rows[..<Sizes.warmUp.changes])
        for variant in [Variant.sameStore, .otherConnection] {
            _ = try Self.measure(warmUp, changes: Sizes.warmUp.changes, variant: variant)
        }

        var same: [RoundResult] = []
        var other: [RoundResult] = []
        var idle: [RoundResult] = []
        for index in 0..<sizes.rounds {
            let order: [Variant] = index % 2 == 0 ? [.sameStore, .otherConnection, .idle] : [.idle, .otherConnection, .sameStore]
            for variant in order {
                if variant == .idle {
                    // As long as the latest same-store import: this round's, or (idle first) the round before's.
                    let result = try Self.measure(segments, changes: changes, variant: .idle, idleSeconds: same.last!.importSeconds)
                    idle.append(result)
                    Report.progress(
                        "  round \(index + 1)/\(sizes.rounds), \(variant.rawValue): longest write \(formatted(result.maximum * 1e3, decimals: 2)) ms, "
                            + "p50 \(formatted(result.p50 * 1e3, decimals: 3)) ms, p99 \(formatted(result.p99 * 1e3, decimals: 2)) ms, "
                            + "\(grouped(result.writes)) local writes (\(result.failures) failed) in \(formatted(result.importSeconds)) s; longest write = "
                            + "\(formatted(result.longestWait * 1e3, decimals: 1)) ms before its body + \(formatted(result.longestCommit * 1e3, decimals: 1)) ms after it")
                    continue
                }
                let result = try Self.measure(segments, changes: changes, variant: variant)
                if variant == .sameStore { same.append(result) } else { other.append(result) }
                Report.progress(
                    "  round \(index + 1)/\(sizes.rounds), \(variant.rawValue): longest write \(formatted(result.maximum * 1e3, decimals: 2)) ms, "
                        + "p50 \(formatted(result.p50 * 1e3, decimals: 3)) ms, p99 \(formatted(result.p99 * 1e3, decimals: 2)) ms, "
                        + "\(grouped(result.writes)) local writes (\(result.failures) failed); import \(formatted(result.importSeconds)) s "
                        + "(\(grouped(Int(Double(changes) / result.importSeconds))) changes/s; waiting for decode \(formatted(result.decodeSeconds)) s); "
                        + "longest write = "
                        + "\(formatted(result.longestWait * 1e3, decimals: 1)) ms before its body (lock, BEGIN) + "
                        + "\(formatted(result.longestCommit * 1e3, decimals: 1)) ms after it (COMMIT), "
                        + "\(result.longestSpan) segments were committed while it waited (most for any write: \(result.maximumSpan)); "
                        + "longest COMMIT part of any write \(formatted(result.maximumCommit * 1e3, decimals: 1)) ms")
            }
        }
        for (variant, results) in [(Variant.sameStore, same), (.otherConnection, other), (.idle, idle)] {
            Report.progress(
                "  \(variant.rawValue): longest write per round "
                    + results.map { formatted($0.maximum * 1e3, decimals: 2) }.joined(separator: ", ")
                    + " ms (median \(formatted(Stats.median(results.map(\.maximum)) * 1e3, decimals: 2)) ms, worst "
                    + "\(formatted(results.map(\.maximum).max()! * 1e3, decimals: 2)) ms)")
        }
        let failures = (same + other + idle).reduce(0) { $0 + $1.failures }
        if failures > 0 {
            Report.progress("  warning: \(failures) local writes failed (their waits are included in the latencies)")
        }

        let importSeconds = Stats.median(same.map(\.importSeconds))
        Report.emit(metric("writer_stall_ms", Stats.median(same.map(\.maximum)) * 1e3, unit: "ms", goal: 50, .lower, decimals: 2))
        Report.emit(metric("writer_p50_ms", Stats.median(same.map(\.p50)) * 1e3, unit: "ms", goal: nil, .lower, decimals: 3))
        Report.emit(metric("writer_p99_ms", Stats.median(same.map(\.p99)) * 1e3, unit: "ms", goal: nil, .lower, decimals: 3))
        Report.emit(metric("import_changes_per_s", Double(changes) / importSeconds, unit: "changes/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("local_writes", Stats.median(same.map { Double($0.writes) }), unit: "writes", goal: nil, .higher, decimals: 0))
        Report.emit(metric(
            "writer_stall_other_connection_ms", Stats.median(other.map(\.maximum)) * 1e3, unit: "ms", goal: nil, .lower, decimals: 2))
        Report.emit(metric("writer_idle_stall_ms", Stats.median(idle.map(\.maximum)) * 1e3, unit: "ms", goal: nil, .lower, decimals: 2))
        Report.emit(metric(
            "writer_stall_vs_idle", Stats.median(zip(same, idle).map { $0.maximum / $1.maximum }), unit: "x", goal: 2.0, .lower, decimals: 3))
    }

    // MARK: - One measurement

    struct RoundResult {
        /// Local write latencies, in seconds.
        var maximum: Double
        var p50: Double
        var p99: Double
        var writes: Int
        var failures: Int
        /// The whole import (decoding included), in seconds; idle: how long the writer ran.
        var importSeconds: Double
        /// The part of it spent waiting for a segment to be decoded (on another thread).
        var decodeSeconds: Double
        /// The longest write's parts: before its body ran, and after.
        var longestWait: Double
        var longestCommit: Double
        /// The longest post-body part of any write (commit, checkpoint).
        var maximumCommit: Double
        /// Segments whose batch committed during the longest write, and the most during any write.
        var longestSpan: Int
        var maximumSpan: Int
    }

    /// Imports `segments` into a fresh target store while a local writer runs on another thread; `idle`:
    /// the same store and writer, with no import, for `idleSeconds`.
    static func measure(_ segments: [OutboxSegment], changes: Int, variant: Variant, idleSeconds: Double = 0) throws -> RoundResult {
        try withTemporaryDirectory { directory in
            let path = directory.file("target.sqlite")
            let target = try Store(path: path, schema: NoteFixture.schema)
            let local = variant == .otherConnection ? try Store(path: path, schema: NoteFixture.schema) : target
            let writer = LocalWriter(store: local)
            writer.start()

            let clock = ContinuousClock()
            var imported = SegmentFixture.Imported()
            let importStart = clock.now
            if variant == .idle {
                Thread.sleep(forTimeInterval: idleSeconds)
            } else {
                do {
                    imported = try SegmentFixture.importAll(segments, into: target, segmentApplied: writer.segmentImported)
                } catch {
                    _ = writer.stop()
                    throw error
                }
            }
            let importSeconds = (clock.now - importStart).seconds
            let samples = writer.stop()

            guard !samples.latencies.isEmpty else { throw BenchError("the local writer never wrote") }
            if let message = samples.firstError {
                Report.progress("  \(variant.rawValue): \(samples.failures) local writes failed; first: \(message)")
            }
            let succeeded = samples.latencies.count - samples.failures
            try SegmentFixture.expectRows(target, (variant == .idle ? 0 : changes) + succeeded, "the target store")
            let sorted = samples.latencies.sorted()
            let longest = samples.waits.indices.max { samples.waits[$0] + samples.commits[$0] < samples.waits[$1] + samples.commits[$1] }
            return RoundResult(
                maximum: sorted.last!, p50: Stats.percentile(sorted, 50), p99: Stats.percentile(sorted, 99),
                writes: samples.latencies.count, failures: samples.failures, importSeconds: importSeconds,
                decodeSeconds: imported.decodeSeconds,
                longestWait: longest.map { samples.waits[$0] } ?? 0, longestCommit: longest.map { samples.commits[$0] } ?? 0,
                maximumCommit: samples.commits.max() ?? 0, longestSpan: longest.map { samples.spans[$0] } ?? 0,
                maximumSpan: samples.spans.max() ?? 0)
        }
    }
}

/// One-row local writes, back to back on a thread of their own, until stopped.
final class LocalWriter: Sendable {
    struct Samples: Sendable {
        /// Seconds per write, in order, failed ones included.
        var latencies: [Double] = []
        /// Of each successful write: seconds until its body ran (the store's lock, `BEGIN IMMEDIATE` with
        /// SQLite's busy handler, sealing), and seconds after the body (marker, `COMMIT`, any checkpoint).
        var waits: [Double] = []
        var commits: [Double] = []
        /// Of each successful write: how many segments' batches committed while it waited.
        var spans: [Int] = []
        var failures = 0
        var firstError: String?
    }

    let store: Store
    private let stopping = Atomic<Bool>(false)
    private let importedSegments = Atomic<Int>(0)
    private let running = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let samples = Mutex(Samples())

    init(store: Store) { self.store = store }

    /// Starts the writer thread and returns once its first write has committed.
    func start() {
        let thread = Thread { [self] in loop() }
        thread.name = "local-writer"
        thread.start()
        running.wait()
    }

    /// Called by the importer as each segment's outcome is reported (after its batch committed), so that a
    /// write can tell how many it waited through.
    func segmentImported() {
        importedSegments.add(1, ordering: .relaxed)
    }

    /// Stops the writer after its current write and returns what it measured.
    func stop() -> Samples {
        stopping.store(true, ordering: .releasing)
        finished.wait()
        return samples.withLock { $0 }
    }

    private func loop() {
        var result = Samples()
        result.latencies.reserveCapacity(1 << 16)
        let clock = ContinuousClock()
        var index: Int64 = 0
        while index == 0 || !stopping.load(ordering: .acquiring) {
            let arguments: [DatabaseValue] = [
                .text(UUID().uuidString.lowercased()), .text("local \(index)"), .text("written while a remote import applies"),
                .integer(index), .real(Double(index)),
            ]
            let segmentsBefore = importedSegments.load(ordering: .relaxed)
            let start = clock.now
            var bodyStart = start
            var bodyEnd = start
            do {
                try store.write(author: "local") {
                    bodyStart = clock.now
                    try $0.execute(NoteFixture.plainInsertSQL, arguments)
                    bodyEnd = clock.now
                }
                let end = clock.now
                result.latencies.append((end - start).seconds)
                result.waits.append((bodyStart - start).seconds)
                result.commits.append((end - bodyEnd).seconds)
                result.spans.append(importedSegments.load(ordering: .relaxed) - segmentsBefore)
            } catch {
                result.failures += 1
                if result.firstError == nil { result.firstError = "\(error)" }
                result.latencies.append((clock.now - start).seconds)
            }
            if index == 0 { running.signal() }
            index += 1
        }
        samples.withLock { [result] in $0 = result }
        finished.signal()
    }
}
