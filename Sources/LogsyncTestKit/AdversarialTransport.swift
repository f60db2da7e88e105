import LogsyncCore
import LogsyncTransport
import Synchronization

/// A carrier that lies to one node: a ``Transport`` wrapped around the honest one, which hides, swaps,
/// cuts, moves and forges what that node reads, as a hostile folder, Syncthing peer or relay could.
/// Attacks are set and healed while the node runs; the honest carrier underneath is never changed, so a
/// witness that reads it directly sees the truth. For the sealed-log tests (`docs/security.md`).
public final class AdversarialTransport: Transport {
    /// What the node reads in a segment's place.
    public enum Attack: Sendable, Hashable, CustomStringConvertible {
        /// The segment is not listed: dropped.
        case drop
        /// Other bytes are served under its name, and what they are: another segment of the same node
        /// (duplicated or reordered), another node's, another account's, the segment cut short or with a
        /// byte changed, or a plain segment the carrier wrote itself.
        case serve([UInt8], kind: String)

        public var description: String {
            switch self {
            case .drop: return "drop"
            case .serve(_, let kind): return kind
            }
        }
    }

    public let inner: any Transport
    let state = Mutex<(attacks: [SegmentName: Attack], withheldAfter: [NodeID: UInt64], progress: [NodeID: [UInt8]])>(([:], [:], [:]))

    public init(wrapping inner: any Transport) { self.inner = inner }

    public var carrierTransport: any Transport { inner.carrierTransport }

    /// Lies about `name` from now on.
    public func attack(_ name: SegmentName, _ attack: Attack) { state.withLock { $0.attacks[name] = attack } }

    /// Hides `node`'s segments after `sequence`: its tail withheld.
    public func withhold(_ node: NodeID, after sequence: UInt64) { state.withLock { $0.withheldAfter[node] = sequence } }

    /// Serves `bytes` as `node`'s progress record (an older one: rolled back).
    public func serveProgress(of node: NodeID, _ bytes: [UInt8]) { state.withLock { $0.progress[node] = bytes } }

    /// Tells the truth again.
    public func heal() { state.withLock { $0 = ([:], [:], [:]) } }

    public var attacks: [SegmentName: Attack] { state.withLock { $0.attacks } }

    private func hidden(_ name: SegmentName) -> Bool {
        state.withLock { held in
            if case .drop? = held.attacks[name] { return true }
            if let after = held.withheldAfter[name.node], name.lastSequence > after { return true }
            return false
        }
    }

    public func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) { try inner.publish(name, bytes: bytes) }

    public func scan(excluding node: NodeID) throws(TransportError) -> TransportScan {
        var scan = try inner.scan(excluding: node)
        scan.segments.removeAll(where: hidden)
        return scan
    }

    public func refresh(excluding node: NodeID) throws(TransportError) -> TransportView {
        var view = try inner.refresh(excluding: node)
        view.appeared.removeAll(where: hidden)
        // Whatever was attacked may be read again: the engine looks at listed names each round.
        return view
    }

    public func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName] { try inner.ownSegments(of: node) }

    public func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName] {
        inner.segments(of: node, after: sequence).filter { !hidden($0) }
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        if case .serve(let bytes, _)? = state.withLock({ $0.attacks[name] }) {
            guard bytes.count <= maximumBytes else { throw TransportError(.tooLarge, "\(name) is \(bytes.count) bytes") }
            return bytes
        }
        guard !hidden(name) else { throw TransportError(.notFound, "\(name) is not in the carrier") }
        return try inner.read(name, maximumBytes: maximumBytes)
    }

    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> { inner.arrivals(rescanInterval: rescanInterval) }
    public func publishProgress(_ bytes: [UInt8]) throws(TransportError) { try inner.publishProgress(bytes) }

    public func progressRecords() throws(TransportError) -> [NodeID: [UInt8]] {
        var records = try inner.progressRecords()
        for (node, bytes) in state.withLock({ $0.progress }) { records[node] = bytes }
        return records
    }

    public func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError) {
        try inner.publishBaseline(name, chunks: next)
    }

    public func baselines() throws(TransportError) -> [BaselineName] { try inner.baselines() }

    public func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError) {
        try inner.readBaseline(name, maximumBytes: maximumBytes, consume: consume)
    }

    public func remove(_ name: SegmentName) throws(TransportError) { try inner.remove(name) }
    public func remove(_ name: BaselineName) throws(TransportError) { try inner.remove(name) }
    public func carrierState() -> CarrierState? { inner.carrierState() }
}
