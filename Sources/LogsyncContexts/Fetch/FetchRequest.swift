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
    public var filter: Filter
    public var ordering: [Ordering]
    /// At most this many records; nil for all.
    public var limit: Int?
    /// Skip this many records first.
    public var offset: Int

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
    public var column: String
    public var ascending: Bool

    public init(_ column: String, ascending: Bool = true) {
        self.column = column
        self.ascending = ascending
    }

    public static func ascending(_ column: String) -> Ordering { Ordering(column, ascending: true) }
    public static func descending(_ column: String) -> Ordering { Ordering(column, ascending: false) }
}
