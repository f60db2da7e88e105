import LogsyncCore
import LogsyncTransport

/// Sealing an account that held plain history, in place (`[seal] from_plain`, docs/security.md "Sealing a
/// plain account"). Each node that is given the account's key with `from_plain` goes on under its own
/// node id and sequences, sealing everything it writes from then on, and publishes a sealed baseline of
/// its whole store, from which new devices start. Until every node is sealed, the plain objects the
/// account already had are read as a plain account reads them, with two bounds that a carrier cannot move:
///
/// - only from the nodes the account had when this node sealed it (``ChainLedger/plainNodes``, fixed then:
///   the carrier was trusted as much as the plain account trusted it up to that moment);
/// - a node's plain segments only below its first segment verified sealed, its plain progress record and
///   baselines only until any of its objects was verified sealed: nothing plain stands in for a sealed
///   history.
///
/// The plain objects leave the carrier as the nodes prune: a node's plain segments once every node has
/// applied them and every node's newest baseline covers them — so a node that read plain segments since
/// its last sealed baseline writes another, at most once per `rebaselineInterval` — and its plain
/// baselines when its sealed one is published.
extension SealedTransport {
    /// Fixes the nodes whose plain history the account holds now, once: the owners of plain progress
    /// records and every node with segments on the carrier, and this node.
    func notePlainNodes() throws(TransportError) {
        guard convertsPlain, ledger.withLock({ $0.state.plainNodes == nil }) else { return }
        var nodes: Set<String> = [node.rawValue]
        for (owner, slot) in try inner.progressRecords() where !SealedHeader.isSealed(slot) { nodes.insert(owner.rawValue) }
        for name in try inner.scan(excluding: node).segments { nodes.insert(name.node.rawValue) }
        let state = ledger.withLock { held in
            held.state.plainNodes = nodes.sorted()
            held.dirty = true
            return held.state
        }
        try save(state)
        ledger.withLock { held in if held.state == state { held.dirty = false } }
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

    /// Whether `other`'s plain progress record or baseline is read: it is one of the account's plain
    /// nodes and none of its objects was verified sealed yet.
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

    /// A plain segment was read: the next sealed baseline must cover it before it can be pruned.
    func notePlainRead() {
        ledger.withLock { held in
            guard held.state.sealedBaseline != false else { return }
            held.state.sealedBaseline = false
            held.dirty = true
        }
    }

    /// Before a sealed baseline is published: a plain one of this node under the same name (the same
    /// frontier) would make the publish a no-op and stay on the carrier.
    func replacePlainBaseline(_ name: BaselineName) throws(TransportError) {
        guard convertsPlain, try inner.baselines().contains(name) else { return }
        try inner.remove(name)
    }

    func notePublishedBaseline() throws(TransportError) {
        guard convertsPlain else { return }
        lastBaselineAt.withLock { $0 = .now }
        let state = ledger.withLock { held -> ChainLedger? in
            guard held.state.sealedBaseline != true else { return nil }
            held.state.sealedBaseline = true
            held.dirty = true
            return held.state
        }
        guard let state else { return }
        try save(state)
        ledger.withLock { held in if held.state == state { held.dirty = false } }
    }
}
