import Foundation
import LogsyncCore
import Synchronization

/// One delivery of an observed fetch (``Context/observe(_:)``): the records now, and how they differ
/// from the previous delivery, in the terms a list UI applies (removals at old indexes, then inserts at
/// new indexes; moves and updates besides).
public struct FetchedResults<R: Record>: Sendable {
    /// The records matching the request now, in the request's order.
    public var records: [R]
    /// How ``records`` differs from the previous delivery (in the first, every index is inserted).
    public var diff: ResultsDiff
}

/// How one result list became the next.
public struct ResultsDiff: Sendable, Hashable {
    /// A record whose position changed: its index in the old list and in the new one.
    public struct Move: Sendable, Hashable {
        /// The index in the old list.
        public var from: Int
        /// The index in the new list.
        public var to: Int
    }

    /// Indexes in the new list of records that were not in the old one.
    public var inserted: [Int] = []
    /// Indexes in the old list of records that are not in the new one.
    public var removed: [Int] = []
    /// Records in both lists whose position relative to the others changed.
    public var moved: [Move] = []
    /// Indexes in the new list of records in both lists whose values changed.
    public var updated: [Int] = []

    /// Whether nothing changed: same records, same order, same values.
    public var isEmpty: Bool { inserted.isEmpty && removed.isEmpty && moved.isEmpty && updated.isEmpty }

    /// The diff from the result `old` to the result `new`, each a list of (identity, values).
    static func between(old: [(ObjectID, Row)], new: [(ObjectID, Row)]) -> ResultsDiff {
        var diff = ResultsDiff()
        let changes = new.map(\.0).difference(from: old.map(\.0)).inferringMoves()
        for change in changes {
            switch change {
            case .remove(let offset, _, let associatedWith):
                if let to = associatedWith { diff.moved.append(Move(from: offset, to: to)) } else { diff.removed.append(offset) }
            case .insert(let offset, _, let associatedWith):
                if associatedWith == nil { diff.inserted.append(offset) }
            }
        }
        let oldValues = Dictionary(old.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
        for (index, (id, row)) in new.enumerated() {
            if let before = oldValues[id], before != row { diff.updated.append(index) }
        }
        diff.removed.sort()
        diff.inserted.sort()
        diff.moved.sort { $0.from < $1.from }
        return diff
    }
}

/// An observed fetch that a context refreshes after every change.
protocol ResultsObserving: Sendable {
    func refresh(in context: Context)
    func finish()
}

final class ResultsObserver<R: Record>: ResultsObserving {
    private let request: FetchRequest<R>
    private let continuation: AsyncStream<FetchedResults<R>>.Continuation
    /// The last delivered result; nil before the first. Held while refreshing, so that two refreshes
    /// never interleave their diffs.
    private let last = Mutex<[(ObjectID, Row)]?>(nil)

    init(request: FetchRequest<R>, continuation: AsyncStream<FetchedResults<R>>.Continuation) {
        self.request = request
        self.continuation = continuation
    }

    func refresh(in context: Context) {
        last.withLock { last in
            guard let coder = try? context.model.coder(for: R.self),
                let columns = try? context.model.columns(of: coder.entity.name),
                let rows = try? context.fetchRows(request, entity: coder.entity.name),
                let records = try? rows.map({ try coder.decode(R.self, from: $0) })
            else {
                // A failed read (the store busy, the container closing) is retried at the next change.
                return
            }
            let identified = rows.compactMap { row in columns.objectID(of: row).map { ($0, row) } }
            let diff = ResultsDiff.between(old: last ?? [], new: identified)
            guard last == nil || !diff.isEmpty else { return }
            last = identified
            continuation.yield(FetchedResults(records: records, diff: diff))
        }
    }

    func finish() {
        continuation.finish()
    }
}
