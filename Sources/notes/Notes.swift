import ArgumentParser
import Foundation
import LogsyncContexts
import LogsyncCore
import LogsyncControl
import LogsyncPlatform
import LogsyncStore

/// `notes`: a small notes app on a logsync store, the example of the contexts API.
///
/// It opens the store `syncd` syncs (found through syncd's configuration, or given with `--store`), so
/// notes written here reach the other nodes, and `notes watch` shows theirs as they land.
@main
struct Notes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notes",
        abstract: "Notes that sync: add, list, edit and delete them, and watch other nodes' changes land.",
        discussion: """
            Exit statuses (docs/exit-codes.md): 0 done; 1 failed (no such note, an id that matches several); 64 bad \
            command line; 65 the store is not usable (damaged, another schema); 73 the store's folder cannot be \
            written; 74 a system call on the store failed; 75 another writer held the store too long, or an account \
            switch did not end in time; 78 bad syncd configuration.
            """,
        version: LogsyncVersion.current,
        subcommands: [Add.self, List.self, Edit.self, Delete.self, Watch.self]
    )
}

/// Where the store is: `--store`, else the store of syncd's configuration (`--config`, else syncd's
/// default files, else its embedded defaults).
struct StoreLocation: ParsableArguments {
    @Option(name: .long, help: "Path of the store file (default: the store of syncd's configuration).")
    var store: String?

    @Option(name: .long, help: "syncd's configuration file, to find the store it syncs.")
    var config: String?

    @Option(name: .long, help: "Author recorded in history with each save (default: the user name).")
    var author: String = ProcessInfo.processInfo.environment["USER"] ?? "notes"

    /// How long a command waits for an account switch in progress to end before it reads or writes.
    static let switchWait = Duration.seconds(120)

    /// The container of the active store: `--store`, else the store syncd has active for its account
    /// (`docs/accounts.md`), once no switch is in progress.
    func openContainer() throws -> Container { try openActive().container }

    /// The container of the active store, and where a write into it goes, for the line that reports it:
    /// " in account ID", " in the local store", or nothing with `--store`.
    private func openActive() throws -> (container: Container, place: String) {
        if let store { return (try open { try Container(path: store, schema: .notes) }, "") }
        let accounts = try accountStores()
        return try open {
            let active = try accounts.activeStore(waitingUpTo: Self.switchWait)
            return (try Container(path: active.path, schema: .notes), active.account.map { " in account \($0)" } ?? " in the local store")
        }
    }

    /// Runs `body` on the view context of the active store and returns what it returned, with where its
    /// write went (``openActive()``). When an account switch closed that store to writes between the
    /// open and the save (the save was refused: nothing was written), `body` runs again on the store
    /// that is active once the switch is done. No write is reported saved that is not.
    func writing<T>(_ body: (Context) throws -> T) throws -> (result: T, place: String) {
        var attempts = 0
        while true {
            attempts += 1
            let (container, place) = try openActive()
            defer { container.close() }
            do {
                return (try body(container.viewContext), place)
            } catch let error as ContextError where store == nil && attempts < 5 && (error.cause as? StoreError)?.code == .retired {
                continue
            } catch let error as ExitCode {
                throw error
            } catch let error as ContextError {
                guard let cause = error.cause as? StoreError else { throw error }
                throw fail("\(error)", status: cause.exitStatus)
            }
        }
    }

    /// A container that follows syncd's account switches (nil with `--store`: that one store only).
    func openAccountContainer() throws -> AccountContainer? {
        guard store == nil else { return nil }
        let accounts = try accountStores()
        return try open { try AccountContainer(accounts: accounts, schema: .notes) }
    }

    private func accountStores() throws -> AccountStores {
        do {
            let configuration = try DaemonConfiguration.load(file: config)
            return AccountStores(storePath: configuration.storePath, configuredAccount: configuration.account)
        } catch {
            throw fail("configuration error: \(error)", status: ExitStatus.configuration)
        }
    }

    /// Opens with the store's folder created, turning failures into exit statuses.
    private func open<T>(_ body: () throws -> T) throws -> T {
        do {
            if let store {
                try FileManager.default.createDirectory(
                    atPath: URL(fileURLWithPath: store).deletingLastPathComponent().path, withIntermediateDirectories: true)
            } else {
                let path = try accountStores().storePath
                try FileManager.default.createDirectory(
                    atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path, withIntermediateDirectories: true)
            }
            return try body()
        } catch let error as ExitCode {
            throw error
        } catch let error as StoreError {
            throw fail("\(error)", status: error.exitStatus)
        } catch let error as ContextError {
            throw fail("\(error)", status: (error.cause as? StoreError)?.exitStatus ?? ExitStatus.cannotCreate)
        } catch {
            throw fail("\(error)", status: ExitStatus.cannotCreate)
        }
    }
}

/// Prints `message` on stderr and returns the exit status to throw.
func fail(_ message: String, status: Int32 = ExitStatus.failed) -> ExitCode {
    FileHandle.standardError.write(Data("notes: \(message)\n".utf8))
    return ExitCode(status)
}

extension Note {
    /// One line: id (its first 8 characters unless `fullID`), pin, title, and the folder's name.
    func line(folder: Folder?, fullID: Bool = false) -> String {
        let id = self.id.uuidString.lowercased()
        var text = "\(fullID ? id : String(id.prefix(8))) \(pinned ? "*" : " ") \(title ?? "(untitled)")"
        if let folder { text += "  [\(folder.name)]" }
        return text
    }
}

extension Context {
    /// The note whose id starts with `prefix`; fails unless exactly one does.
    func note(matching prefix: String) throws -> Note {
        let lowered = prefix.lowercased()
        let matches = try fetch(Note.self).filter { $0.id.uuidString.lowercased().hasPrefix(lowered) }
        guard matches.count == 1 else {
            throw fail(matches.isEmpty ? "no note has an id starting with '\(prefix)'" : "'\(prefix)' matches \(matches.count) notes; give more of the id")
        }
        return matches[0]
    }

    /// The folder named `name`, inserted if there is none.
    func folder(named name: String) throws -> Folder {
        if let folder = try fetch(FetchRequest<Folder>(where: Column("name") == name, limit: 1)).first { return folder }
        let folder = Folder(name: name)
        try insert(folder)
        return folder
    }
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a note and print its id.")

    @OptionGroup var location: StoreLocation
    @Argument(help: "The note's title.") var title: String
    @Option(name: .long, help: "The note's body.") var body: String?
    @Option(name: .long, help: "File it in this folder (created if needed).") var folder: String?
    @Flag(name: .long, help: "Pin the note.") var pinned = false

    func run() throws {
        let id = UUID()
        let (token, place) = try location.writing { context in
            var note = Note(id: id, title: title, body: body, pinned: pinned)
            if let folder { note.folder = Reference(try context.folder(named: folder)) }
            try context.insert(note)
            return try context.save(author: location.author)
        }
        print("\(id.uuidString.lowercased()) saved at token \(token.map(String.init(describing:)) ?? "-")\(place)")
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List notes, pinned first, then by title.")

    @OptionGroup var location: StoreLocation
    @Option(name: .long, help: "Only notes whose title or body contains this text (ASCII case ignored).") var search: String?
    @Flag(name: .long, help: "Print a JSON array of notes.") var json = false

    func run() throws {
        let container = try location.openContainer()
        defer { container.close() }
        let context = container.viewContext
        var filter = Filter.all
        if let search {
            filter = Column("title").contains(search, caseInsensitive: true) || Column("body").contains(search, caseInsensitive: true)
        }
        let notes = try context.fetch(FetchRequest<Note>(where: filter, orderedBy: [.descending("pinned"), .ascending("title")]))
        let folders = Dictionary(try context.fetch(Folder.self).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let listed = notes.map { ListedNote($0, folder: $0.folder.flatMap { folders[$0.id] }) }
            FileHandle.standardOutput.write(try encoder.encode(listed) + Data("\n".utf8))
            return
        }
        for note in notes { print(note.line(folder: note.folder.flatMap { folders[$0.id] })) }
        if notes.isEmpty { print("no notes") }
    }
}

/// A note in `notes list --json`.
struct ListedNote: Encodable {
    var id: String
    var title: String?
    var body: String?
    var pinned: Bool
    var folder: String?
    var folderName: String?

    init(_ note: Note, folder: Folder?) {
        id = note.id.uuidString.lowercased()
        title = note.title
        body = note.body
        pinned = note.pinned
        self.folder = note.folder.map { $0.id.uuidString.lowercased() }
        folderName = folder?.name
    }

    enum CodingKeys: String, CodingKey {
        case id, title, body, pinned, folder
        case folderName = "folder_name"
    }
}

struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change a note's title, body or pin.")

    @OptionGroup var location: StoreLocation
    @Argument(help: "The note's id, or enough of its start to tell it apart.") var id: String
    @Option(name: .long, help: "New title.") var title: String?
    @Option(name: .long, help: "New body.") var body: String?
    @Flag(inversion: .prefixedNo, help: "Pin or unpin the note.") var pin: Bool?

    func run() throws {
        let (token, place) = try location.writing { context in
            var note = try context.note(matching: id)
            if let title { note.title = title }
            if let body { note.body = body }
            if let pin { note.pinned = pin }
            try context.update(note)
            return try context.save(author: location.author)
        }
        print(token.map { "saved at token \($0)\(place)" } ?? "nothing changed")
    }
}

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a note.")

    @OptionGroup var location: StoreLocation
    @Argument(help: "The note's id, or enough of its start to tell it apart.") var id: String

    func run() throws {
        let ((deleted, token), place) = try location.writing { context in
            let note = try context.note(matching: id)
            try context.delete(note)
            return (note.id, try context.save(author: location.author))
        }
        print("deleted \(deleted.uuidString.lowercased()) at token \(token.map(String.init(describing:)) ?? "-")\(place)")
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the notes, then print each change as it merges into the view context, until interrupted.")

    @OptionGroup var location: StoreLocation
    @Option(name: .long, help: "Stop after this many seconds (default: run until interrupted).") var seconds: Double?
    @Flag(name: .long, help: "Start each line with the wall-clock time in nanoseconds, as @NS.") var timestamps = false

    func run() async throws {
        let print: @Sendable (String) -> Void = { [timestamps] line in
            printFlushed(timestamps ? "@\(WallClock.nanoseconds()) \(line)" : line)
        }
        guard let app = try location.openAccountContainer() else {
            let container = try location.openContainer()
            defer { container.close() }
            if let seconds { closing(after: .seconds(seconds)) { container.close() } }
            await Self.watch(container, print: print)
            return
        }
        defer { app.close() }
        if let seconds { closing(after: .seconds(seconds)) { app.close() } }
        // Across account switches: the stores will change, then did change; the new account's notes
        // are listed, and watched in turn.
        let switches = app.accountChanges()
        var watching = app.container.map { container in Task { await Self.watch(container, print: print) } }
        for await change in switches {
            switch change {
            case .willChange(let from, let to):
                print("stores will change: \(Self.name(from)) → \(Self.name(to))")
                await watching?.value
                watching = nil
            case .didChange(let from, let to):
                print("stores did change: \(Self.name(from)) → \(Self.name(to))")
                watching = app.container.map { container in Task { await Self.watch(container, print: print) } }
            }
        }
        app.close()
        await watching?.value
    }

    static func name(_ account: String?) -> String { account.map { "account \($0)" } ?? "the local store" }

    private func closing(after delay: Duration, _ close: @escaping @Sendable () -> Void) {
        Task {
            try? await Task.sleep(for: delay)
            close()
        }
    }

    /// Lists the notes of a container's store, then prints each change as it merges, until the container
    /// closes.
    static func watch(_ container: Container, print: @escaping @Sendable (String) -> Void) async {
        let context = container.viewContext
        let results = context.observe(FetchRequest<Note>(orderedBy: [.ascending("title")]))
        let events = context.events()
        // Each merge is announced with where it came from; the observed fetch then shows what changed.
        let origins = Task {
            for await event in events where event.cause == .merge {
                let from = event.origins.map(\.description).sorted().joined(separator: ", ")
                print("merged token \(event.token.map(String.init(describing:)) ?? "-") from \(from)")
                for conflict in event.conflicts { print("! conflict \(conflict)") }
            }
        }
        var first = true
        var previous: [Note] = []
        for await update in results {
            defer { previous = update.records }
            if first {
                print("\(update.records.count) note(s)")
                for note in update.records { print("  \(note.line(folder: nil, fullID: true))") }
                first = false
                continue
            }
            for index in update.diff.inserted { print("+ \(update.records[index].line(folder: nil, fullID: true))") }
            for index in update.diff.updated { print("~ \(update.records[index].line(folder: nil, fullID: true))") }
            for move in update.diff.moved where !update.diff.updated.contains(move.to) {
                print("~ \(update.records[move.to].line(folder: nil, fullID: true))")
            }
            for index in update.diff.removed { print("- \(previous[index].line(folder: nil, fullID: true))") }
        }
        origins.cancel()
    }
}

/// Prints a line and pushes it out at once, for pipes.
func printFlushed(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
