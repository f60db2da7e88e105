import Foundation
import LogsyncCore
import LogsyncRelayTransport
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Bounded growth through a real `sync-relay` process: progress records, baselines, and pruning of a
/// node's own segments, through `RelayTransport` and raw requests.
@Suite(.serialized) struct RelayRetentionTests {
    static func transport(_ fixture: RelayFixture, node: String, token: String? = nil) -> RelayTransport {
        RelayTransport(settings: RelayClientSettings(url: fixture.relay.url, account: fixture.account, token: token ?? fixture.token), node: NodeID(node))
    }

    static func record(account: String, node: String, applied: [String: UInt64] = [:], active: UInt64 = 1_700_000_000_000) -> [UInt8] {
        let frontier = Frontier(Dictionary(uniqueKeysWithValues: applied.map { (NodeID($0.key), $0.value) }))
        return ProgressRecord(account: account, node: NodeID(node), applied: frontier, prunedThrough: 0, activeAtMilliseconds: active).encoded()
    }

    /// Bytes that do not compress, standing in for a baseline (the relay never interprets one).
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            for offset in stride(from: 0, to: count, by: 8) {
                withUnsafeBytes(of: generator.next() as UInt64) { word in
                    buffer.baseAddress!.advanced(by: offset).copyMemory(from: word.baseAddress!, byteCount: min(8, count - offset))
                }
            }
        }
        return bytes
    }

    static func baselineName(_ node: String, _ count: UInt64) -> BaselineName {
        BaselineName(node: NodeID(node), frontier: Frontier([NodeID(node): count]))
    }

    /// Hands `bytes` out in chunks of `size`, as a baseline encoder does.
    static func chunks(_ bytes: [UInt8], _ size: Int = 100_000) -> () throws -> [UInt8]? {
        var offset = 0
        return {
            guard offset < bytes.count else { return nil }
            defer { offset += size }
            return Array(bytes[offset..<min(bytes.count, offset + size)])
        }
    }

    static func path(_ fixture: RelayFixture, _ rest: String, account: String? = nil) -> String {
        "/v1/accounts/\(account ?? fixture.account)/\(rest)"
    }

    /// The bytes the account holds, as `sync-relay account list` tells.
    static func usedBytes(_ fixture: RelayFixture) async throws -> Int {
        let list = try await fixture.relay.admin(["account", "list", "--json"])
        let accounts = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        return try #require(accounts.first { $0["name"] as? String == fixture.account }?["usedBytes"] as? Int)
    }

    @Test(arguments: Backend.allCases) func progressRecordsAndBaselinesRoundTripThroughTheTransport(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let (a, b) = (SegmentFixtures.nodeID(), SegmentFixtures.nodeID())
        let ta = Self.transport(fixture, node: a, token: try await fixture.relay.issueToken(fixture.account, node: a))
        let tb = Self.transport(fixture, node: b, token: try await fixture.relay.issueToken(fixture.account, node: b))
        let account = fixture.account
        let recordA = Self.record(account: account, node: a, applied: [a: 5, b: 2])
        let recordB = Self.record(account: account, node: b, applied: [a: 5, b: 9], active: 1_800_000_000_000)
        try await onThread {
            try ta.publishProgress(recordA)
            try tb.publishProgress(Self.record(account: account, node: b, applied: [b: 1]))
            try tb.publishProgress(recordB)
        }
        let records = try await onThread { try ta.progressRecords() }
        #expect(records == [NodeID(a): recordA, NodeID(b): recordB], "every node's latest record, the reader's own included")
        #expect(try ProgressRecord(decoding: try #require(records[NodeID(b)])).activeAtMilliseconds == 1_800_000_000_000)

        // A baseline of 3.5 MiB, published in chunks and read back in chunks.
        let bytes = Self.bytes(3_500_000)
        let name = Self.baselineName(a, 14)
        try await onThread { try ta.publishBaseline(name, chunks: Self.chunks(bytes)) }
        #expect(try await onThread { try tb.baselines() } == [name])
        let received = try await onThread { () -> [[UInt8]] in
            var chunks: [[UInt8]] = []
            try tb.readBaseline(name, maximumBytes: 8 << 20) { chunks.append($0) }
            return chunks
        }
        #expect(received.flatMap { $0 } == bytes, "the bytes come back exactly as published")
        #expect(received.count == 4 && received.dropLast().allSatisfy { $0.count == 1 << 20 }, "read in chunks of 1 MiB: \(received.map(\.count))")
        let capped = await #expect(throws: TransportError.self) { try await onThread { try tb.readBaseline(name, maximumBytes: 1 << 20) { _ in } } }
        #expect(capped?.code == .tooLarge, "\(String(describing: capped))")

        // The same name again: success without a change; other bytes under it: conflict, same size or not.
        try await onThread { try ta.publishBaseline(name, chunks: Self.chunks(bytes)) }
        let metrics = try await rawRequest(port: fixture.relay.port, method: "GET", path: "/metrics")
        #expect(metrics.text.contains("relay_baselines_total{outcome=\"duplicate\"} 1"), "\(metrics.text)")
        for other in [Self.bytes(bytes.count), Self.bytes(1_000)] {
            let conflict = await #expect(throws: TransportError.self) { try await onThread { try ta.publishBaseline(name, chunks: Self.chunks(other)) } }
            #expect(conflict?.code == .conflict, "\(String(describing: conflict))")
        }
        // A node publishes and deletes only its own baselines.
        let foreign = await #expect(throws: TransportError.self) { try await onThread { try tb.publishBaseline(name, chunks: Self.chunks(bytes)) } }
        #expect(foreign?.code == .forbidden)
        await #expect(throws: TransportError.self) { try await onThread { try tb.remove(name) } }

        try await onThread { try ta.remove(name) }
        #expect(try await onThread { try tb.baselines() }.isEmpty)
        try await onThread { try ta.remove(name) }  // gone already: success
        let gone = await #expect(throws: TransportError.self) { try await onThread { try tb.readBaseline(name, maximumBytes: 8 << 20) { _ in } } }
        #expect(gone?.code == .notFound)
    }

    @Test(arguments: Backend.allCases) func nodeTokensWriteOnlyAsTheirNodeAndAccountsStayApart(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let port = fixture.relay.port
        let (a, b) = (SegmentFixtures.nodeID(), SegmentFixtures.nodeID())
        let boundA = try await fixture.relay.issueToken(fixture.account, node: a)
        try await fixture.relay.createAccount("other")
        let otherToken = try await fixture.relay.issueToken("other")
        // The account's own token may write as any node of the account.
        let segment = try SegmentFixtures.segment(account: fixture.account, node: b, first: 1, last: 1)
        #expect(try await fixture.push(node: b, first: 1, last: 1, bytes: segment).status == 201)
        let progressB = Self.record(account: fixture.account, node: b)
        let put = try await rawRequest(port: port, method: "PUT", path: Self.path(fixture, "nodes/\(b)/progress"), token: fixture.token, body: progressB)
        #expect(put.status == 204, "\(put.text)")
        let baselineB = Self.path(fixture, "nodes/\(b)/baselines/\(Self.baselineName(b, 1).fileName)")
        #expect(try await rawRequest(port: port, method: "PUT", path: baselineB, token: fixture.token, body: Self.bytes(5_000)).status == 201)

        // A token bound to node a writes and deletes nothing of node b's.
        let attempts: [(String, String, [UInt8]?)] = [
            ("PUT", Self.path(fixture, "nodes/\(b)/progress"), progressB),
            ("PUT", Self.path(fixture, "nodes/\(b)/baselines/\(Self.baselineName(b, 2).fileName)"), Self.bytes(100)),
            ("DELETE", baselineB, nil),
            ("DELETE", fixture.segmentPath(node: b, first: 1, last: 1), nil),
        ]
        for (method, path, body) in attempts {
            let answer = try await rawRequest(port: port, method: method, path: path, token: boundA, body: body)
            #expect(answer.status == 403 && answer.errorCode == "forbidden", "\(method) \(path) with a token bound to another node: \(answer.text)")
        }
        #expect(try await fixture.pulledSegments().count == 1, "b's segment is still there")
        #expect(try await rawRequest(port: port, method: "GET", path: baselineB, token: boundA).status == 200, "b's baseline is still there (and readable by a)")
        let own = try await rawRequest(
            port: port, method: "PUT", path: Self.path(fixture, "nodes/\(a)/progress"), token: boundA, body: Self.record(account: fixture.account, node: a))
        #expect(own.status == 204, "a token writes as its own node: \(own.text)")

        // Another account's token reads and deletes nothing here, and sees nothing of this account in its own.
        for (method, path) in [
            ("GET", Self.path(fixture, "progress")), ("GET", Self.path(fixture, "baselines")), ("GET", baselineB), ("DELETE", baselineB),
            ("DELETE", fixture.segmentPath(node: b, first: 1, last: 1)), ("PUT", Self.path(fixture, "nodes/\(b)/progress")),
        ] {
            let answer = try await rawRequest(port: port, method: method, path: path, token: otherToken, body: method == "PUT" ? progressB : nil)
            #expect(answer.status == 403, "\(method) \(path) with another account's token: \(answer.text)")
        }
        let otherProgress = try await rawRequest(port: port, method: "GET", path: Self.path(fixture, "progress", account: "other"), token: otherToken)
        #expect(otherProgress.status == 200 && otherProgress.text == "{\"records\":[]}", "\(otherProgress.text)")
        let otherBaselines = try await rawRequest(port: port, method: "GET", path: Self.path(fixture, "baselines", account: "other"), token: otherToken)
        #expect(otherBaselines.status == 200 && otherBaselines.text == "{\"baselines\":[]}", "\(otherBaselines.text)")
        let ours = try await rawRequest(port: port, method: "GET", path: Self.path(fixture, "progress"), token: fixture.token)
        #expect(ours.text.contains(a) && ours.text.contains(b))
        for token in [fixture.token, boundA, otherToken] {
            #expect(!fixture.relay.log.contains(String(token.split(separator: "_", maxSplits: 2).last!)), "no secret in the relay's log")
        }
    }

    @Test(arguments: Backend.allCases) func deletedSegmentsLeavePullCursorsIntact(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        for sequence in UInt64(1)...3 {
            let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: sequence, last: sequence)
            #expect(try await fixture.push(node: node, first: sequence, last: sequence, bytes: bytes).status == 201)
        }
        // A puller that has seen everything, and one that has seen only the first (their answers cached).
        #expect(try await fixture.pulledSegments().map(\.first) == [1, 2, 3])
        #expect(try await fixture.pulledSegments(after: 1).map(\.first) == [2, 3])
        let before = try await Self.usedBytes(fixture)
        let deleted = try await rawRequest(port: fixture.relay.port, method: "DELETE", path: fixture.segmentPath(node: node, first: 2, last: 2), token: fixture.token)
        #expect(deleted.status == 204, "\(deleted.text)")
        #expect(try await Self.usedBytes(fixture) < before, "deleting frees the account's quota")
        let again = try await rawRequest(port: fixture.relay.port, method: "DELETE", path: fixture.segmentPath(node: node, first: 2, last: 2), token: fixture.token)
        #expect(again.status == 204, "deleting what is gone succeeds")
        let fetch = try await rawRequest(port: fixture.relay.port, method: "GET", path: fixture.segmentPath(node: node, first: 2, last: 2), token: fixture.token)
        #expect(fetch.status == 404)
        #expect(try await fixture.pulledSegments().map(\.first) == [1, 3], "a new puller does not see the deleted segment")
        #expect(try await fixture.pulledSegments(after: 1).map(\.first) == [3], "a puller before it skips it")
        #expect(try await fixture.pulledSegments(after: 3).isEmpty, "a puller past it notices nothing")
        let fourth = try SegmentFixtures.segment(account: fixture.account, node: node, first: 4, last: 4)
        let pushed = try await fixture.push(node: node, first: 4, last: 4, bytes: fourth)
        #expect(pushed.status == 201 && pushed.text.contains("\"arrival\":4"), "arrivals are never reused: \(pushed.text)")
        #expect(try await fixture.pulledSegments(after: 3).map(\.first) == [4], "the cursor of a puller past it still works")

        // Through the transport: the node prunes its own segment; it leaves its index, and others' views.
        let own = Self.transport(fixture, node: node, token: try await fixture.relay.issueToken(fixture.account, node: node))
        let reader = Self.transport(fixture, node: SegmentFixtures.nodeID())
        let segments = try await onThread { () -> [UInt64] in
            _ = try own.refresh(excluding: NodeID(SegmentFixtures.nodeID()))
            try own.remove(SegmentName(node: NodeID(node), firstSequence: 1, lastSequence: 1))
            try own.remove(SegmentName(node: NodeID(node), firstSequence: 1, lastSequence: 1))
            return own.segments(of: NodeID(node), after: 0).map(\.firstSequence)
        }
        #expect(segments == [3, 4])
        let fresh = try await onThread { () -> [UInt64] in
            _ = try reader.refresh(excluding: reader.node)
            return reader.segments(of: NodeID(node), after: 0).map(\.firstSequence)
        }
        #expect(fresh == [3, 4], "a node that joins later sees only what is kept")
        let foreign = await #expect(throws: TransportError.self) {
            try await onThread { try reader.remove(SegmentName(node: NodeID(node), firstSequence: 3, lastSequence: 3)) }
        }
        #expect(foreign?.code == .forbidden, "a node never deletes another node's segment")
    }

    @Test(arguments: Backend.allCases) func limitsAndQuotaAreNamedInRefusals(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend, config: "[limits]\nmax_baseline_bytes = 300000\n", quotaBytes: 1_000_000)
        let port = fixture.relay.port
        let node = SegmentFixtures.nodeID()
        let transport = Self.transport(fixture, node: node)
        // Over max_baseline_bytes: 413, before the body is read.
        let large = await #expect(throws: TransportError.self) {
            try await onThread { try transport.publishBaseline(Self.baselineName(node, 1), chunks: Self.chunks(Self.bytes(300_001))) }
        }
        #expect(large?.code == .tooLarge && large?.message.contains("max_baseline_bytes") == true, "\(String(describing: large))")
        let baselinePath = Self.path(fixture, "nodes/\(node)/baselines/\(Self.baselineName(node, 1).fileName)")
        let announced = try await rawRequest(
            port: port, method: "PUT", path: baselinePath, token: fixture.token, headers: ["Content-Length": "300001"], body: Self.bytes(10))
        #expect(announced.status == 413 && announced.errorCode == "baseline_too_large" && announced.text.contains("max_baseline_bytes"), "\(announced.text)")
        // Progress records: at most 1 MiB, intact, and naming the route's account and node.
        let progressPath = Self.path(fixture, "nodes/\(node)/progress")
        let huge = try await rawRequest(
            port: port, method: "PUT", path: progressPath, token: fixture.token, headers: ["Content-Length": "\((1 << 20) + 1)"], body: Self.bytes(10))
        #expect(huge.status == 413 && huge.errorCode == "progress_too_large" && huge.text.contains("1 MiB"), "\(huge.text)")
        let garbage = try await rawRequest(port: port, method: "PUT", path: progressPath, token: fixture.token, body: Self.bytes(100))
        #expect(garbage.status == 400 && garbage.errorCode == "malformed_progress", "\(garbage.text)")
        let misnamed = try await rawRequest(
            port: port, method: "PUT", path: progressPath, token: fixture.token, body: Self.record(account: fixture.account, node: SegmentFixtures.nodeID()))
        #expect(misnamed.status == 400 && misnamed.errorCode == "header_mismatch", "\(misnamed.text)")
        let empty = try await rawRequest(port: port, method: "PUT", path: baselinePath, token: fixture.token, body: [])
        #expect(empty.status == 400, "\(empty.text)")

        // The quota counts baselines: three of 280,000 bytes fit in 1,000,000, a fourth does not.
        for count in UInt64(1)...3 {
            try await onThread { try transport.publishBaseline(Self.baselineName(node, count), chunks: Self.chunks(Self.bytes(280_000))) }
        }
        let over = await #expect(throws: TransportError.self) {
            try await onThread { try transport.publishBaseline(Self.baselineName(node, 4), chunks: Self.chunks(Self.bytes(280_000))) }
        }
        #expect(over?.code == .quotaExceeded && over?.message.contains("quota") == true, "\(String(describing: over))")
        let raw = try await rawRequest(
            port: port, method: "PUT", path: Self.path(fixture, "nodes/\(node)/baselines/\(Self.baselineName(node, 4).fileName)"), token: fixture.token,
            body: Self.bytes(280_000))
        #expect(raw.status == 507 && raw.errorCode == "quota_exceeded" && raw.text.contains("quota_bytes"), "\(raw.text)")
        #expect(try await Self.usedBytes(fixture) == 840_000, "three baselines, nothing of the refused ones")
        // Deleting frees the quota: the fourth fits then.
        try await onThread { try transport.remove(Self.baselineName(node, 1)) }
        #expect(try await Self.usedBytes(fixture) == 560_000)
        try await onThread { try transport.publishBaseline(Self.baselineName(node, 4), chunks: Self.chunks(Self.bytes(280_000))) }
        #expect(try await onThread { try transport.baselines() }.map(\.transactionCount) == [2, 3, 4])
        try await onThread { try transport.publishProgress(Self.record(account: fixture.account, node: node)) }
        #expect(try await Self.usedBytes(fixture) > 840_000, "progress records count too")
    }

    @Test(arguments: Backend.allCases) func hostileNamesAreRefused(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        let port = fixture.relay.port
        let good = Self.baselineName(node, 1).fileName
        for bad in [
            "..", "%2e%2e", "a%00b", "1-1.lsbase", good.uppercased(), String(good.dropFirst()), good.replacingOccurrences(of: ".lsbase", with: ".tmp"),
            good + "x", "%2F" + good, ".." + good,
        ] {
            for method in ["GET", "PUT", "DELETE"] {
                let answer = try await rawRequest(
                    port: port, method: method, path: Self.path(fixture, "nodes/\(node)/baselines/\(bad)"), token: fixture.token,
                    body: method == "PUT" ? Self.bytes(10) : nil)
                #expect(answer.status == 400 && answer.errorCode == "bad_request", "\(method) baseline \(bad): \(answer.status) \(answer.text)")
            }
        }
        for path in [Self.path(fixture, "nodes/../progress"), Self.path(fixture, "nodes/\(node.uppercased())/progress")] {
            let answer = try await rawRequest(port: port, method: "PUT", path: path, token: fixture.token, body: Self.bytes(10))
            #expect(answer.status == 400, "\(path): \(answer.text)")
        }
        for range in ["0-1", "2-1", "01-2", "a-b"] {
            let answer = try await rawRequest(port: port, method: "DELETE", path: Self.path(fixture, "nodes/\(node)/segments/\(range)"), token: fixture.token)
            #expect(answer.status == 400, "DELETE segment \(range): \(answer.text)")
        }
        let none = try await rawRequest(port: port, method: "GET", path: Self.path(fixture, "baselines"))
        #expect(none.status == 401, "no token, no listing")
    }

    @Test(arguments: Backend.allCases) func baselinesSurviveKill9AndCutUploadsLeaveNothing(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend, config: "[limits]\nrequest_timeout_s = 2\n")
        let node = SegmentFixtures.nodeID()
        let transport = Self.transport(fixture, node: node)
        let bytes = Self.bytes(2_500_000)
        try await onThread { try transport.publishBaseline(Self.baselineName(node, 7), chunks: Self.chunks(bytes)) }
        // An upload cut short, past its first stored chunk: it never becomes a baseline.
        let port = fixture.relay.port
        let cutPath = Self.path(fixture, "nodes/\(node)/baselines/\(Self.baselineName(node, 8).fileName)")
        let token = fixture.token
        let cut = try await onThread { () -> RawResponse in
            let connection = try RawConnection(port: port)
            try connection.send(Array("PUT \(cutPath) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: 3000000\r\n\r\n".utf8) + Self.bytes(1_500_000))
            return try connection.response()
        }
        #expect(cut.status == 408, "a stalled upload is cut at request_timeout_s: \(cut.text)")
        #expect(try await onThread { try transport.baselines() }.map(\.transactionCount) == [7])
        let used = try await Self.usedBytes(fixture)
        #expect(used == bytes.count, "only the stored baseline counts")

        try await fixture.relay.kill9()
        try await fixture.relay.start()
        let restarted = Self.transport(fixture, node: node)
        let read = try await onThread { () -> [UInt8] in
            var all: [UInt8] = []
            try restarted.readBaseline(Self.baselineName(node, 7), maximumBytes: 4 << 20) { all += $0 }
            return all
        }
        #expect(read == bytes, "an acknowledged baseline survives SIGKILL")
        try await onThread { try restarted.publishBaseline(Self.baselineName(node, 8), chunks: Self.chunks(Self.bytes(1_000))) }
        #expect(try await onThread { try restarted.baselines() }.map(\.transactionCount) == [7, 8])
    }
}
