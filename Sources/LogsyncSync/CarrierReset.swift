import LogsyncCore
import LogsyncStore
import LogsyncTransport

/// A carrier that lost history (a relay restored from an older backup, or given a new database;
/// docs/relay-protocol.md, "Identity and epoch"). The transport noticed it and pulled again from the
/// start — nothing is applied twice, the store's cursors see to that; here this node gives the carrier
/// back what it still has of its own: its published segments that pruning has not deleted (their bytes
/// stay in the outbox until then), its progress record, and a baseline when the carrier lacks its newest.
extension SyncEngine {
    /// After this round's pulls: when the carrier's identity differs from the one this store last
    /// published through (recorded in the store, so a restart notices too), or the transport found its
    /// history gone back since the last round, marks what this node published as unpublished again and
    /// says so in the report. The round's last publish pushes it.
    func recoverIfCarrierReset(into report: inout SyncReport) throws {
        guard let carrier = transport.carrierState() else { return }
        let recorded = try store.sync.carrierIdentity()
        let seen = retentionMemory.state.withLock { $0.carrierResets }
        var finding: String?
        if let recorded, recorded != carrier.identity {
            finding = "the relay serves history \(carrier.identity), not \(recorded) as when this node last published through it"
        } else if carrier.resets > seen {
            finding = carrier.lastReset ?? "the relay's history went back"
        }
        if let finding {
            let done = try pushAgain()
            report.carrierReset = "\(finding); \(done)"
        }
        if recorded != carrier.identity { try store.sync.recordCarrierIdentity(carrier.identity) }
        retentionMemory.state.withLock { $0.carrierResets = carrier.resets }
    }

    /// Marks this node's retained segments unpublished, and has progress and baselines published again
    /// by this round's retention; returns what it did, in words.
    private func pushAgain() throws -> String {
        let (count, withoutBytes) = try store.sync.markRetainedUnpublished()
        retentionMemory.state.withLock { state in
            state.lastProgress = nil
            state.ownNewestBaseline = nil
            state.lastBootstrapCheckAt = nil
        }
        var done = ["pushing again the \(count) segments of this node it still has"]
        if configuration.retention.enabled { done.append("its progress record, and a baseline if the relay lacks its newest") }
        // Segments whose bytes an older logsync dropped once published: those the carrier lacks are gone
        // for good. With retention, they count as pruned (nodes that lack them load a baseline), and a
        // baseline of this store covers them; without, nodes that lack them wait for them.
        let listed = Set(transport.segments(of: node, after: 0))
        let lost = withoutBytes.filter { !listed.contains(SegmentName(node: node, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence)) }
        if !lost.isEmpty {
            if configuration.retention.enabled {
                for segment in lost { try store.sync.recordPruned(firstSequence: segment.firstSequence, lastSequence: segment.lastSequence) }
                let baseline = try writeBaselineNow()
                done.append(
                    "\(lost.count) segments up to sequence \(lost.last!.lastSequence) were published before their bytes were kept: counted as pruned, covered by \(baseline.map { "baseline \($0)" } ?? "the next baseline")")
            } else {
                done.append(
                    "\(lost.count) segments up to sequence \(lost.last!.lastSequence) were published before their bytes were kept and cannot be pushed again: nodes that lack them wait (turn retention on to cover them with a baseline)")
            }
        }
        // This node's segments that pruning deleted may be back (an older copy of the relay): delete them
        // again, or nodes would find segments whose checksums they forgot.
        let pruned = try store.sync.prunedSequence()
        let kept = Set(try store.sync.publishedSegments(through: pruned).map { $0.firstSequence })
        for name in listed where name.lastSequence <= pruned && !kept.contains(name.firstSequence) {
            try transport.remove(name)
        }
        return done.joined(separator: ", ")
    }

    /// Whether `name` is another node's segment whose checksum this store forgot because that node said
    /// it deleted it (``forgetAppliedSegments``): seen again, it comes from an older copy of the carrier
    /// and cannot be compared with anything.
    func isForgotten(_ name: SegmentName) -> Bool {
        retentionMemory.state.withLock { name.lastSequence <= $0.forgotten[name.node] ?? 0 }
    }
}
