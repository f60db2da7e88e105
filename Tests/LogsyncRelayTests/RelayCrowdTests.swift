import Foundation
import LogsyncTestKit
import Testing

/// Neighbours that take resources without using them do not stop a legitimate node.
@Suite(.serialized) struct RelayCrowdTests {
    @Test func twoThousandIdleConnectionsDoNotStopANode() async throws {
        // Room for the connections here and in the relay (which inherits the limit), as LimitNOFILE= gives it.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 8_192 {
            limit.rlim_cur = min(8_192, limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= 4_500, "the test needs 4,500 file descriptors; the hard limit is \(limit.rlim_max)")
        let fixture = try await RelayFixture.start()
        let port = fixture.relay.port
        // 2,000 connections opened and left idle (never a byte sent), and 200 more that send half a request.
        let account = fixture.account
        let idle = try await onThread { () -> IdleConnections in
            var connections: [RawConnection] = []
            for index in 0..<2_200 {
                let connection = try RawConnection(port: port)
                if index >= 2_000 { try connection.send(Array("PUT /v1/accounts/\(account)/nodes/".utf8)) }
                connections.append(connection)
            }
            return IdleConnections(connections)
        }
        let node = SegmentFixtures.nodeID()
        let started = ContinuousClock.now
        for sequence in UInt64(1)...20 {
            let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: sequence, last: sequence)
            let answer = try await fixture.push(node: node, first: sequence, last: sequence, bytes: bytes)
            #expect(answer.status == 201, "\(answer.text)")
        }
        #expect(try await fixture.pulledSegments().count == 20)
        let elapsed = ContinuousClock.now - started
        print("20 pushes and a pull beside \(idle.connections.count) idle connections: \(elapsed)")
        #expect(elapsed < .seconds(10))
        #expect(try await rawRequest(port: port, method: "GET", path: "/v1/health").status == 200)
        withExtendedLifetime(idle) {}
    }
}

/// Connections held open and unused; closed when this goes away.
final class IdleConnections: @unchecked Sendable {
    let connections: [RawConnection]
    init(_ connections: [RawConnection]) { self.connections = connections }
}
