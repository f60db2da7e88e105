import Foundation
import LogsyncCore
import LogsyncDaemon
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
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
        defer { if writer.process.isRunning { kill(writer.process.processIdentifier, SIGKILL) } }
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
        kill(writer.process.processIdentifier, SIGTERM)
        let status = try await writer.waitForExit(timeout: .seconds(20))
        guard status == 0, let line = writer.stdout.split(separator: "\n").last(where: { $0.hasPrefix("commits ") }) else {
            throw SubprocessError.exited(status: status, stdout: writer.stdout, stderr: writer.stderr)
        }
        return Int(line.dropFirst("commits ".count)) ?? 0
    }
}
