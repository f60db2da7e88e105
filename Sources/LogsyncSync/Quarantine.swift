import LogsyncCore
import LogsyncStore
import LogsyncTransport

/// What the operator can act on (`syncctl quarantine`): segments refused (each holds its own node's
/// stream), segments quarantined for divergence (the same node and sequences with other content), and
/// the segments dropped so far.
package struct QuarantineState: Sendable {
    package var refused: [SegmentRefusal]
    package var divergent: [QuarantineRecord]
    package var dropped: [DroppedSegment]
}

extension SyncEngine {
    package func quarantineState() throws -> QuarantineState {
        QuarantineState(refused: try store.sync.refusals(), divergent: try store.sync.quarantined(), dropped: try store.sync.droppedSegments())
    }

    /// Forgets the refusal (or divergence record) of `name`: the next round reads the segment again, as
    /// after its file was replaced or the app upgraded. Between rounds, never during one.
    package func release(_ name: SegmentName) throws -> Bool {
        try serialized { try store.sync.release(node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence) }
    }

    /// Gives up on the refused segment `name`: its node's stream goes on after it, durably
    /// (``Store/drop(node:firstSequence:lastSequence:)``). Between rounds, never during one.
    package func drop(_ name: SegmentName) throws -> DroppedSegment {
        try serialized {
            let dropped = try store.sync.drop(node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence)
            // The file's name is at the cursor now: what checks segments below it must not take it for new.
            unchecked.names.withLock { _ = $0.remove(name) }
            return dropped
        }
    }
}

extension SegmentName {
    /// A segment as an operator names it: `NODE/FIRST-LAST`, the numbers with or without their zero
    /// padding, optionally followed by `.lseg` (so the names `status` prints work as they are).
    package init?(operatorText text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return nil }
        var range = Substring(parts[1])
        if range.hasSuffix("." + Self.fileExtension) { range = range.dropLast(Self.fileExtension.count + 1) }
        let numbers = range.split(separator: "-", omittingEmptySubsequences: false)
        guard numbers.count == 2, let first = Self.decimal(numbers[0].utf8), let last = Self.decimal(numbers[1].utf8),
            first >= 1, first <= last, last <= LogTransaction.maximumSequence
        else { return nil }
        self.init(node: NodeID(String(parts[0])), firstSequence: first, lastSequence: last)
    }
}
