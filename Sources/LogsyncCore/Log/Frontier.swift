/// A cursor vector: for each node, the last sequence of its history included. Every node applies each
/// node's transactions in sequence order, so a frontier names exactly one set of transactions, and the
/// merged state after applying that set is the same on every node (`docs/merge.md`).
///
/// Baselines are snapshots of the merged state at a frontier; progress records publish a node's
/// frontier (`docs/retention.md`).
package struct Frontier: Sendable, Hashable, CustomStringConvertible {
    /// Nodes with at least one transaction included; nodes at 0 are left out, so two frontiers that
    /// include the same transactions are equal.
    public private(set) var sequences: [NodeID: UInt64]

    public init(_ sequences: [NodeID: UInt64] = [:]) {
        self.sequences = sequences.filter { $0.value > 0 }
    }

    public subscript(node: NodeID) -> UInt64 {
        get { sequences[node] ?? 0 }
        set { sequences[node] = newValue > 0 ? newValue : nil }
    }

    /// The nodes in id order, with their sequences: the canonical order every encoding uses.
    public var sorted: [(node: NodeID, sequence: UInt64)] {
        sequences.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// How many transactions the frontier includes (sequences start at 1): baselines are ordered by it.
    public var transactionCount: UInt64 { sequences.values.reduce(0) { $0 &+ $1 } }

    /// Whether everything `other` includes is included here.
    public func includes(_ other: Frontier) -> Bool {
        other.sequences.allSatisfy { self[$0.key] >= $0.value }
    }

    /// The frontier that includes what either includes.
    public func union(_ other: Frontier) -> Frontier {
        Frontier(sequences.merging(other.sequences, uniquingKeysWith: max))
    }

    /// A 64-bit FNV-1a digest of the canonical form (node ids and sequences in id order): names a
    /// baseline's frontier in its file name.
    public var digest: UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        for (node, sequence) in sorted {
            for byte in node.rawValue.utf8 { mix(byte) }
            mix(0)
            for shift in stride(from: 0, to: 64, by: 8) { mix(UInt8(truncatingIfNeeded: sequence >> UInt64(shift))) }
        }
        return hash
    }

    public var description: String {
        sorted.isEmpty ? "(nothing)" : sorted.map { "\($0.node.rawValue.prefix(8)):\($0.sequence)" }.joined(separator: " ")
    }
}
