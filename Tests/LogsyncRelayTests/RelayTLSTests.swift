import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Testing

/// A certificate authority and a certificate for 127.0.0.1 it signed, made with the openssl command.
struct TestCertificates {
    let ca: String
    let certificate: String
    let key: String

    static func make(in directory: TemporaryDirectory, name: String) async throws -> TestCertificates {
        let openssl = "/usr/bin/openssl"
        let prefix = directory.file(name)
        let extensions = try directory.write("\(name).ext", "subjectAltName=IP:127.0.0.1\n")
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(prefix)-ca.key",
             "-out", "\(prefix)-ca.pem", "-days", "2", "-subj", "/CN=logsync test CA \(name)"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(prefix).key", "-out",
             "\(prefix).csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "\(prefix).csr", "-CA", "\(prefix)-ca.pem", "-CAkey", "\(prefix)-ca.key", "-CAcreateserial",
             "-out", "\(prefix).pem", "-days", "2", "-extfile", extensions],
        ]
        for step in steps {
            let result = try await Subprocess.run(openssl, step)
            guard result.status == 0 else { throw SubprocessError.exited(status: result.status, stdout: result.stdout, stderr: result.stderr) }
        }
        return TestCertificates(ca: "\(prefix)-ca.pem", certificate: "\(prefix).pem", key: "\(prefix).key")
    }
}

/// The relay serving HTTPS from certificate files, nodes verifying it with the CA given to them.
@Suite(.serialized) struct RelayTLSTests {
    @Test func nodesSyncOverTLSWithTheirCAAndAreRefusedWithoutIt() async throws {
        let relay = try RelayProcess()
        let certificates = try await TestCertificates.make(in: relay.directory, name: "one")
        let config = try relay.directory.write(
            "sync-relay.toml", "[server]\ntls_certificate = \"\(certificates.certificate)\"\ntls_key = \"\(certificates.key)\"\n")
        try await relay.createAccount("test")
        try await relay.start(arguments: ["--config", config])
        #expect(relay.url.hasPrefix("https://"))
        let cluster = try SyncdCluster("relaytls", schema: relayTestSchema)
        var nodes: [SyncdNode] = []
        for name in ["a", "b"] {
            let lines = try await RelaySyncTests.relayLines(relay, account: "test", node: name) + ["ca_file = \"\(certificates.ca)\""]
            nodes.append(try cluster.addNode(name, rescanIntervalMilliseconds: 60_000, extra: lines))
        }
        // A third node that does not trust the relay's CA: refused at the TLS handshake, pushes nothing.
        let stranger = try cluster.addNode("c", rescanIntervalMilliseconds: 60_000, extra: try await RelaySyncTests.relayLines(relay, account: "test", node: "c"))
        for node in nodes + [stranger] { try await node.start() }
        defer { for node in nodes + [stranger] { node.process?.process.terminate() } }
        try nodes[0].openStore().write(author: "a") { tx in try tx.insert("Note", note("over TLS")) }
        try stranger.openStore().write(author: "c") { tx in try tx.insert("Note", note("from an untrusting node")) }
        try await eventually(within: .seconds(30), "b receives a's note over TLS") {
            try nodes[1].tables()["Note"]?.count == 1
        }
        let contact = try await eventually(within: .seconds(20), "the untrusting node reports the certificate problem") { () -> [String: Any]? in
            let relay = try await stranger.status()["relay"] as? [String: Any]
            return (relay?["last_answer"] as? String).map { $0.lowercased().contains("certificate") || $0.contains("SSL") } == true ? relay : nil
        }
        print("untrusting node: \(contact["last_answer"] ?? "")")
        #expect(try nodes[1].tables()["Note"]?.count == 1, "nothing of the untrusting node arrived")
        let accounts = try await relay.admin(["account", "list", "--json"])
        #expect(accounts.stdout.contains("\"segments\" : 1"), "only a's segment is stored: \(accounts.stdout)")
        for node in nodes + [stranger] { try await node.stop() }
        try await relay.stop()
    }

    /// request_timeout_s holds over TLS too: a body that stops arriving is answered 408 and its
    /// connection closed (TLS has no closing of the reading side alone).
    @Test func slowBodiesOverTLSAreCut() async throws {
        let relay = try RelayProcess()
        let certificates = try await TestCertificates.make(in: relay.directory, name: "slow")
        let config = try relay.directory.write(
            "sync-relay.toml",
            "[server]\ntls_certificate = \"\(certificates.certificate)\"\ntls_key = \"\(certificates.key)\"\n[limits]\nrequest_timeout_s = 1\n")
        try await relay.createAccount("test")
        let token = try await relay.issueToken("test")
        try await relay.start(arguments: ["--config", config])
        defer { Task { try? await relay.stop() } }
        let port = relay.port
        let started = ContinuousClock.now
        let answer = try await onThread { () -> String in
            let input = try ChildProcess.pipe()
            let output = try ChildProcess.pipe()
            let client = try ChildProcess(
                "/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", certificates.ca, "-quiet", "-ign_eof"],
                standardInput: .descriptor(input.read.fileDescriptor), standardOutput: .descriptor(output.write.fileDescriptor), standardError: .null)
            for end in [input.read, output.write] { try end.close() }
            defer { client.terminate() }
            let node = SegmentFixtures.nodeID()
            // 3 of the 1,000 bytes announced, then nothing; stdin stays open.
            input.write.write(
                Data("PUT /v1/accounts/test/nodes/\(node)/segments/1-1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: 1000\r\n\r\nabc".utf8))
            // Everything the relay sends until it closes the connection (openssl then exits).
            return String(decoding: ChildProcess.readToEnd(output.read), as: UTF8.self)
        }
        #expect(answer.hasPrefix("HTTP/1.1 408") && answer.contains("request_timeout"), "\(answer)")
        #expect(ContinuousClock.now - started < .seconds(30), "answered, then closed")
    }

    @Test func sighupReloadsTheCertificate() async throws {
        let relay = try RelayProcess()
        let first = try await TestCertificates.make(in: relay.directory, name: "first")
        let second = try await TestCertificates.make(in: relay.directory, name: "second")
        let served = relay.directory.file("served.pem")
        let servedKey = relay.directory.file("served.key")
        try FileManager.default.copyItem(atPath: first.certificate, toPath: served)
        try FileManager.default.copyItem(atPath: first.key, toPath: servedKey)
        let config = try relay.directory.write("sync-relay.toml", "[server]\ntls_certificate = \"\(served)\"\ntls_key = \"\(servedKey)\"\n")
        try await relay.start(arguments: ["--config", config])
        func verifies(with ca: String) async throws -> Bool {
            let result = try await Subprocess.run(
                "/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(relay.port)", "-CAfile", ca, "-verify_return_error", "-brief"],
                timeout: .seconds(20))
            return result.status == 0 && (result.stdout + result.stderr).contains("Verification: OK")
        }
        #expect(try await verifies(with: first.ca))
        #expect(try await !verifies(with: second.ca))
        // Renewal: new files in place, then SIGHUP.
        try FileManager.default.removeItem(atPath: served)
        try FileManager.default.removeItem(atPath: servedKey)
        try FileManager.default.copyItem(atPath: second.certificate, toPath: served)
        try FileManager.default.copyItem(atPath: second.key, toPath: servedKey)
        kill(try #require(relay.process).process.processIdentifier, SIGHUP)
        try await relay.awaitLog("reloaded the TLS certificate", timeout: .seconds(30))
        #expect(try await verifies(with: second.ca), "new connections get the new certificate")
        try await relay.stop()
    }
}
