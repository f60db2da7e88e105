/// What bounds a node's history (`docs/retention.md`): shown by `syncctl status` and explained by
/// `syncctl prune --dry-run` (a plain value in the core, so the control protocol carries it without
/// linking the engine).
public struct RetentionStatus: Sendable, Codable, Hashable {
    /// This node's segments still in the transport.
    public var retainedSegments: Int
    /// This node's segments up to this sequence are deleted.
    public var prunedThrough: UInt64
    /// Up to where this node may delete its segments now (every active node applied them, a baseline covers them).
    public var prunableThrough: UInt64
    /// The newest baseline in the transport, with the node that wrote it.
    public var newestBaseline: String?
    /// How many transactions the newest baseline includes.
    public var newestBaselineTransactions: UInt64?
    /// Nodes whose progress keeps this node's segments from going, and why.
    public var holdingBack: [Holder]
    /// Nodes silent for longer than the retention: they no longer hold pruning back, and bootstrap from a
    /// baseline when they return.
    public var silent: [Holder]
    /// Segments a prune would delete now (filled by a dry run).
    public var wouldDelete: [String]
    /// The rules as they applied, in words.
    public var explanation: [String]
    /// The last problem with progress records, baselines or pruning, if any (syncing goes on regardless).
    public var lastProblem: String?

    public struct Holder: Sendable, Codable, Hashable {
        public var node: String
        /// The last sequence of this node's history it has applied.
        public var applied: UInt64
        /// When it was last active (milliseconds since 1970).
        public var activeAt: Int64
        public var reason: String

        public init(node: String, applied: UInt64, activeAt: Int64, reason: String) {
            self.node = node
            self.applied = applied
            self.activeAt = activeAt
            self.reason = reason
        }

        enum CodingKeys: String, CodingKey {
            case node, applied, activeAt = "active_at", reason
        }
    }

    public init(
        retainedSegments: Int = 0, prunedThrough: UInt64 = 0, prunableThrough: UInt64 = 0, newestBaseline: String? = nil,
        newestBaselineTransactions: UInt64? = nil, holdingBack: [Holder] = [], silent: [Holder] = [], wouldDelete: [String] = [],
        explanation: [String] = [], lastProblem: String? = nil
    ) {
        self.retainedSegments = retainedSegments
        self.prunedThrough = prunedThrough
        self.prunableThrough = prunableThrough
        self.newestBaseline = newestBaseline
        self.newestBaselineTransactions = newestBaselineTransactions
        self.holdingBack = holdingBack
        self.silent = silent
        self.wouldDelete = wouldDelete
        self.explanation = explanation
        self.lastProblem = lastProblem
    }

    enum CodingKeys: String, CodingKey {
        case retainedSegments = "retained_segments", prunedThrough = "pruned_through", prunableThrough = "prunable_through"
        case newestBaseline = "newest_baseline", newestBaselineTransactions = "newest_baseline_transactions"
        case holdingBack = "holding_back", silent, wouldDelete = "would_delete", explanation, lastProblem = "last_problem"
    }
}
