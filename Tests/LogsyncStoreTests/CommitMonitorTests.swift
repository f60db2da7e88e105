import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing

@Suite("Remote change detection", .serialized)
struct CommitMonitorTests {
    /// Two processes besides the test runner: `logsync watch` holds the store open and prints each token
    /// with the time it arrived; `logsync exec` commits. The watcher's fallback look comes a minute after
    /// the last event (`LOGSYNC_COMMIT_FALLBACK_MS`), so a commit that inotify did not bring shows as a
    /// missed 30 s deadline, whatever the machine's load. How fast it is belongs to `logsync-bench latency`.
    @Test("a commit by another process is reported through inotify, not by the fallback's timeout")
    func crossProcessCommitReported() async throws {
        let directory = try TemporaryDirectory("mon")
        let (store, schemaFile) = try Fixtures.store(in: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_COMMIT_FALLBACK_MS"] = "60000"
        let watcher = try Subprocess(Products.path("logsync"), ["watch", "--store", store.path, "--schema", schemaFile], environment: environment)
        _ = try await watcher.line(startingWith: "watching")

        var delays: [Double] = []
        for round in 0..<5 {
            let sql = "INSERT INTO Note(id, title) VALUES ('\(Fixtures.idText())', 'round \(round)')"
            let writer = try Subprocess(
                Products.path("logsync"), ["exec", "--store", store.path, "--schema", schemaFile, "--author", "other", sql])
            let committed = try await writer.line(startingWith: "committed ").split(separator: " ")
            let token = committed[1]
            let seen = try await watcher.line(startingWith: "token \(token) ", timeout: .seconds(30)).split(separator: " ")
            delays.append(Double(Int64(seen[2])! - Int64(committed[2])!) / 1_000_000)
            _ = try await writer.waitForExit()
        }
        try await watcher.kill9()
        print("commit monitor delays (ms): \(delays.map { String(format: "%.2f", $0) })")
    }

    /// A commit is announced by an inotify event on the WAL before SQLite publishes it in the -shm index;
    /// a monitor that checks only once per event misses some commits until its fallback look. Here that
    /// look comes after a minute, so a missed commit fails the 30 s deadline.
    @Test("every one of 200 commits by another connection is reported without the fallback's timeout")
    func noCommitIsMissed() async throws {
        let directory = try TemporaryDirectory("mon")
        let (store, _) = try Fixtures.store(in: directory)
        let writer = try Store(path: store.path, schema: Fixtures.schema)
        let seen = Locked<HistoryToken>(.zero)
        let observation = store.observeCommits(pollInterval: .milliseconds(20), fallbackMilliseconds: 60_000) { token in
            seen.withLock { $0 = max($0, token) }
        }
        defer { observation.cancel() }
        var delays: [Duration] = []
        for index in 0..<200 {
            try writer.write(author: "w") { try $0.insert("Note", ["id": Fixtures.id()]) }
            let token = try writer.currentToken()
            let start = ContinuousClock.now
            try await eventually(within: .seconds(30), every: .microseconds(200), "commit \(index) (token \(token)) to be reported") {
                seen.withLock { $0 } >= token
            }
            delays.append(ContinuousClock.now - start)
        }
        print("200 commits: worst report delay \(delays.max()!), \(delays.filter { $0 > .milliseconds(100) }.count) over 100 ms")
    }

    @Test("a foreign write is sealed and reported with its token")
    func foreignCommitReported() async throws {
        let directory = try TemporaryDirectory("mon")
        let (store, _) = try Fixtures.store(in: directory)
        let reported = Locked<[HistoryToken]>([])
        let commits = store.commits()
        let watcher = Task {
            for await token in commits { reported.withLock { $0.append(token) } }
        }
        defer { watcher.cancel() }
        let result = try await runSQLiteShell(on: store.path, "INSERT INTO Note(id) VALUES ('\(Fixtures.idText())')")
        #expect(result.status == 0)
        let token = try await eventually(within: .seconds(30), "a token from the commit monitor") { reported.withLock { $0.last } }
        let history = try store.history()
        #expect(history.map(\.token) == [token])
        #expect(history.first?.author == nil)
    }

    /// The monitor sleeps in poll(2): a watching process idle for 2 s uses a few milliseconds of CPU.
    @Test("an idle monitor does not spin a core")
    func idleMonitorDoesNotSpin() async throws {
        let directory = try TemporaryDirectory("mon")
        let (store, schemaFile) = try Fixtures.store(in: directory)
        let watcher = try Subprocess(Products.path("logsync"), ["watch", "--store", store.path, "--schema", schemaFile, "--seconds", "2"])
        _ = try await watcher.line(startingWith: "watching")
        let line = try await watcher.line(startingWith: "cpu_ms ", timeout: .seconds(30))
        let cpu = try #require(Double(line.split(separator: " ")[1]))
        print("watch process CPU over 2 s (including start-up): \(cpu) ms")
        #expect(cpu < 400, "a spinning monitor would use ~2000 ms")
    }
}
