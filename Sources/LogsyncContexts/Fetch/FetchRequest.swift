/// What a fetch returns: records of one type, filtered, ordered and limited.
///
/// ```swift
/// let recent = FetchRequest<Note>(
///     where: Column("pinned") == true || Column("title").contains("todo", caseInsensitive: true),
///     orderedBy: [.descending("title")], limit: 20)
/// let notes = try context.fetch(recent)
/// ```
///
/// Rows that sort equal keep a stable order: the primary key breaks ties.
public struct FetchRequest<R: Record>: Sendable {
    /// Which records; every one by default.
    public var filter: Filter
    /// Sort keys, most significant first; the primary key breaks remaining ties.
    public var ordering: [Ordering]
    /// At most this many records; nil for all.
    public var limit: Int?
    /// Skip this many records first.
    public var offset: Int

    /// A request for records of `type` (inferred when the context says it) matching `filter`, sorted by
    /// `ordering`, skipping `offset` and returning at most `limit`.
    public init(
        _ type: R.Type = R.self, where filter: Filter = .all, orderedBy ordering: [Ordering] = [], limit: Int? = nil,
        offset: Int = 0
    ) {
        self.filter = filter
        self.ordering = ordering
        self.limit = limit
        self.offset = offset
    }
}

/// One sort key of a fetch: a column and a direction.
public struct Ordering: Sendable, Hashable {
    /// The column to sort by.
    public var column: String
    /// Smallest first when true (NULL first, as SQLite sorts); largest first when false.
    public var ascending: Bool

    /// Sorts by `column`, ascending unless told otherwise.
    public init(_ column: String, ascending: Bool = true) {
        self.column = column
        self.ascending = ascending
    }

    /// Sorts by `column`, smallest first.
    public static func ascending(_ column: String) -> Ordering { Ordering(column, ascending: true) }
    /// Sorts by `column`, largest first.
    public static func descending(_ column: String) -> Ordering { Ordering(column, ascending: false) }
}
