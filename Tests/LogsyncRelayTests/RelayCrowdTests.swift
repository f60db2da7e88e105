import Foundation
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// Neighbours that take resources without using them do not stop a legitimate node.
@Suite(.serialized) struct RelayCrowdTests {
    @Test func twoThousandIdleConnectionsDoNotStopANode() async throws {
        // Room for the connections here and in the relay (which inherits the limit), as LimitNOFILE= gives it.
        let limit = DescriptorLimit.raise(to: 8_192)
        try #require(limit >= 4_500, "the test needs 4,500 file descriptors; the soft limit is \(limit)")
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
        // Idle connections that held the event loops up would stall these for ever; the bound leaves room
        // for a loaded machine.
        #expect(elapsed < .seconds(60))
        #expect(try await rawRequest(port: port, method: "GET", path: "/v1/health").status == 200)
        withExtendedLifetime(idle) {}
    }

    @Test func connectionsPastTheLimitAreToldToComeBack() async throws {
        let fixture = try await RelayFixture.start(config: "[limits]\nmax_connections = 8\n")
        let port = fixture.relay.port
        var idle: IdleConnections? = try await onThread { IdleConnections(try (0..<8).map { _ in try RawConnection(port: port) }) }
        let refused = try await rawRequest(port: port, method: "GET", path: "/v1/health")
        #expect(refused.status == 503, "\(refused.status) \(refused.text)")
        #expect(refused.headers["retry-after"] == "1" && refused.errorCode == "busy", "\(refused.headers) \(refused.text)")
        #expect(refused.text.contains("max_connections"), "\(refused.text)")
        #expect(idle?.connections.count == 8)
        idle = nil
        // Once the idle ones are gone, connections are served again.
        try await eventually(within: .seconds(30), every: .milliseconds(50), "the relay serves again once the idle connections close") {
            try await rawRequest(port: port, method: "GET", path: "/v1/health").status == 200
        }
        let metrics = try await rawRequest(port: port, method: "GET", path: "/metrics")
        #expect(metrics.text.contains("relay_connections_refused_total 1") || metrics.text.contains("relay_connections_refused_total 2"), "\(metrics.text)")
    }
}

/// Connections held open and unused; closed when this goes away.
final class IdleConnections: @unchecked Sendable {
    let connections: [RawConnection]
    init(_ connections: [RawConnection]) { self.connections = connections }
}

/// A flood of large, slow uploads: the relay's memory stays bounded, and what is over the budget is
/// refused at once with 503 and Retry-After rather than buffered.
@Suite(.serialized) struct RelayFloodTests {
    static func residentKilobytes(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    @Test func slowLargeBodiesAreBoundedByTheBudget() async throws {
        let fixture = try await RelayFixture.start(
            config: "[limits]\nmax_segment_bytes = 1000000\nmax_buffered_bytes = 3000000\nrequest_timeout_s = 3\n")
        let pid = try #require(fixture.relay.process).process.processIdentifier
        let before = try Self.residentKilobytes(pid)
        let node = SegmentFixtures.nodeID()
        let (port, path, token) = (fixture.relay.port, fixture.segmentPath(node: node, first: 1, last: 1), fixture.token)
        // 40 uploads that announce 1 MB each and send 64 KiB of it, then stall.
        let answers = try await onThread { () -> [Int] in
            var connections: [RawConnection] = []
            for _ in 0..<40 {
                let connection = try RawConnection(port: port, timeout: .seconds(15))
                try connection.send(Array("PUT \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: 1000000\r\n\r\n".utf8) + [UInt8](repeating: 7, count: 65_536))
                connections.append(connection)
            }
            return try connections.map { try $0.response().status }
        }
        let refused = answers.filter { $0 == 503 }.count
        let timedOut = answers.filter { $0 == 408 }.count
        print("40 stalled 1 MB uploads: \(timedOut) held until the request timeout (408), \(refused) refused at once (503)")
        #expect(timedOut <= 3, "at most max_buffered_bytes / Content-Length uploads are held: \(answers)")
        #expect(refused >= 37)
        let after = try Self.residentKilobytes(pid)
        print("relay RSS \(before) kB before, \(after) kB after")
        #expect(after - before < 64_000, "memory grew by \(after - before) kB")
        // Afterwards a node pushes as usual.
        let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)
        #expect(try await fixture.push(node: node, first: 1, last: 1, bytes: bytes).status == 201)
    }
}
