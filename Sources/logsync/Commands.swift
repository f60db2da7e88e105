import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncTransport

struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run SQL statements in one write transaction, recorded in history with an author and context.",
        discussion: "Prints 'committed <token> <realtime-ns>' after the commit.")

    @OptionGroup var options: StoreOptionGroup
    @Option(help: "Author recorded with the transaction.") var author: String?
    @Option(help: "Context name recorded with the transaction.") var context: String?
    @Argument(help: "SQL statements, run in order in one transaction.") var statements: [String]

    func run() throws {
        try reportingErrors {
            let store = try options.open()
            try store.write(author: author, context: context) { tx in
                for statement in statements { try tx.execute(statement) }
            }
            let stamp = WallClock.nanoseconds()
            printFlushed("committed \(try store.currentToken()) \(stamp)")
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print history transactions after a token.")

    @OptionGroup var options: StoreOptionGroup
    @Option(help: "Print transactions after this token.") var after: Int64 = 0
    @Option(help: "Only transactions by this author.") var author: String?
    @Option(help: "Only changes to this entity.") var entity: String?
    @Option(help: "At most this many transactions.") var limit: Int = 1_000
    @Flag(help: "Print a JSON array of transactions (values as docs/history.md, \"Values are kept byte for byte\", shows).") var json = false

    func run() throws {
        try reportingErrors {
            let store = try options.open()
            let filter = HistoryFilter(authors: author.map { [$0] }, entities: entity.map { [$0] })
            let transactions = try store.history(after: HistoryToken(after), filter: filter, limit: limit)
            if json {
                printJSON(transactions.map(HistoryJSON.init))
                return
            }
            for transaction in transactions {
                print(HistoryFormatter.describe(transaction))
            }
        }
    }
}

/// A history transaction in `logsync history --json`.
struct HistoryJSON: Encodable {
    struct Change: Encodable {
        var kind: String
        var entity: String
        var key: DatabaseValue
        var columns: [String]
        var tombstone: [String: DatabaseValue]?
    }

    var token: Int64
    /// The hybrid logical clock, as stored.
    var timestamp: UInt64
    /// The same as UTC wall time.
    var time: String
    var origin: String
    var author: String?
    var context: String?
    var changes: [Change]

    init(_ transaction: HistoryTransaction) {
        token = transaction.token.rawValue
        timestamp = transaction.timestamp.rawValue
        time = transaction.timestamp.wallClockDescription
        origin = "\(transaction.origin)"
        author = transaction.author
        context = transaction.contextName
        changes = transaction.changes.map {
            Change(kind: "\($0.kind)", entity: $0.entity, key: $0.primaryKey, columns: $0.changedColumns, tombstone: $0.tombstone)
        }
    }
}

/// Prints `value` as one line of JSON, keys sorted.
func printJSON<T: Encodable>(_ value: T) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    if let data = try? encoder.encode(value) { FileHandle.standardOutput.write(data + Data("\n".utf8)) }
}

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove history transactions older than a token.")

    @OptionGroup var options: StoreOptionGroup
    @Option(help: "Remove transactions before this token.") var before: Int64

    func run() throws {
        try reportingErrors {
            let removed = try options.open().purgeHistory(before: HistoryToken(before))
            print("removed \(removed) transactions")
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print 'token <token> <realtime-ns>' each time any process commits to the store.",
        discussion: "With --seconds, exits after that long and prints the CPU time the process used.")

    @OptionGroup var options: StoreOptionGroup
    @Option(help: "Stop after this many seconds (default: run until interrupted).") var seconds: Double?

    func run() async throws {
        let store: Store
        do {
            store = try options.open()
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(error.exitStatus)
        }
        let watcher = Task {
            for await token in store.commits() {
                printFlushed("token \(token) \(WallClock.nanoseconds())")
            }
        }
        printFlushed("watching \(try store.currentToken())")
        if let seconds {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            watcher.cancel()
            let cpu = ProcessUsage.cpuTime / .milliseconds(1)
            printFlushed("cpu_ms \(cpu)")
        } else {
            await watcher.value
        }
    }
}

struct Hold: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run SQL in a write transaction and never commit: prints 'holding' and waits to be killed.",
        discussion: "Used by crash tests: SIGKILL must leave neither the rows nor their history behind.")

    @OptionGroup var options: StoreOptionGroup
    @Argument var statements: [String]

    func run() throws {
        try reportingErrors {
            let store = try options.open()
            try store.write(author: "hold", context: "crash-test") { tx in
                for statement in statements { try tx.execute(statement) }
                printFlushed("holding")
                Pause.forever()
            }
        }
    }
}

enum HistoryFormatter {
    static func describe(_ transaction: HistoryTransaction) -> String {
        var lines = [
            "#\(transaction.token) at \(transaction.timestamp.wallClockDescription) origin=\(transaction.origin) "
                + "author=\(transaction.author ?? "-") context=\(transaction.contextName ?? "-")"
        ]
        for change in transaction.changes {
            var line = "  \(change.kind) \(change.entity) \(change.primaryKey)"
            if !change.changedColumns.isEmpty { line += " [\(change.changedColumns.joined(separator: ", "))]" }
            if let tombstone = change.tombstone, !tombstone.isEmpty {
                line += " tombstone{" + tombstone.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run one sync round through a shared folder: export, publish, verify and apply other nodes' segments.",
        discussion: "Prints one line per published or applied segment and a summary; exits 0 when the round completed.")

    @OptionGroup var options: StoreOptionGroup
    @Option(help: "The shared folder (must exist).") var shared: String
    @Option(help: "Account whose logs to exchange.") var account: String = "default"
    @Option(help: "At most this many changes per exported segment.") var segmentChanges: Int = 2_000
    @Option(help: "Imports apply at most this many changes per SQLite transaction.") var batchChanges: Int = ImportBatching().maximumChanges
    @Option(help: "Imports commit at least this often, in milliseconds.") var batchMs: Int = ImportBatching().maximumMilliseconds
    @Flag(help: "Print what moved as one JSON object.") var json = false

    func run() throws {
        try reportingErrors {
            let store = try options.open()
            let engine = try SyncEngine(
                store: store, sharedFolder: shared,
                configuration: SyncConfiguration(
                    account: account, maximumChangesPerSegment: segmentChanges,
                    batching: ImportBatching(maximumChanges: batchChanges, maximumMilliseconds: batchMs)))
            let report = try engine.sync()
            if json {
                printJSON(SyncJSON(report))
                return
            }
            for name in report.published { print("published \(name)") }
            for name in report.applied { print("applied \(name)") }
            for rejected in report.rejected { print("rejected \(rejected)") }
            for (node, next) in report.waiting.sorted(by: { $0.key < $1.key }) {
                print("waiting for \(node) sequence \(next)\(report.waitingReasons[node].map { ": \($0)" } ?? "")")
            }
            for name in report.quarantined { print("quarantined \(name)") }
            for file in report.ignored { print("ignored \(file)") }
            printFlushed("synced: \(report)")
        }
    }
}

/// What `logsync sync --json` prints.
struct SyncJSON: Encodable {
    var published: [String]
    var applied: [String]
    var appliedTransactions: Int
    var rejected: [String]
    var quarantined: [String]
    var ignored: [String]

    init(_ report: SyncReport) {
        published = report.published.map { "\($0)" }
        applied = report.applied.map { "\($0)" }
        appliedTransactions = report.appliedTransactions
        rejected = report.rejected.map { "\($0)" }
        quarantined = report.quarantined.map { "\($0)" }
        ignored = report.ignored.map { "\($0)" }
    }

    enum CodingKeys: String, CodingKey {
        case published, applied, rejected, quarantined, ignored
        case appliedTransactions = "applied_transactions"
    }
}
