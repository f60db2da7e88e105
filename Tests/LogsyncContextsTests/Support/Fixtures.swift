import Foundation
import LogsyncContexts
import LogsyncTestKit
import Synchronization
import LogsyncControl

/// The records of `Schema.notes`, as an app declares them.
struct Folder: Record, Equatable {
    var id = UUID()
    var name = ""
}

struct Note: Record, Equatable {
    var id = UUID()
    var title: String?
    var body: String?
    var pinned = false
    var folder: Reference<Folder>?
}

/// Everything a stream delivers, collected in the background, to await with a deadline.
final class Collected<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])

    init(_ stream: AsyncStream<Element>) {
        Task { [weak self] in
            for await element in stream { self?.items.withLock { $0.append(element) } }
        }
    }

    var all: [Element] { items.withLock { $0 } }

    /// The first element delivered so far or within `timeout` that passes `condition`. The deadline only
    /// stops a hung test: the collecting task runs on Swift's cooperative pool, which the suite's
    /// CPU-bound property tests can keep busy for seconds on two cores.
    func first(within timeout: Duration = .seconds(30), where condition: (Element) -> Bool = { _ in true }) async throws -> Element {
        try await eventually(within: timeout, every: .milliseconds(1), "a matching element (\(all.count) delivered)") { all.first(where: condition) }
    }
}

/// A type the schema does not declare.
struct Unknown: Record { var id = UUID() }

/// A notes store in a temporary directory of its own, with a container open on it.
final class NotesStore: Sendable {
    let directory: TemporaryDirectory
    let path: String
    let container: Container

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.file("store.sqlite")
        container = try Container(path: path, schema: .notes)
    }

    deinit { container.close() }

    /// A second container on the same file, with connections of its own as another process would have.
    func another() throws -> Container {
        try Container(path: path, schema: .notes)
    }
}

extension Container {
    /// Changes the note with `id` through the view context and saves it as `author`, as another writer
    /// (another process, another node) would; returns the save's token.
    @discardableResult
    func editNote(_ id: UUID, author: String, _ change: (inout Note) -> Void) throws -> HistoryToken? {
        guard var note = try viewContext.object(Note.self, id: id) else {
            throw ContextError(.objectNotFound, "no note \(id) to edit", entity: "Note")
        }
        change(&note)
        try viewContext.update(note)
        return try viewContext.save(author: author)
    }
}
