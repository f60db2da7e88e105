import LogsyncCore

/// Something that happened to a context, as its ``Context/events()`` stream reports it.
public struct ContextChanges: Sendable {
    /// What made the context report.
    public enum Cause: Sendable, Hashable {
        /// New history was merged.
        case merge
        /// The context saved.
        case save
        /// A fetch found that the store contradicts unsaved changes (see ``conflicts``).
        case fetch
        /// Unsaved changes were discarded.
        case rollback
        /// The context was reset.
        case reset
    }

    /// What happened.
    public var cause: Cause
    /// For a merge, the history token merged up to; for a save, the token of the saved transaction.
    public var token: HistoryToken?
    /// Objects inserted, updated and deleted by the merged history (for a save: the saved objects, as
    /// updated), whether or not this context had handed them out.
    public var inserted: Set<ObjectID> = []
    /// Objects updated (see ``inserted``).
    public var updated: Set<ObjectID> = []
    /// Objects deleted (see ``inserted``).
    public var deleted: Set<ObjectID> = []
    /// Where the merged transactions came from.
    public var origins: Set<Origin> = []
    /// Conflicts between unsaved changes and the store, each with its resolution.
    public var conflicts: [MergeConflict] = []
    /// Set when an automatic merge failed; it is tried again at the next commit.
    public var error: String?

    /// An event with what it names. Contexts make these; tests and previews may too.
    public init(
        cause: Cause, token: HistoryToken? = nil, inserted: Set<ObjectID> = [], updated: Set<ObjectID> = [],
        deleted: Set<ObjectID> = [], conflicts: [MergeConflict] = [], error: String? = nil
    ) {
        self.cause = cause
        self.token = token
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.conflicts = conflicts
        self.error = error
    }

    /// Every object id the event names.
    public var objectIDs: Set<ObjectID> { inserted.union(updated).union(deleted) }

    var isEmpty: Bool { objectIDs.isEmpty && conflicts.isEmpty && error == nil }
}
