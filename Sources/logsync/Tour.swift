import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncTransport
import LogsyncControl

/// A short walk through persistent history: library writes with an author, a write by the `sqlite3`
/// shell that logsync did not make, a cascading delete with tombstones, and the history that recorded it all.
struct Tour: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a notes store, write to it in several ways, and print its history.")

    @Option(help: "Directory for the tour's store (default: $XDG_DATA_HOME/logsync/tour, or ~/.local/share/logsync/tour).")
    var directory: String?

    static let schema = Schema.notes

    func run() throws {
        let directory = directory ?? Self.defaultDirectory()
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/notes.sqlite"
        try reportingErrors {
            let store = try Store(path: path, schema: Self.schema)
            print("store   \(path)")
            print("node    \(store.nodeID)")

            let folder = DatabaseValue.text(UUID().uuidString.lowercased())
            let groceries = DatabaseValue.text(UUID().uuidString.lowercased())
            let ideas = DatabaseValue.text(UUID().uuidString.lowercased())
            try store.write(author: "alice", context: "editor") { tx in
                try tx.insert("Folder", ["id": folder, "name": "Home"])
                try tx.insert("Note", ["id": groceries, "title": "Groceries", "body": "milk", "folder": folder])
                try tx.insert("Note", ["id": ideas, "title": "Ideas", "body": "sync all the things", "folder": folder])
            }
            print("\n1. alice saved a folder with two notes through logsync")

            try store.write(author: "alice", context: "editor") { tx in
                try tx.update("Note", key: groceries, ["body": "milk, eggs", "pinned": true])
            }
            print("2. alice edited one note: history keeps only the columns that changed")

            if Self.runShell(path: path, sql: "BEGIN; UPDATE Note SET title = 'Ideas (shell)' WHERE title = 'Ideas'; COMMIT;") {
                print("3. the sqlite3 shell, which knows nothing of logsync, renamed a note: captured as its own transaction")
            } else {
                print("3. (skipped: the sqlite3 shell is not installed)")
            }

            try store.write(author: "bob", context: "cleanup") { tx in
                try tx.delete("Folder", key: folder)
            }
            print("4. bob deleted the folder: the cascade rule deleted its notes, with tombstones\n")

            for transaction in try store.history() {
                print(HistoryFormatter.describe(transaction))
            }
            print("\ncurrent token \(try store.currentToken()); inspect it with:")
            print("  sqlite3 \(path) 'SELECT * FROM _ls_log'")

            try syncTour(first: store, directory: directory, folder: folder)
        }
    }

    /// A second node syncs with the first through a shared folder, both ways.
    private func syncTour(first: Store, directory: String, folder: DatabaseValue) throws {
        let shared = directory + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        let second = try Store(path: directory + "/laptop.sqlite", schema: Self.schema)
        func engine(_ store: Store) throws -> SyncEngine {
            try SyncEngine(store: store, sharedFolder: shared, configuration: SyncConfiguration(account: "tour"))
        }
        print("\n5. a second node (\(second.nodeID.prefix(8))) syncs through the shared folder \(shared)")
        try first.write(author: "alice", context: "editor") { tx in
            try tx.insert("Folder", ["id": .text(UUID().uuidString.lowercased()), "name": "Trips"])
        }
        print("   node 1: \(try engine(first).sync())")
        print("   node 2: \(try engine(second).sync())")
        try second.write(author: "bob", context: "laptop") { tx in
            guard let trips = try tx.rows("SELECT id FROM Folder WHERE name = 'Trips'").first?.first else { return }
            try tx.insert("Note", ["id": .text(UUID().uuidString.lowercased()), "title": "Lisbon", "folder": trips])
        }
        print("6. node 2 added a note; it syncs back")
        print("   node 2: \(try engine(second).sync())")
        print("   node 1: \(try engine(first).sync())")
        for row in try first.read("SELECT f.name, n.title FROM Note n JOIN Folder f ON f.id = n.folder") {
            print("   node 1 now shows: \(row[0]) / \(row[1])")
        }
        if let imported = try first.history(filter: HistoryFilter(origins: [.remote(second.nodeID)])).last {
            print("   recorded in node 1's history as:\n" + HistoryFormatter.describe(imported).split(separator: "\n").map { "   " + $0 }.joined(separator: "\n"))
        }
    }

    static func defaultDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (NSHomeDirectory() + "/.local/share")
        return base + "/logsync/tour"
    }

    /// Runs one SQL script in the `sqlite3` shell; false when the shell is not installed.
    static func runShell(path: String, sql: String) -> Bool {
        let process: ChildProcess
        do {
            process = try ChildProcess("/usr/bin/env", ["sqlite3", path, sql])
        } catch {
            return false
        }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
