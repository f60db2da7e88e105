import LogsyncCore
import LogsyncTransport

/// What one ``SyncEngine/sync()`` moved, and what it could not.
public struct SyncReport: Sendable, CustomStringConvertible {
    /// This node's segments published to the transport in this run.
    public var published: [SegmentName] = []
    /// The bytes of ``published``.
    public var publishedBytes = 0
    /// Other nodes' segments applied in this run, in order.
    public var applied: [SegmentName] = []
    public var appliedTransactions = 0
    /// The bytes of the segments read for ``applied`` (a segment resumed after a stop counts again).
    public var appliedBytes = 0
    /// Per node, the next sequence this store is waiting for: the segment that holds it is missing,
    /// unreadable, rejected, or held (a clock in the future). ``waitingReasons`` says which.
    public var waiting: [NodeID: UInt64] = [:]
    /// Per node in ``waiting``, why, in words an operator can act on.
    public var waitingReasons: [NodeID: String] = [:]
    /// Per node, the last sequence of the segments in the folder that follow on from what was applied
    /// without a gap and were not rejected: what could be applied. Names beyond a gap, or files that
    /// failed verification, do not count, so a stray file cannot fake a lag.
    public var available: [NodeID: UInt64] = [:]
    /// Files the transport ignored (temporary files, conflict copies, unknown names, and anything named
    /// like a segment or a node folder that is not a regular file or a directory).
    public var ignored: [IgnoredFile] = []
    /// Segments that failed verification (torn, truncated, corrupt, wrong node or account): not applied,
    /// retried on the next run in case a good copy arrives.
    public var rejected: [RejectedSegment] = []
    /// Segments refused for the first time in this run (their bytes fail verification or do not fit this
    /// store's schema), also in ``rejected``: recorded in the store until the operator releases or drops
    /// them (`syncctl quarantine`); only their own node's stream waits.
    public var refused: [RejectedSegment] = []
    /// Segments quarantined in this run: the same node and sequence with different content.
    public var quarantined: [SegmentName] = []
    /// Segments written under a newer schema than this store's, applied in this run in what this schema
    /// declares; the rest of them is kept in the store, and merged once the app registers a schema that
    /// declares it (`docs/schema-evolution.md`). Their node's stream goes on.
    public var keptForSchema: [SegmentName] = []
    /// Peers whose segments applied in this run were written under a newer schema than this store's, with
    /// the newest such version: an update of this node's app is available.
    public var newerSchemas: [NodeID: Int] = [:]
    /// Kept transactions merged in this run because the app now declares what they hold.
    public var appliedKept = 0
    /// Transactions still kept for a newer schema after this run.
    public var keptTransactions = 0
    /// Kept parts that a schema version this store has reached still does not declare: the app's
    /// definition of that version differs from the writer's. They stay kept; each says whose and what.
    public var undeclaredKept: [String] = []
    /// Segments stamped further in the future than ``HybridLogicalClock/maximumDrift``: a peer's clock is
    /// wrong. Kept, and applied once local time catches up, so a wrong clock cannot win every conflict.
    public var heldForClockSkew: [SegmentName] = []
    /// Segments at or below their node's cursor still to be read once, to check that they are what was
    /// applied (after a start, every one; a few are checked each round).
    public var unchecked = 0
    /// The run stopped early because it was asked to (syncd is stopping). Everything committed stays;
    /// the next run goes on from there.
    public var interrupted = false
    /// The baseline this run loaded (a new node, or one behind what others pruned), if any.
    public var loadedBaseline: BaselineName?
    /// The carrier lost history (a relay restored from an older backup, or given a new database): what
    /// this run found, and what it pushes again.
    public var carrierReset: String?

    public init() {}

    /// Records that `node` waits for `sequence`, and why.
    mutating func wait(_ node: NodeID, for sequence: UInt64, because reason: String) {
        waiting[node] = sequence
        waitingReasons[node] = reason
    }

    public var description: String {
        var parts = ["published \(published.count)", "applied \(applied.count) segments (\(appliedTransactions) transactions)"]
        if !waiting.isEmpty { parts.append("waiting on \(waiting.count) nodes") }
        if !rejected.isEmpty { parts.append("rejected \(rejected.count)") }
        if !refused.isEmpty { parts.append("newly refused \(refused.count)") }
        if !quarantined.isEmpty { parts.append("quarantined \(quarantined.count)") }
        if !keptForSchema.isEmpty { parts.append("applied in part for a newer schema \(keptForSchema.count)") }
        if appliedKept > 0 { parts.append("applied \(appliedKept) kept transactions") }
        if !undeclaredKept.isEmpty { parts.append("\(undeclaredKept.count) kept transactions this schema version does not declare") }
        if !heldForClockSkew.isEmpty { parts.append("held for a peer clock in the future \(heldForClockSkew.count)") }
        if !ignored.isEmpty { parts.append("ignored \(ignored.count) files") }
        if let loadedBaseline { parts.append("loaded baseline \(loadedBaseline)") }
        if carrierReset != nil { parts.append("relay reset: pushing again what it lost") }
        if interrupted { parts.append("interrupted by a stop") }
        return parts.joined(separator: ", ")
    }
}

public struct RejectedSegment: Sendable, Hashable, CustomStringConvertible {
    public var name: SegmentName
    public var reason: String

    public var description: String { "\(name): \(reason)" }
}
