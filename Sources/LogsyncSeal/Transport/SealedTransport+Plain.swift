import LogsyncCore
import LogsyncTransport

/// Sealing an account that held plain history, in place (`[seal] from_plain`, docs/security.md "Sealing a
/// plain account"). Each node that is given the account's key with `from_plain` goes on under its own
/// node id and sequences, sealing everything it writes from then on, and publishes a sealed baseline of
/// its whole store, from which new devices start. Until every node is sealed, the plain objects the
/// account already had are read as a plain account reads them, with two bounds that a carrier cannot move:
///
/// - only from the nodes the account had when this node sealed it and that showed plain history then (a
///   plain progress record, or a plain first segment): ``ChainLedger/plainNodes``, fixed then, once the
///   account key was found right — the carrier was trusted as much as the plain account trusted it up to
///   that moment;
/// - a node's plain segments only below its first segment verified sealed, its plain progress record
///   only until any of its objects was verified sealed: nothing plain stands in for a sealed history;
/// - never a plain baseline: a baseline is a whole store, every node's rows, and would stand in for the
///   others' sealed histories. A device that needs one (its store is behind what the plain nodes pruned)
///   starts afresh from a sealed baseline instead.
///
/// The plain objects leave the carrier as the nodes prune: a node's plain segments once every node has
/// applied them and every node's newest baseline covers them — so a node that read plain segments since
/// its last sealed baseline writes another, at most once per `rebaselineInterval` — and its plain
/// baselines when its sealed one is published.
extension SealedTransport {
    /// Fixes the nodes whose plain history the account holds now, once: this node, the owners of plain
    /// progress records, and the nodes whose first segment on the carrier is plain.
    func notePlainNodes() throws(TransportError) {
        guard convertsPlain, ledger.withLock({ $0.state.plainNodes == nil }) else { return }
        var nodes: Set<String> = [node.rawValue]
        for (owner, slot) in try inner.progressRecords() where !SealedHeader.isSealed(slot) { nodes.insert(owner.rawValue) }
        var first: [NodeID: SegmentName] = [:]
        for name in try inner.scan(excluding: node).segments where !nodes.contains(name.node.rawValue) {
            if first[name.node].map({ name < $0 }) ?? true { first[name.node] = name }
        }
        for name in first.values {
            if let bytes = try? inner.read(name, maximumBytes: 1 << 30), !SealedHeader.isSealed(bytes) { nodes.insert(name.node.rawValue) }
        }
        try updateLedger { ledger in
            ledger.plainNodes = nodes.sorted()
            return true
        }
    }

    /// Why `node`'s plain segment ending at `last` is not read, or nil when it is.
    func plainSegmentRefusal(_ other: NodeID, through last: UInt64) -> String? {
        guard convertsPlain else { return nil }
        return ledger.withLock { held -> String? in
            guard let nodes = held.state.plainNodes, nodes.contains(other.rawValue) else {
                return "it is not sealed, and node \(other) was not a node of the account when this node sealed it ([seal] from_plain): give that node the account's key"
            }
            let from = other == node ? held.state.ownSealedFrom : held.state.peers[other.rawValue]?.sealedFrom
            guard let from, last >= from else { return nil }
            return "it is not sealed, and node \(other) sealed its history from sequence \(from) on: a plain copy of a sealed history"
        }
    }

    /// Whether `other`'s plain progress record is read: it is one of the account's plain nodes and none of
    /// its objects was verified sealed yet.
    func readsPlainObjects(of other: NodeID) -> Bool {
        guard convertsPlain, other != node else { return false }
        return ledger.withLock { held in
            held.state.plainNodes?.contains(other.rawValue) == true && held.state.peers[other.rawValue] == nil
        }
    }

    /// Whether this node has yet to publish the sealed baseline an account sealed in place goes on from,
    /// or read plain segments since its last one (and that was at least `rebaselineInterval` ago).
    public var wantsBaseline: Bool {
        guard convertsPlain, keyring != nil, ledger.withLock({ $0.state.sealedBaseline != true }) else { return false }
        return lastBaselineAt.withLock { $0.map { ContinuousClock.now - $0 >= rebaselineInterval } ?? true }
    }

    /// A plain segment was read past those read before: the next sealed baseline must cover it before it
    /// can be pruned. (The same segments read again, to check what was applied, change nothing.)
    func notePlainRead(_ name: SegmentName) {
        ledger.withLock { held in
            guard name.lastSequence > held.state.plainRead?[name.node.rawValue] ?? 0 else { return }
            held.state.plainRead = (held.state.plainRead ?? [:]).merging([name.node.rawValue: name.lastSequence]) { max($0, $1) }
            held.state.sealedBaseline = false
            held.dirty = true
        }
    }

    /// Before a sealed baseline is published: a plain one of this node under the same name (the same
    /// frontier) would make the publish a no-op and stay on the carrier. A sealed one stays (publishing
    /// the name again is then a no-op, as for any transport).
    func replacePlainBaseline(_ name: BaselineName) throws(TransportError) {
        guard convertsPlain, try inner.baselines().contains(name) else { return }
        var first: [UInt8] = []
        struct Enough: Error {}
        do {
            try inner.readBaseline(name, maximumBytes: Int.max) { chunk in
                first += chunk
                if first.count >= SealedHeader.magic.count { throw Enough() }
            }
        } catch {}
        if first.count >= SealedHeader.magic.count, !SealedHeader.isSealed(first) { try inner.remove(name) }
    }

    func notePublishedBaseline() throws(TransportError) {
        guard convertsPlain else { return }
        lastBaselineAt.withLock { $0 = .now }
        try updateLedger { ledger in
            guard ledger.sealedBaseline != true else { return false }
            ledger.sealedBaseline = true
            return true
        }
    }
}
