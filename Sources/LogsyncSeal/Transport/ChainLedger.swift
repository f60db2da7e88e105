import Foundation
import LogsyncCore
import LogsyncPlatform

/// What a node of a sealed account remembers of the others' chains, and of its own: per node, the key
/// its objects are signed with, the link of the newest segment verified in order, and the time of the
/// newest progress record seen; for itself, the links of its newest published segments (what the next
/// one names). Kept in a small file beside the store, rewritten when it changed; losing it costs
/// nothing but checks (every chain is anchored again where it is next read).
struct ChainLedger: Codable, Sendable, Equatable {
    struct Peer: Codable, Sendable, Equatable {
        /// Hex of the node's public signing key, pinned when its first object was opened.
        var signer: String
        /// The newest segment verified in order: its range, link (hex) and the SHA-256 of its plain bytes
        /// (hex), which tells a segment sealed again from another history.
        var first: UInt64?
        var last: UInt64 = 0
        var link: String = ""
        var content: String?
        /// The newest progress record's time (milliseconds) seen from this node.
        var progressAt: UInt64 = 0
        /// In an account sealed in place: the first sequence of this node verified sealed. Its plain
        /// segments are read only below it.
        var sealedFrom: UInt64?
    }

    struct OwnLink: Codable, Sendable, Equatable {
        var first: UInt64
        var last: UInt64
        var link: String
    }

    var peers: [String: Peer] = [:]
    /// This node's newest published segments, oldest first, at most ``ownLinksKept``.
    var own: [OwnLink] = []
    /// In an account sealed in place (`[seal] from_plain`): the nodes whose plain history the account held
    /// when this node sealed it, fixed then; nil in an account sealed from the start.
    var plainNodes: [String]?
    /// In an account sealed in place: this node's first sealed segment, and whether it has published the
    /// sealed baseline the account goes on from.
    var ownSealedFrom: UInt64?
    var sealedBaseline: Bool?
    /// In an account sealed in place: per node, the newest sequence of a plain segment read.
    var plainRead: [String: UInt64]?

    static let ownLinksKept = 512

    /// The ledger at `path`: empty when there is no file yet; nil when a file is there and cannot be read
    /// (checks would silently start afresh: the daemon refuses to start instead, ``SealedTransport/checkAccount()``).
    static func load(_ path: String) -> ChainLedger? {
        guard FileManager.default.fileExists(atPath: path) else { return ChainLedger() }
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(ChainLedger.self, from: data)
    }

    func save(_ path: String) throws(SystemError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(self)) ?? Data()
        try DurableFiles.replace(path, with: Array(data))
    }

    /// The link a segment starting at `first` names: this node's segment that ends just before it.
    func previousOwnLink(before first: UInt64) -> [UInt8]? {
        guard first > 1 else { return nil }
        return own.last(where: { $0.last == first - 1 }).flatMap { Hex.decode($0.link) }
    }

    mutating func recordOwn(first: UInt64, last: UInt64, link: [UInt8]) {
        if plainNodes != nil, ownSealedFrom.map({ first < $0 }) ?? true { ownSealedFrom = first }
        own.removeAll { $0.last >= first }
        own.append(OwnLink(first: first, last: last, link: Hex.encode(link)))
        if own.count > Self.ownLinksKept { own.removeFirst(own.count - Self.ownLinksKept) }
    }
}
