import Foundation
import LogsyncSyncthing
import LogsyncTestKit
import Synchronization
import Testing

/// The scan requests on their own, against a Syncthing that never answers: they must never hold up
/// the publisher, and their failures are counted and reported once.
@Suite("Syncthing scan requests")
struct SyncthingNudgeTests {
    /// A TCP port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers.
    final class SilentServer {
        let descriptor: Int32
        let port: Int

        init() throws {
            (descriptor, port) = try StubHTTPServer.listen()
        }

        deinit { close(descriptor) }
    }

    @Test("a request never waits for Syncthing: a hundred asks return while the first scan still waits for its answer")
    func neverWaits() async throws {
        let server = try SilentServer()
        // A minute's timeout: a request that waited for Syncthing would miss the deadline below by far.
        let client = SyncthingClient(url: "http://127.0.0.1:\(server.port)", apiKey: "k", timeoutMilliseconds: 60_000)
        let nudge = SyncthingNudge(client: client, folderID: nil) { _ in }
        defer { nudge.stop() }
        // The contact is read on the thread that asked: a test task resumed late on a busy machine could
        // otherwise read it after the minute has passed.
        let contact = try await onOwnThread {
            for _ in 0..<100 { nudge.request(nodeFolder: "/srv/shared/acct/node") }
            return nudge.contact
        }
        #expect(contact.requested == 100 && contact.scans == 0 && contact.failures == 0, "no scan has had an answer yet: \(contact)")
    }

    @Test("a scan that Syncthing does not answer fails after the client's timeout, and is reported once")
    func failureReportedOnce() async throws {
        let server = try SilentServer()
        let events = Mutex<[SyncthingNudge.Event]>([])
        let client = SyncthingClient(url: "http://127.0.0.1:\(server.port)", apiKey: "k", timeoutMilliseconds: 300)
        let nudge = SyncthingNudge(client: client, folderID: nil) { event in events.withLock { $0.append(event) } }
        defer { nudge.stop() }

        for _ in 0..<100 { nudge.request(nodeFolder: "/srv/shared/acct/node") }
        try await eventually(within: .seconds(30), "the scan asked for fails after the 300 ms timeout") {
            let contact = nudge.contact
            return contact.failures >= 1 && contact.scans == contact.failures
        }
        var contact = nudge.contact
        #expect(contact.requested == 100, "\(contact)")
        #expect(contact.failing && contact.lastFailure?.contains("did not answer GET /rest/config/folders") == true, "\(contact)")

        // Another failure of the same kind is counted, not reported again.
        nudge.request(nodeFolder: "/srv/shared/acct/node")
        try await eventually(within: .seconds(30), "a later scan fails the same way") {
            let contact = nudge.contact
            return contact.failures >= 2 && contact.scans == contact.failures
        }
        contact = nudge.contact
        #expect(contact.requested == 101, "\(contact)")
        let reported = events.withLock { $0 }
        #expect(reported.count == 1, "the same failure is reported once: \(reported)")
    }

    @Test("a new API key is sent from the next request on (a key rotated in its file, then a reload)")
    func rotatedKey() throws {
        let server = try StubHTTPServer { _ in (200, "") }
        defer { server.stop() }
        let client = SyncthingClient(url: "http://127.0.0.1:\(server.port)", apiKey: "first-key", timeoutMilliseconds: 5_000)
        try client.ping()
        #expect(!client.use(apiKey: "first-key"), "the same key: nothing changes")
        #expect(client.use(apiKey: "second-key"))
        try client.ping()
        let keys = server.received.map { $0.headers["x-api-key"] }
        #expect(keys == ["first-key", "second-key"], "\(server.received)")
    }

    @Test("the folder to scan is this node's folder relative to the Syncthing folder's root")
    func relativeSub() throws {
        let directory = try TemporaryDirectory("stsub")
        let node = directory.file("shared/acct/node")
        try FileManager.default.createDirectory(atPath: node, withIntermediateDirectories: true)
        #expect(try SyncthingNudge.relative(node, in: SyncthingFolder(id: "f", path: directory.file("shared"))) == "acct/node")
        #expect(try SyncthingNudge.relative(node, in: SyncthingFolder(id: "f", path: directory.file("shared") + "/")) == "acct/node")
        #expect(try SyncthingNudge.relative(node, in: SyncthingFolder(id: "f", path: directory.path)) == "shared/acct/node")
        #expect(try SyncthingNudge.relative(node, in: SyncthingFolder(id: "f", path: node)) == "")
        // A link to the shared folder is the same folder.
        try FileManager.default.createSymbolicLink(atPath: directory.file("link"), withDestinationPath: directory.file("shared"))
        #expect(try SyncthingNudge.relative(directory.file("link/acct/node"), in: SyncthingFolder(id: "f", path: directory.file("shared"))) == "acct/node")
        let error = try #require(throws: SyncthingError.self) {
            try SyncthingNudge.relative(node, in: SyncthingFolder(id: "other", path: directory.file("sharedX")))
        }
        #expect(error.message.contains("does not hold this node's folder") && error.message.contains("folder_id"), "\(error)")
    }
}
