import LogsyncCore

/// Which node's sequence range a segment file holds. File names are the only metadata a transport
/// trusts before verifying a segment: `<first>-<last>.lseg` with both numbers as 20 zero-padded digits,
/// inside the folder named by the node id.
public struct SegmentName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var node: NodeID
    public var firstSequence: UInt64
    public var lastSequence: UInt64

    public init(node: NodeID, firstSequence: UInt64, lastSequence: UInt64) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
    }

    public static let fileExtension = "lseg"

    public var fileName: String {
        "\(Self.padded(firstSequence))-\(Self.padded(lastSequence)).\(Self.fileExtension)"
    }

    /// Parses a file name strictly; anything else (temp files, conflict copies, stray files) is nil.
    public static func parse(fileName: String, node: NodeID) -> SegmentName? {
        let bytes = Array(fileName.utf8)
        guard bytes.count == 20 + 1 + 20 + 1 + fileExtension.utf8.count, bytes[20] == UInt8(ascii: "-"),
            fileName.hasSuffix("." + fileExtension)
        else { return nil }
        guard let first = decimal(bytes[0..<20]), let last = decimal(bytes[21..<41]), first >= 1, first <= last,
            last <= LogTransaction.maximumSequence
        else { return nil }
        return SegmentName(node: node, firstSequence: first, lastSequence: last)
    }

    /// The value of ASCII decimal digits, or nil for anything else or a value past `UInt64.max`.
    public static func decimal(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    /// Node folders are named by node id: a lowercase UUID.
    public static func isNodeFolderName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte) else {
                    return false
                }
            }
        }
        return true
    }

    /// `value` as 20 zero-padded decimal digits, as file names write sequences and counts.
    static func padded(_ value: UInt64) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.node, lhs.firstSequence, lhs.lastSequence) < (rhs.node, rhs.firstSequence, rhs.lastSequence)
    }

    public var description: String { "\(node)/\(fileName)" }
}
