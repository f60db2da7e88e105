import LogsyncCore
import LogsyncStore
import LogsyncTransport

/// A store restored from an older backup, or copied from another node's: this node's own history on the
/// carrier goes further than the store exported (`docs/operations.md`, "Restoring a store from a backup").
/// Exporting on under the same node id would fork that history, and every other node would refuse what
/// follows; the store takes a new node id instead (``SyncLedger/takeNewIdentity(checksum:)``), so that what
/// the old id published after the backup is imported back like any node's, and what is written now goes
/// out under the new id. Nothing is refused, nothing forks, and nothing is lost.
public struct StoreRestored: Error, Sendable, CustomStringConvertible {
    /// The node id the store had, and the one it took.
    public let old: NodeID
    public let new: NodeID
    /// How far the old id's history reaches on the carrier, and how far the store had exported.
    public let carrierHead: UInt64
    public let exported: UInt64

    public var description: String {
        "the carrier holds node \(old)'s history up to sequence \(carrierHead), and this store exported only up to \(exported): it was restored from an older backup (or copied from that node's store). It took the new node id \(new), so nothing forks; what \(old) wrote after the backup is imported back. Open the store again to go on (syncd does so by itself)"
    }
}

extension SyncEngine {
    /// Before this engine exports anything: whether the carrier holds more of this node's history than
    /// the store exported. If it does, the store takes a new node id and ``StoreRestored`` is thrown: the
    /// store must be opened again, with a new engine. A carrier that cannot be asked now throws its
    /// error, and nothing is exported until it can be.
    package func checkOwnHistory() throws {
        if let restored = retentionMemory.state.withLock({ $0.newIdentity }) { throw restored }
        guard !retentionMemory.state.withLock({ $0.ownHistoryChecked }) else { return }
        let exported = try store.sync.exportedSequence()
        let beyond = try transport.ownSegments(of: node).filter { $0.lastSequence > exported }.sorted()
        // Only history that reads as this node's counts (in a sealed account: opens and is signed by this
        // node's key): a name planted in the carrier, or a forgery, does not make a store take a new id.
        if let first = beyond.first, let bytes = try? transport.read(first, maximumBytes: configuration.limits.maxSegmentBytes),
            let header = try? SegmentDecoder.checkEnvelope(bytes, limits: configuration.limits), header.node == node,
            header.account == configuration.account
        {
            let head = beyond.map(\.lastSequence).max() ?? first.lastSequence
            let ids = try store.sync.takeNewIdentity(checksum: Self.checksum)
            let restored = StoreRestored(old: ids.old, new: ids.new, carrierHead: head, exported: exported)
            retentionMemory.state.withLock { $0.newIdentity = restored }
            throw restored
        }
        retentionMemory.state.withLock { $0.ownHistoryChecked = true }
    }
}
