import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import LogsyncTransport

/// `syncctl quarantine list|release|drop` (`docs/operations.md`, "Refused segments").
extension ControlHandler {
    /// `quarantine_list`, `quarantine_release` and `quarantine_drop`: fills `response.quarantine` and
    /// returns the failure to answer with, if any. A release or a drop wakes the sync loop, so that the
    /// segment (or what follows it) is read at once.
    func quarantine(_ request: ControlRequest, engine: SyncEngine, into response: inout ControlResponse) throws -> (ControlFailure.Code, String)? {
        var message: String?
        if request.command != .quarantineList {
            guard let text = request.segment, let name = SegmentName(operatorText: text) else {
                return (.badRequest, "name the segment as NODE/FIRST-LAST, as 'syncctl quarantine list' shows it; got '\(request.segment ?? "")'")
            }
            if request.command == .quarantineRelease {
                guard try engine.release(name) else {
                    response.quarantine = try report(of: engine)
                    return (.notFound, "no refused or divergent segment \(Self.operatorName(name)) is recorded")
                }
                message = "released \(Self.operatorName(name)): it is read again in the next round"
                logger.notice("\(message!)", metadata: ["message_id": "\(MessageID.rejected)", "segment": "\(name)"])
            } else {
                let dropped: DroppedSegment
                do {
                    dropped = try engine.drop(name)
                } catch let error as StoreError where error.code == .schema {
                    response.quarantine = try report(of: engine)
                    return (.notFound, error.message)
                }
                message = "DROPPED \(Self.operatorName(name)) for good: its transactions are never applied on this node; node \(name.node)'s stream goes on after it. It had been refused because \(dropped.reason)"
                logger.critical("\(message!)", metadata: ["message_id": "\(MessageID.dropped)", "segment": "\(name)"])
                events.publish(.dropped, message!)
            }
            loop.wake()
        }
        var report = try report(of: engine)
        report.message = message
        response.quarantine = report
        return nil
    }

    private func report(of engine: SyncEngine) throws -> QuarantineReport {
        let state = try engine.quarantineState()
        return QuarantineReport(
            refused: state.refused.map(Self.entry),
            divergent: state.divergent.map {
                QuarantineEntry(node: $0.node.rawValue, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence, reason: $0.reason, location: $0.location)
            },
            dropped: state.dropped.map {
                DroppedEntry(
                    node: $0.node.rawValue, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence,
                    segment: Self.operatorName(SegmentName(node: $0.node, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence)),
                    reason: $0.reason, at: $0.at)
            })
    }

    static func entry(_ refusal: SegmentRefusal) -> RefusedEntry {
        RefusedEntry(
            node: refusal.node.rawValue, firstSequence: refusal.firstSequence, lastSequence: refusal.lastSequence,
            segment: operatorName(SegmentName(node: refusal.node, firstSequence: refusal.firstSequence, lastSequence: refusal.lastSequence)),
            reason: refusal.reason, location: refusal.location, at: refusal.at)
    }

    /// `NODE/FIRST-LAST`, what `syncctl quarantine release|drop` takes.
    static func operatorName(_ name: SegmentName) -> String {
        "\(name.node)/\(name.firstSequence)-\(name.lastSequence)"
    }
}
