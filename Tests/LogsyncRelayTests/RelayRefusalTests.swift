import Foundation
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// Every refusal of the relay, each with its status and code, and nothing stored.
@Suite(.serialized) struct RelayRefusalTests {
    /// After the refusals: the account holds only what was accepted.
    func expectStored(_ fixture: RelayFixture, _ expected: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let stored = try await fixture.pulledSegments().map { "\($0.node)/\($0.first)-\($0.last)" }
        #expect(stored == expected, "nothing refused was stored", sourceLocation: sourceLocation)
    }

    @Test(arguments: Backend.allCases) func credentialsAreChecked(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        try await fixture.relay.createAccount("other")
        let otherToken = try await fixture.relay.issueToken("other")
        let node = SegmentFixtures.nodeID()
        let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)
        let port = fixture.relay.port
        let path = fixture.segmentPath(node: node, first: 1, last: 1)

        let none = try await rawRequest(port: port, method: "PUT", path: path, body: bytes)
        #expect(none.status == 401 && none.errorCode == "unauthorized", "no token: \(none.text)")
        #expect(none.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        let wrong = try await fixture.push(node: node, first: 1, last: 1, bytes: bytes, token: "lsr1_000000000000_" + String(repeating: "A", count: 43))
        #expect(wrong.status == 401, "a wrong token: \(wrong.text)")
        let garbage = try await fixture.push(node: node, first: 1, last: 1, bytes: bytes, token: "not a token")
        #expect(garbage.status == 401)
        let otherAccount = try await fixture.push(node: node, first: 1, last: 1, bytes: bytes, token: otherToken)
        #expect(otherAccount.status == 403 && otherAccount.errorCode == "forbidden", "another account's token: \(otherAccount.text)")
        let otherPull = try await fixture.pull(token: otherToken)
        #expect(otherPull.status == 403, "another account's token reads nothing")
        // The same answer whether the account exists or not: a token learns nothing about other accounts.
        let absent = try await fixture.pull(token: otherToken, account: "no-such-account")
        #expect(absent.status == 403 && absent.text == otherPull.text)

        // A token bound to a node pushes only as that node.
        let boundNode = SegmentFixtures.nodeID()
        let bound = try await fixture.relay.issueToken(fixture.account, node: boundNode)
        let asOther = try await fixture.push(node: node, first: 1, last: 1, bytes: bytes, token: bound)
        #expect(asOther.status == 403, "a token bound to another node: \(asOther.text)")
        let own = try SegmentFixtures.segment(account: fixture.account, node: boundNode, first: 1, last: 1)
        #expect(try await fixture.push(node: boundNode, first: 1, last: 1, bytes: own, token: bound).status == 201)

        // Revoked: refused from the next request on.
        let list = try await fixture.relay.admin(["token", "list", "--json"])
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let boundID = try #require(tokens.first { $0["node"] as? String == boundNode }?["id"] as? String)
        #expect(!list.stdout.contains(String(bound.split(separator: "_", maxSplits: 2).last!)), "token list shows no secret")
        let revoke = try await fixture.relay.admin(["token", "revoke", boundID])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let second = try SegmentFixtures.segment(account: fixture.account, node: boundNode, first: 2, last: 2)
        switch backend {
        case .sqlite:
            let revoked = try await fixture.push(node: boundNode, first: 2, last: 2, bytes: second, token: bound)
            #expect(revoked.status == 401, "a revoked token: \(revoked.text)")
        case .postgres:
            // Every relay on the database hears of the revocation by a notification sent after its commit
            // (or, should it be lost, at its next re-check): refused from then on, never stored meanwhile
            // (the range 2-2 is not pushed until refused).
            try await eventually(within: .seconds(30), "a revoked token is refused") {
                try await fixture.pull(token: bound).status == 401
            }
            let revoked = try await fixture.push(node: boundNode, first: 2, last: 2, bytes: second, token: bound)
            #expect(revoked.status == 401, "a revoked token: \(revoked.text)")
        }

        try await expectStored(fixture, ["\(boundNode)/1-1"])
        // No secret in the relay's log or database in clear.
        let secret = String(fixture.token.split(separator: "_", maxSplits: 2).last!)
        try await fixture.relay.awaitLog("[notice]: refused PUT")
        #expect(!fixture.relay.log.contains(secret))
        let database: Data
        if case .postgres(let server, let name) = fixture.relay.store {
            database = Data(try await server.dump(database: name).utf8)
            #expect(database.range(of: Data("CREATE TABLE public.tokens".utf8)) != nil, "the dump holds the tokens table")
        } else {
            database = try Data(contentsOf: URL(fileURLWithPath: fixture.relay.database))
        }
        #expect(database.range(of: Data(secret.utf8)) == nil, "tokens are stored hashed")
    }

    /// A revocation or an account deletion made through a symbolic link to the database reaches the
    /// running relay at its next request: every command resolves the path, so the credentials marker it
    /// touches is the one beside the real file, which the relay watches.
    @Test func revocationThroughALinkReachesTheRunningRelay() async throws {
        let fixture = try await RelayFixture.start()
        try await fixture.relay.createAccount("other")
        let otherToken = try await fixture.relay.issueToken("other")
        // The relay found both tokens valid, and remembers them.
        #expect(try await fixture.pull().status == 200)
        #expect(try await fixture.pull(token: otherToken, account: "other").status == 200)
        let elsewhere = try TemporaryDirectory("relaylink")
        let link = elsewhere.file("linked.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: fixture.relay.database)
        let relay = Products.path("sync-relay")

        let revoke = try await Subprocess.run(relay, ["token", "revoke", String(fixture.token.split(separator: "_")[1]), "--database", link])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let refused = try await fixture.pull()
        #expect(refused.status == 401, "the running relay refuses the token revoked through the link: \(refused.text)")

        let delete = try await Subprocess.run(relay, ["account", "delete", "other", "--database", link])
        #expect(delete.status == 0, "\(delete.stderr)")
        let gone = try await fixture.pull(token: otherToken, account: "other")
        #expect(gone.status == 401, "the running relay refuses the token of the account deleted through the link: \(gone.text)")
        #expect(!DurableFiles.exists(link + "-credentials"), "no marker beside the link: the relay would never look there")
    }

    @Test(arguments: Backend.allCases) func sizeQuotaAndBodiesAreChecked(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend, config: "[limits]\nmax_segment_bytes = 2000\n", quotaBytes: 3_000)
        let node = SegmentFixtures.nodeID()
        // Oversized: a segment of many transactions is over 2,000 bytes.
        let large = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 20, noise: 200)
        #expect(large.count > 2_000)
        let tooLarge = try await fixture.push(node: node, first: 1, last: 20, bytes: large)
        #expect(tooLarge.status == 413 && tooLarge.errorCode == "segment_too_large", "\(tooLarge.text)")
        #expect(tooLarge.text.contains("max_segment_bytes"), "the message names the limit")

        // Malformed bodies: not a segment, a damaged one, a body shorter than announced.
        let small = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)
        let notSegment = try await fixture.push(node: node, first: 1, last: 1, bytes: Array("hello".utf8))
        #expect(notSegment.status == 400 && notSegment.errorCode == "malformed_segment", "\(notSegment.text)")
        var damaged = small
        damaged[damaged.count / 2] ^= 0xff
        let corrupt = try await fixture.push(node: node, first: 1, last: 1, bytes: damaged)
        #expect(corrupt.status == 400 && corrupt.errorCode == "malformed_segment", "\(corrupt.text)")

        // Headers that disagree with the route: account, node, range.
        let otherAccount = try SegmentFixtures.segment(account: "elsewhere", node: node, first: 1, last: 1)
        let otherNode = try SegmentFixtures.segment(account: fixture.account, node: SegmentFixtures.nodeID(), first: 1, last: 1)
        for (label, bytes, first, last) in [("account", otherAccount, UInt64(1), UInt64(1)), ("node", otherNode, 1, 1), ("range", small, 1, 2)] {
            let answer = try await fixture.push(node: node, first: first, last: last, bytes: bytes)
            #expect(answer.status == 400 && answer.errorCode == "header_mismatch", "a header with another \(label): \(answer.text)")
        }

        // Quota: 3,000 bytes; segments of ~1,000 bytes fit twice or so, then 507.
        var sequence: UInt64 = 0
        var stored: [String] = []
        var last: RawResponse?
        while sequence < 20 {
            sequence += 1
            let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: sequence, last: sequence, noise: 900)
            last = try await fixture.push(node: node, first: sequence, last: sequence, bytes: bytes)
            if last?.status == 201 { stored.append("\(node)/\(sequence)-\(sequence)") } else { break }
        }
        let refused = try #require(last)
        #expect(refused.status == 507 && refused.errorCode == "quota_exceeded", "over quota: \(refused.text)")
        #expect(refused.text.contains("quota"))
        try await expectStored(fixture, stored)
        #expect(!stored.isEmpty)
    }

    @Test(arguments: Backend.allCases) func hostileIdsAreRefused(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend)
        let node = SegmentFixtures.nodeID()
        let bytes = try SegmentFixtures.segment(account: fixture.account, node: node, first: 1, last: 1)
        let hostile = ["..", "%2e%2e", "a%00b", "%00", "a%2Fb", ".hidden", String(repeating: "a", count: 300), "a b", "%C3%A9"]
        let port = fixture.relay.port
        for bad in hostile {
            let paths = [
                "/v1/accounts/\(bad)/nodes/\(node)/segments/1-1",
                "/v1/accounts/\(fixture.account)/nodes/\(bad)/segments/1-1",
                "/v1/accounts/\(fixture.account)/nodes/\(node)/segments/\(bad)",
            ]
            for path in paths where !path.contains(" ") {
                let put = try await rawRequest(port: port, method: "PUT", path: path, token: fixture.token, body: bytes)
                #expect(put.status == 400 || put.status == 404, "PUT \(path.prefix(120)): \(put.status) \(put.text)")
                #expect(put.status != 400 || put.errorCode == "bad_request")
                let get = try await rawRequest(port: port, method: "GET", path: path, token: fixture.token)
                #expect(get.status == 400 || get.status == 404, "GET \(path.prefix(120)): \(get.status)")
            }
        }
        // Ids that name nothing else: each refused with 400 specifically.
        for path in [
            "/v1/accounts/%00/segments", "/v1/accounts/../segments?after=0", "/v1/accounts/\(fixture.account)/nodes/..%2F..%2Fetc/segments/1-1",
            "/v1/accounts/\(fixture.account)/nodes/\(node)/segments/0-1", "/v1/accounts/\(fixture.account)/nodes/\(node)/segments/2-1",
            "/v1/accounts/\(fixture.account)/nodes/\(node)/segments/01-1", "/v1/accounts/\(fixture.account)/nodes/\(node)/segments/99999999999999999999-99999999999999999999",
            "/v1/accounts/\(fixture.account)/segments?after=-1", "/v1/accounts/\(fixture.account)/segments?wait=abc",
        ] {
            let answer = try await rawRequest(port: port, method: "GET", path: path, token: fixture.token)
            #expect(answer.status == 400, "\(path): \(answer.status) \(answer.text)")
        }
        try await expectStored(fixture, [])
    }

    @Test(arguments: Backend.allCases) func chunkedAndSlowBodiesAreBounded(backend: Backend) async throws {
        let fixture = try await RelayFixture.start(backend, config: "[limits]\nrequest_timeout_s = 1\n")
        let node = SegmentFixtures.nodeID()
        let port = fixture.relay.port
        let (path, token) = (fixture.segmentPath(node: node, first: 1, last: 1), fixture.token)
        // No Content-Length: refused before any body is read.
        let lengthRequired = try await onThread { () -> RawResponse in
            let chunked = try RawConnection(port: port)
            try chunked.send(Array("PUT \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".utf8))
            return try chunked.response()
        }
        #expect(lengthRequired.status == 411, "\(lengthRequired.text)")
        // A body that never finishes: 408 after request_timeout_s.
        let started = ContinuousClock.now
        let timedOut = try await onThread { () -> RawResponse in
            let slow = try RawConnection(port: port)
            try slow.send(Array("PUT \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: 1000\r\n\r\nabc".utf8))
            return try slow.response()
        }
        #expect(timedOut.status == 408 && timedOut.errorCode == "request_timeout", "\(timedOut.text)")
        // A relay without the deadline would wait for the body for ever; the bound leaves room for load.
        #expect(ContinuousClock.now - started < .seconds(30))
        try await expectStored(fixture, [])
    }
}
