import Foundation
import LogsyncContexts
import LogsyncTestKit
import Testing

/// Random local and concurrent edits and deletes of the same notes, merged at random moments: whatever
/// the timing, the saved result is what the policy says property by property, and every local change
/// the store overruled is reported.
@Suite("merge policies: random concurrent edits")
struct MergePolicyPropertyTests {
    /// Seeds run in CI; `LOGSYNC_PROPERTY_SEEDS=N` runs N seeds for long runs.
    static var seeds: [UInt64] { propertySeeds("LOGSYNC_PROPERTY_SEEDS", default: 25, from: 0x5EED) }

    static let columns = ["title", "body"]

    enum Script {
        case edit(local: Set<String>, remote: Set<String>)
        case remoteDelete(localEdits: Set<String>)
        case localDelete(remoteEdits: Set<String>)
    }

    @Test("the saved state follows the policy per property, and overruled local changes are reported")
    func randomConcurrentEdits() async throws {
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let policies = [MergePolicy.mineWins, .storeWins, MergePolicy(preferring: .mine, overrides: ["Note.body": .store])]
            let policy = policies[Int.random(in: 0..<policies.count, using: &rng)]
            let store = try NotesStore()
            let mine = store.container.viewContext
            mine.mergePolicy = policy
            let other = try store.another()
            defer { other.close() }

            let originals = (0..<6).map { Note(title: "title \($0)", body: "body \($0)") }
            for note in originals { try mine.insert(note) }
            try mine.save()
            let handedOut = try mine.fetch(Note.self)

            func subset() -> Set<String> { Set(Self.columns.filter { _ in Bool.random(using: &rng) }) }
            var scripts: [UUID: Script] = [:]
            for note in handedOut {
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: scripts[note.id] = .remoteDelete(localEdits: subset())
                case 1: scripts[note.id] = .localDelete(remoteEdits: subset())
                default: scripts[note.id] = .edit(local: subset(), remote: subset())
                }
            }
            func edited(_ note: Note, _ columns: Set<String>, _ mark: String) -> Note {
                var note = note
                if columns.contains("title") { note.title = "\(mark) title" }
                if columns.contains("body") { note.body = "\(mark) body" }
                return note
            }

            // Local changes first, then the other writer's, merged now or left to the save.
            for note in handedOut {
                switch scripts[note.id]! {
                case .edit(let local, _), .remoteDelete(let local):
                    if !local.isEmpty { try mine.update(edited(note, local, "mine")) }
                case .localDelete: try mine.delete(note)
                }
            }
            let theirs = try other.viewContext.fetch(Note.self)
            for note in theirs {
                switch scripts[note.id]! {
                case .edit(_, let remote), .localDelete(let remote):
                    if !remote.isEmpty { try other.viewContext.update(edited(note, remote, "their")) }
                case .remoteDelete: try other.viewContext.delete(note)
                }
            }
            try other.viewContext.save(author: "other")
            if Bool.random(using: &rng) { try mine.mergeChanges() }
            try mine.save(author: "mine")

            let saved = Dictionary(uniqueKeysWithValues: try other.viewContext.fetch(Note.self).map { ($0.id, $0) })
            let reported = Set(mine.conflicts.map(\.objectID.id))
            for original in originals {
                let context = "seed \(seed), policy \(policy), note \(original.title!)"
                switch scripts[original.id]! {
                case .remoteDelete(let local):
                    if local.isEmpty || policy.preferred == .store {
                        #expect(saved[original.id] == nil, "\(context)")
                    } else {
                        #expect(saved[original.id] == edited(original, local, "mine"), "\(context): mine wins, the edit comes back")
                    }
                    if !local.isEmpty { #expect(reported.contains(original.id), "\(context): delete of an edited note reported") }
                case .localDelete(let remote):
                    if remote.isEmpty || policy.preferred == .mine {
                        #expect(saved[original.id] == nil, "\(context)")
                    } else {
                        #expect(saved[original.id] == edited(original, remote, "their"), "\(context): store wins, the delete is undone")
                    }
                    if !remote.isEmpty { #expect(reported.contains(original.id), "\(context): edit of a deleted note reported") }
                case .edit(let local, let remote):
                    var expected = original
                    for column in Self.columns {
                        let side: String?
                        if local.contains(column) && remote.contains(column) {
                            side = policy.winner(entity: "Note", column: column) == .mine ? "mine" : "their"
                        } else {
                            side = local.contains(column) ? "mine" : (remote.contains(column) ? "their" : nil)
                        }
                        if let side { expected = edited(expected, [column], side) }
                    }
                    #expect(saved[original.id] == expected, "\(context): local \(local), remote \(remote)")
                    #expect(reported.contains(original.id) == !local.isDisjoint(with: remote), "\(context): conflicts reported exactly")
                }
            }
        }
    }
}

