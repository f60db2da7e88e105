import Foundation
import LogsyncTestKit

/// Where the relay under test keeps its data: the relay's tests run against both (Swift Testing
/// arguments). The PostgreSQL backend uses one server per test process, a database per relay.
enum Backend: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    var description: String { rawValue }

    func store() async throws -> RelayStore {
        switch self {
        case .sqlite: return .sqlite
        case .postgres:
            let server = try await PostgresServer.shared()
            return .postgres(server, database: try await server.createDatabase("relay"))
        }
    }

    /// A relay (not started) on a fresh database of this backend.
    func relay(_ label: String = "r") async throws -> RelayProcess { try RelayProcess(label, store: try await store()) }
}

/// A relay process with one account and a token for it, and requests to it on fresh connections.
struct RelayFixture {
    let relay: RelayProcess
    let account: String
    let token: String

    static func start(
        _ backend: Backend = .sqlite, account: String = "acct", config: String? = nil, quotaBytes: Int? = nil, environment: [String: String] = [:]
    ) async throws -> RelayFixture {
        let relay = try await backend.relay()
        if let config { try relay.configure(config) }
        try await relay.createAccount(account, quotaBytes: quotaBytes)
        let token = try await relay.issueToken(account)
        try await relay.start(environment: environment)
        return RelayFixture(relay: relay, account: account, token: token)
    }

    func segmentPath(node: String, first: UInt64, last: UInt64, account: String? = nil) -> String {
        "/v1/accounts/\(account ?? self.account)/nodes/\(node)/segments/\(first)-\(last)"
    }

    func push(node: String, first: UInt64, last: UInt64, bytes: [UInt8], token: String? = nil, account: String? = nil) async throws -> RawResponse {
        try await rawRequest(
            port: relay.port, method: "PUT", path: segmentPath(node: node, first: first, last: last, account: account), token: token ?? self.token,
            headers: ["Content-Type": "application/octet-stream"], body: bytes)
    }

    func pull(after: UInt64 = 0, wait: Int = 0, token: String? = nil, account: String? = nil) async throws -> RawResponse {
        try await rawRequest(port: relay.port, method: "GET", path: "/v1/accounts/\(account ?? self.account)/segments?after=\(after)&wait=\(wait)", token: token ?? self.token)
    }

    /// The segments a pull returns: (node, first, last, bytes), in arrival order.
    func pulledSegments(after: UInt64 = 0) async throws -> [(node: String, first: UInt64, last: UInt64, bytes: [UInt8])] {
        let answer = try await pull(after: after)
        guard answer.status == 200, let object = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
            let segments = object["segments"] as? [[String: Any]]
        else { throw RawHTTPError.unexpected(answer) }
        return segments.map {
            (
                $0["node"] as! String, UInt64($0["first"] as! Int), UInt64($0["last"] as! Int),
                Array(Data(base64Encoded: $0["data"] as! String)!)
            )
        }
    }
}

extension RawHTTPError {
    static func unexpected(_ response: RawResponse) -> some Error {
        UnexpectedAnswer(status: response.status, body: response.text)
    }
}

struct UnexpectedAnswer: Error, CustomStringConvertible {
    let status: Int
    let body: String
    var description: String { "unexpected answer \(status): \(body)" }
}
