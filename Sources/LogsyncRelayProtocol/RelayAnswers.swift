import Foundation

/// A JSON answer of the relay: the schema of docs/relay-openapi.yaml it is, and its bytes on the wire.
/// The relay encodes with sorted keys; the client decodes what it needs.
public protocol RelayAnswer: Codable, Sendable {
    /// Its name under `components/schemas` in docs/relay-openapi.yaml.
    static var schema: String { get }
}

extension RelayAnswer {
    /// The answer's JSON as the relay sends it (keys sorted).
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }

    /// Decodes an answer, or nil when the bytes are not this answer's JSON (a relay of another version).
    public static func decoded(_ bytes: [UInt8]) -> Self? { try? JSONDecoder().decode(Self.self, from: Data(bytes)) }
}

/// Which history the relay's arrival numbers count in: its database's id, made when the database is
/// created (a copy or a restored backup keeps it), and an epoch that changes when the database's history
/// went backwards (docs/relay-protocol.md, "Identity and epoch"). Every pull answer carries it: a node
/// whose cursor belongs to another identity pulls again from the start and pushes again what the relay
/// lost.
public struct RelayIdentity: Sendable, Codable, Hashable, CustomStringConvertible {
    /// 32 lowercase hex digits.
    public var id: String
    /// 1 for a new database; at each change, the time of the change in milliseconds since 1970, or one
    /// more than every epoch seen before if that is larger: it only grows, and a backup restored twice
    /// gets a new epoch each time.
    public var epoch: UInt64

    public init(id: String, epoch: UInt64) {
        self.id = id
        self.epoch = epoch
    }

    /// `ID/EPOCH`.
    public var description: String { "\(id)/\(epoch)" }
}

/// `GET /v1/health`: the process serves, and which history.
public struct HealthAnswer: RelayAnswer {
    public static let schema = "Health"
    /// `ok`.
    public var status: String
    public var relay: RelayIdentity

    public init(status: String = "ok", relay: RelayIdentity) {
        self.status = status
        self.relay = relay
    }
}

/// `GET /v1/ready`: storage answers and its writer runs.
public struct StatusAnswer: RelayAnswer {
    public static let schema = "Status"
    /// `ready`.
    public var status: String

    public init(status: String) { self.status = status }
}

/// A push's answer (`200` unchanged, `201` stored).
public struct PushAnswer: RelayAnswer {
    public static let schema = "PushAnswer"
    /// false: the same bytes were stored before.
    public var stored: Bool
    public var arrival: UInt64

    public init(stored: Bool, arrival: UInt64) {
        self.stored = stored
        self.arrival = arrival
    }
}

/// A pull's answer: the segments after the cursor, oldest first.
public struct PullAnswer: RelayAnswer {
    public static let schema = "PullAnswer"

    public struct Segment: Codable, Sendable {
        public var arrival: UInt64
        public var node: String
        public var first: UInt64
        public var last: UInt64
        public var size: Int
        /// The segment's bytes, base64.
        public var data: String

        public init(arrival: UInt64, node: String, first: UInt64, last: UInt64, size: Int, data: String) {
            self.arrival = arrival
            self.node = node
            self.first = first
            self.last = last
            self.size = size
            self.data = data
        }
    }

    /// Where the next pull starts: the last arrival in `segments`, or the cursor asked for.
    public var cursor: UInt64
    /// Whether more segments wait after `cursor`.
    public var more: Bool
    public var segments: [Segment]
    /// Which history the cursor counts in: a node holding a cursor of another identity or epoch pulls
    /// again from 0. This relay always sends it; relays older than identities did not.
    public var relay: RelayIdentity?
    /// The account's latest arrival (at least `cursor`): below the caller's cursor, the relay's history
    /// went back. Always sent, as `relay`.
    public var latest: UInt64?

    public init(cursor: UInt64, more: Bool, segments: [Segment], relay: RelayIdentity?, latest: UInt64?) {
        self.cursor = cursor
        self.more = more
        self.segments = segments
        self.relay = relay
        self.latest = latest
    }
}

/// What a node has in its mailbox.
public struct NodeSummary: Sendable, Codable, Hashable {
    public var node: String
    public var segments: Int
    public var lastSequence: UInt64
    public var bytes: Int64

    public init(node: String, segments: Int, lastSequence: UInt64, bytes: Int64) {
        self.node = node
        self.segments = segments
        self.lastSequence = lastSequence
        self.bytes = bytes
    }
}

/// `GET /v1/accounts/{account}/nodes`.
public struct NodesAnswer: RelayAnswer {
    public static let schema = "NodesAnswer"
    /// The account's latest arrival.
    public var cursor: UInt64
    public var nodes: [NodeSummary]

    public init(cursor: UInt64, nodes: [NodeSummary]) {
        self.cursor = cursor
        self.nodes = nodes
    }
}

/// `GET /v1/accounts/{account}/progress`: every node's progress record.
public struct ProgressAnswer: RelayAnswer {
    public static let schema = "ProgressAnswer"

    public struct Record: Codable, Sendable {
        public var node: String
        public var size: Int
        /// The record's bytes, base64.
        public var data: String

        public init(node: String, size: Int, data: String) {
            self.node = node
            self.size = size
            self.data = data
        }
    }

    public var records: [Record]

    public init(records: [Record]) { self.records = records }
}

/// `GET /v1/accounts/{account}/baselines`: every node's baselines.
public struct BaselinesAnswer: RelayAnswer {
    public static let schema = "BaselinesAnswer"

    public struct Baseline: Codable, Sendable {
        public var node: String
        /// `COUNT-DIGEST.lsbase`.
        public var name: String
        public var size: Int64

        public init(node: String, name: String, size: Int64) {
            self.node = node
            self.name = name
            self.size = size
        }
    }

    public var baselines: [Baseline]

    public init(baselines: [Baseline]) { self.baselines = baselines }
}

/// A baseline upload's answer (`200` unchanged, `201` stored).
public struct BaselineStored: RelayAnswer {
    public static let schema = "BaselineStored"
    /// false: the same bytes were stored under this name before.
    public var stored: Bool
    public var size: Int64

    public init(stored: Bool, size: Int64) {
        self.stored = stored
        self.size = size
    }
}

/// The body of every refusal or failure: `{"code": "...", "message": "..."}`.
public struct ErrorAnswer: RelayAnswer {
    public static let schema = "Error"
    /// A ``RelayErrorCode``'s name.
    public var code: String
    /// What failed and what to do.
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}
