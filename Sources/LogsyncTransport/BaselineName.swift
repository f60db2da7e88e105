import LogsyncCore

/// Which baseline a file holds: the node that wrote it, how many transactions its frontier includes, and
/// a digest of that frontier. `<count>-<digest>.lsbase`, the count as 20 zero-padded digits and the digest
/// as 16 lowercase hex digits, in the writer's node folder. Two nodes at the same frontier write the same
/// bytes under the same file name; a later baseline has a larger count.
public struct BaselineName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var node: NodeID
    public var transactionCount: UInt64
    public var frontierDigest: UInt64

    public init(node: NodeID, transactionCount: UInt64, frontierDigest: UInt64) {
        self.node = node
        self.transactionCount = transactionCount
        self.frontierDigest = frontierDigest
    }

    /// The name of `node`'s baseline at `frontier`.
    package init(node: NodeID, frontier: Frontier) {
        self.init(node: node, transactionCount: frontier.transactionCount, frontierDigest: frontier.digest)
    }

    public static let fileExtension = "lsbase"

    public var fileName: String {
        let hex = String(frontierDigest, radix: 16)
        return SegmentName.padded(transactionCount) + "-" + String(repeating: "0", count: 16 - hex.count) + hex + "." + Self.fileExtension
    }

    /// Parses a file name strictly; anything else is nil.
    public static func parse(fileName: String, node: NodeID) -> BaselineName? {
        let bytes = Array(fileName.utf8)
        guard bytes.count == 20 + 1 + 16 + 1 + fileExtension.utf8.count, bytes[20] == UInt8(ascii: "-"),
            fileName.hasSuffix("." + fileExtension), let count = SegmentName.decimal(bytes[0..<20])
        else { return nil }
        let hex = bytes[21..<37]
        guard hex.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }),
            let digest = UInt64(String(decoding: hex, as: UTF8.self), radix: 16)
        else { return nil }
        return BaselineName(node: node, transactionCount: count, frontierDigest: digest)
    }

    /// Ordered by transaction count (later baselines last), then node and digest.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.transactionCount, lhs.node, lhs.frontierDigest) < (rhs.transactionCount, rhs.node, rhs.frontierDigest)
    }

    public var description: String { "\(node)/\(fileName)" }
}

/// The name of a node's progress record in its folder (replaced as a whole).
public enum ProgressRecordName {
    public static let fileName = "progress.lsprog"
}
