import Foundation
import LogsyncTestKit
import Testing

/// A real `sync-relay` process on 127.0.0.1: pushes, pulls, long-polls, durability.
@Suite(.serialized) struct RelayServerTests {
    @Test(arguments: Backend.allCases) func pushIsIdempotentAndConflictsAreRefused(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 2)
        let first = try await fixture.push(node: node, first: 1, last: 2, bytes: bytes)
        #expect(first.status == 201, "\(first.text)")
        let again = try await fixture.push(node: node, first: 1, last: 2, bytes: bytes)
        #expect(again.status == 200, "the same name and bytes again is a no-op success: \(again.text)")
        #expect(again.text.contains("\"stored\":false"))
        let other = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 2, title: "other")
        let conflict = try await fixture.push(node: node, first: 1, last: 2, bytes: other)
        #expect(conflict.status == 409 && conflict.errorCode == "conflict", "\(conflict.text)")
        let overlapping = try await fixture.push(
            node: node, first: 2, last: 3, bytes: try SegmentFixtures.segment(account: fixture.account, node: node, first: 2, last: 3))
        #expect(overlapping.status == 409, "a range overlapping a stored one is refused: \(overlapping.text)")
        let next = try await fixture.push(
            node: node, first: 3, last: 3, bytes: try SegmentFixtures.segment(account: fixture.account, node: node, first: 3, last: 3))
        #expect(next.status == 201)
        let pulled = try await fixture.pulledSegments()
        #expect(pulled.map { "\($0.first)-\($0.last)" } == ["1-2", "3-3"])
        #expect(pulled[0].bytes == bytes, "the bytes come back exactly as pushed")
        #expect(try await fixture.pulledSegments(after: 1).count == 1, "a pull after a cursor returns only later arrivals")
    }

    @Test(arguments: Backend.allCases) func pullReturnsManySegmentsPerAnswerAndPages(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend, config: "[limits]\nmax_pull_segments = 50\n")
        let node = SegmentFixtures.nodeID()
        for sequence in UInt64(1)...120 {
            let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: sequence, last: sequence)
            #expect(try await fixture.push(node: node, first: sequence, last: sequence, bytes: bytes).status == 201)
        }
        var cursor: UInt64 = 0
        var pages = 0
        var received = 0
        while true {
            let answer = try await fixture.pull(after: cursor)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
            let segments = try #require(object["segments"] as? [[String: Any]])
            received += segments.count
            pages += 1
            cursor = UInt64(try #require(object["cursor"] as? Int))
            if !(object["more"] as? Bool ?? false) { break }
        }
        #expect(received == 120)
        #expect(pages == 3, "120 segments at 50 per answer: 3 pages")
    }

    @Test(arguments: Backend.allCases) func longPollWakesOnPush(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        let port = fixture.relay.port
        let path = "/v1/accounts/\(fixture.account)/segments?after=0&wait=30"
        let token = fixture.token
        let started = ContinuousClock.now
        let waiting = Task.detached { try await rawRequest(port: port, method: "GET", path: path, token: token) }
        // The poll is waiting once /metrics counts it.
        try await eventually(within: .seconds(30), "the long-poll is registered") {
            (try? await rawRequest(port: port, method: "GET", path: "/metrics"))?.text.contains("relay_waiting_polls 1") == true
        }
        let pushed = ContinuousClock.now
        let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)
        #expect(try await fixture.push(node: node, first: 1, last: 1, bytes: bytes).status == 201)
        let answer = try await waiting.value
        let heard = ContinuousClock.now
        #expect(answer.status == 200)
        #expect(answer.text.contains(node), "the long-poll answers with the pushed segment")
        // Woken by the push, not at its 30 s deadline (a loaded machine may take a few seconds to answer).
        #expect(heard - pushed < .seconds(15), "the long-poll answered \(heard - pushed) after the push, not at its 30 s deadline")
        // A long-poll with nothing to hear ends at its deadline with an empty page.
        let idle = try await rawRequest(port: port, method: "GET", path: "/v1/accounts/\(fixture.account)/segments?after=1&wait=1", token: token)
        #expect(idle.status == 200 && idle.text.contains("\"segments\":[]"))
    }

    @Test(arguments: Backend.allCases) func acknowledgedPushesSurviveKill9(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        for sequence in UInt64(1)...40 {
            let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: sequence, last: sequence)
            #expect(try await fixture.push(node: node, first: sequence, last: sequence, bytes: bytes).status == 201)
        }
        try await fixture.relay.kill9()
        try await fixture.relay.start()
        let pulled = try await fixture.pulledSegments()
        #expect(pulled.count == 40, "every acknowledged push is there after SIGKILL")
        #expect(pulled.map(\.first) == Array(1...40))
    }

    @Test(arguments: Backend.allCases) func healthReadinessAndMetrics(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let port = fixture.relay.port
        let health = try await rawRequest(port: port, method: "GET", path: "/v1/health")
        #expect(health.status == 200 && health.text.contains("ok"))
        let ready = try await rawRequest(port: port, method: "GET", path: "/v1/ready")
        #expect(ready.status == 200 && ready.text.contains("ready"))
        let metrics = try await rawRequest(port: port, method: "GET", path: "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("# TYPE relay_requests_total counter"))
        #expect(metrics.text.contains("relay_waiting_polls 0"))
        let missing = try await rawRequest(port: port, method: "GET", path: "/v2/nothing")
        #expect(missing.status == 404 && missing.errorCode == "not_found", "unknown routes answer JSON too: \(missing.text)")
        // A push on its plain path is matched before the router (PushRoute); with a trailing slash, by the
        // router: the same answer, counted under the same route.
        let node = SegmentFixtures.nodeID()
        #expect(try await fixture.push(node: node, first: 1, last: 1, bytes: try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)).status == 201)
        let routed = try await rawRequest(
            port: port, method: "PUT", path: fixture.segmentPath(node: node, first: 2, last: 2) + "/", token: fixture.token,
            body: try SegmentFixtures.segment(account: fixture.account, node: node, first: 2, last: 2))
        #expect(routed.status == 201 && routed.text == #"{"arrival":2,"stored":true}"#, "\(routed.text)")
        let counted = try await rawRequest(port: port, method: "GET", path: "/metrics")
        #expect(counted.text.contains(#"relay_requests_total{route="/v1/accounts/{account}/nodes/{node}/segments/{range}",status="201"} 2"#), "\(counted.text)")
    }

    @Test(arguments: Backend.allCases) func sigtermStopsPromptly(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let started = ContinuousClock.now
        let status = try await fixture.relay.stop()
        #expect(status == 0)
        #expect(ContinuousClock.now - started < .seconds(30), "a stop that hangs")
    }
}
