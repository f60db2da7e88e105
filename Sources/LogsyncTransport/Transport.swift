import LogsyncCore
@_exported import enum LogsyncPlatform.FileKind

/// Moves segments between nodes. A transport stores bytes; it never interprets or deletes segments of
/// other nodes, and it reports what it had to ignore.
public protocol Transport: Sendable {
    /// Publishes one of this node's segments durably. Publishing the same bytes again succeeds;
    /// different bytes under an existing name fail with ``TransportError/Code/conflict``.
    func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError)

    /// The segments of other nodes available now, and the files that were ignored: everything, listed
    /// afresh.
    func scan(excluding node: NodeID) throws(TransportError) -> TransportScan

    /// Brings what the transport knows of other nodes' segments up to date, looking only at what may
    /// have changed since the last refresh (the first one sees everything), and says what appeared. The
    /// cost of a refresh follows what changed, not how much the transport holds.
    func refresh(excluding node: NodeID) throws(TransportError) -> TransportView

    /// The segments of `node` known at the last refresh that hold a sequence after `sequence`, in order.
    func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName]

    /// This node's own segments as the carrier holds them now, asked afresh without changing what
    /// ``refresh(excluding:)`` reports next: how far the node's history reaches there, to tell whether
    /// its store is behind it (restored from an older backup).
    func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName]

    /// The bytes of a listed segment (not yet verified: the caller checks them before use).
    func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8]

    /// Wakes the caller when new segments may have arrived: at once where the transport can tell, and at
    /// least every `rescanInterval` otherwise. Ends when the consuming task is cancelled.
    func arrivals(rescanInterval: Duration) -> AsyncStream<Void>

    // MARK: Bounded growth (docs/retention.md)

    /// Replaces this node's progress record (``ProgressRecord``'s bytes) durably.
    func publishProgress(_ bytes: [UInt8]) throws(TransportError)

    /// Every node's progress record, this node's included, as stored (not yet verified). Records that
    /// cannot be read are left out and reported in the transport's ignored files.
    func progressRecords() throws(TransportError) -> [NodeID: [UInt8]]

    /// Publishes one of this node's baselines durably, from chunks (`next` returns nil at the end).
    /// Publishing an existing name again succeeds without writing: the same frontier has the same bytes.
    func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError)

    /// Every node's baselines, as named (not yet verified).
    func baselines() throws(TransportError) -> [BaselineName]

    /// Reads a baseline in chunks: `consume` gets each in order.
    func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError)

    /// Deletes one of this node's own segments (pruning). Refuses another node's: a node never deletes
    /// what it did not write. Deleting a segment that is gone succeeds.
    func remove(_ name: SegmentName) throws(TransportError)

    /// Deletes one of this node's own baselines (a newer one replaced it). Refuses another node's.
    func remove(_ name: BaselineName) throws(TransportError)

    // MARK: Carriers that can lose history

    /// Who carries the segments, as the carrier last said, and whether it was found to have lost some
    /// (a relay restored from an older backup, or given a new database): nil for a carrier that cannot
    /// tell (the shared folder), or before its first answer. The engine pushes again what this node
    /// still has when the identity differs from the one it last published through, or when
    /// ``CarrierState/resets`` grows.
    func carrierState() -> CarrierState?

    /// The transport that reaches the carrier: this one, or the one a layer such as sealing wraps.
    var carrierTransport: any Transport { get }

    /// Whether this node should write a baseline now, whatever its count of transactions: an account
    /// sealed in place goes on from each node's sealed baseline.
    var wantsBaseline: Bool { get }
}

extension Transport {
    public func carrierState() -> CarrierState? { nil }
    public var wantsBaseline: Bool { false }
    public var carrierTransport: any Transport { self }
}

/// What a transport knows of its carrier's history (``Transport/carrierState()``).
public struct CarrierState: Sendable, Hashable {
    /// The carrier's identity: a relay's database id and epoch, `ID/EPOCH`. A different one holds another
    /// history: what was published through the old one may be missing.
    public var identity: String
    /// How many times, since the transport was made, it found the carrier's history had gone back (a new
    /// identity, or fewer arrivals than it had already pulled) and pulled again from the start.
    public var resets: Int
    /// Why, the last time.
    public var lastReset: String?

    public init(identity: String, resets: Int = 0, lastReset: String? = nil) {
        self.identity = identity
        self.resets = resets
        self.lastReset = lastReset
    }
}

/// The result of scanning a transport.
public struct TransportScan: Sendable {
    public var segments: [SegmentName]
    /// Files seen but not taken as segments, with why.
    public var ignored: [IgnoredFile]

    public init(segments: [SegmentName], ignored: [IgnoredFile]) {
        self.segments = segments
        self.ignored = ignored
    }
}

public struct IgnoredFile: Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A temporary file of a writer or a sync tool (`.name.tmp`, `.syncthing.*.tmp`, `~*`).
        case temporary
        /// A copy made by a sync tool on conflicting edits (`*.sync-conflict-*`, `* (… conflicted copy …)`).
        case conflictCopy
        /// Neither a segment name nor a known temporary: left alone.
        case unknownName
        /// Named like a segment, but not a regular file (a FIFO, a socket, a device, a link): never
        /// opened, since only regular files are read from a shared folder.
        case notRegularFile(FileKind)
        /// Named like a node folder, but not a directory (a link to one included): never followed.
        case notADirectory(FileKind)
        /// A node folder that could not be opened or listed (permissions, removed meanwhile).
        case unreadableFolder(String)
        /// An object of a sealed account that fails its seal (forged, changed, misplaced, rolled back, or
        /// plain): left out, with why.
        case unsealable(String)

        public var description: String {
            switch self {
            case .temporary: return "temporary file"
            case .conflictCopy: return "conflict copy"
            case .unknownName: return "not a segment name"
            case .notRegularFile(let kind): return "a \(kind) named like a segment: only regular files are read from the shared folder"
            case .notADirectory(let kind): return "a \(kind) named like a node folder: only directories are listed, links are not followed"
            case .unreadableFolder(let error): return "node folder not readable: \(error)"
            case .unsealable(let why): return "refused by the seal: \(why)"
            }
        }

        /// Whether this is worth an operator's attention (odd files a person or program put there), rather
        /// than the ordinary traces of writers and sync tools.
        public var isSuspicious: Bool {
            switch self {
            case .temporary, .conflictCopy, .unknownName: return false
            case .notRegularFile, .notADirectory, .unreadableFolder, .unsealable: return true
            }
        }
    }

    public var path: String
    public var reason: Reason
    /// The segment its name stands for, when it is named like one (a FIFO in a segment's place): what a
    /// node waits for can then be explained by it.
    public var segment: SegmentName?

    public init(path: String, reason: Reason, segment: SegmentName? = nil) {
        self.path = path
        self.reason = reason
        self.segment = segment
    }

    public var description: String { "\(path) (\(reason))" }
}

/// A transport failure: what, where, and the system error behind it.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// The shared folder or a node folder is missing or not a directory.
        public static let notFound = Code(name: "notFound")
        /// A file could not be read, written, synced or renamed; see the cause (a full disk shows as ENOSPC).
        public static let io = Code(name: "io")
        /// A segment name exists with different bytes.
        public static let conflict = Code(name: "conflict")
        /// A segment is larger than the caller allows.
        public static let tooLarge = Code(name: "tooLarge")
        /// A segment's name is taken by something that is not a regular file (a FIFO, a link, a device).
        public static let notRegularFile = Code(name: "notRegularFile")
        /// A relay did not accept the credentials (no token, wrong or revoked): retrying will not help.
        public static let unauthorized = Code(name: "unauthorized")
        /// A relay refused the request for this account or node: retrying will not help.
        public static let forbidden = Code(name: "forbidden")
        /// A relay's storage quota for the account is used up.
        public static let quotaExceeded = Code(name: "quotaExceeded")
        /// A relay refused the request as malformed (a bug, or a relay of another version).
        public static let refused = Code(name: "refused")
        /// An object of a sealed account fails its seal — forged, changed, cut, moved between nodes or
        /// accounts, a second history of a node's sequences, sealed under another key — or is plain:
        /// refused, and the same bytes will be refused again.
        public static let unsealable = Code(name: "unsealable")
        /// A device of a sealed account that holds no key yet: it waits until a member approves it
        /// (`syncctl devices approve`).
        public static let awaitingApproval = Code(name: "awaitingApproval")

        /// Whether sending the same request again cannot succeed until something else changes (a
        /// credential, a quota, a segment): such failures are not retried by the transport.
        public var isPermanent: Bool { [.unauthorized, .forbidden, .quotaExceeded, .refused, .conflict, .tooLarge, .unsealable].contains(self) }
    }

    public var code: Code
    public var message: String
    public var path: String?
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, path: String? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = cause
    }

    public var description: String {
        var text = message
        if let cause { text += ": \(cause)" }
        return text
    }
}
