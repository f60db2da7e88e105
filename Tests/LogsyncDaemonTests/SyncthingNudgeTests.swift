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
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let listening = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0 && getsockname(descriptor, $0, &length) == 0
                }
            }
            try #require(descriptor >= 0 && listening, "a listening socket on 127.0.0.1 (errno \(errno))")
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }
    }

    @Test("a request never waits for Syncthing; one that does not answer fails after the timeout, is reported once, and asks made meanwhile become one scan")
    func neverWaits() async throws {
        let server = try SilentServer()
        let events = Mutex<[SyncthingNudge.Event]>([])
        let client = SyncthingClient(url: "http://127.0.0.1:\(server.port)", apiKey: "k", timeoutMilliseconds: 300)
        let nudge = SyncthingNudge(client: client, folderID: nil) { event in events.withLock { $0.append(event) } }
        defer { nudge.stop() }

        let start = ContinuousClock.now
        for _ in 0..<100 { nudge.request(nodeFolder: "/srv/shared/acct/node") }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .milliseconds(50), "100 requests took \(elapsed): they must only note the folder")

        try await eventually(within: .seconds(10), "the scan asked for fails after the 300 ms timeout") {
            let contact = nudge.contact
            return contact.failures >= 1 && contact.scans == contact.failures
        }
        // The first ask starts a scan at once; the 99 made while it waits for its answer become at most one more.
        var contact = nudge.contact
        #expect(contact.requested == 100 && contact.scans <= 2, "\(contact)")
        #expect(contact.failing && contact.lastFailure?.contains("did not answer GET /rest/config/folders") == true, "\(contact)")

        // Another failure of the same kind is counted, not reported again.
        nudge.request(nodeFolder: "/srv/shared/acct/node")
        try await eventually(within: .seconds(10), "a later scan fails the same way") {
            let contact = nudge.contact
            return contact.failures >= 2 && contact.scans == contact.failures
        }
        contact = nudge.contact
        #expect(contact.requested == 101 && contact.scans <= 3, "\(contact)")
        let reported = events.withLock { $0 }
        #expect(reported.count == 1, "the same failure is reported once: \(reported)")
    }

    @Test("a new API key is sent from the next request on (a key rotated in its file, then a reload)")
    func rotatedKey() throws {
        let server = try SilentServer()
        let requests = Mutex<[String]>([])
        let listening = server.descriptor
        // Answers each request with 200 and remembers its headers; ends when the listening socket closes.
        Thread.detachNewThread {
            while true {
                let connection = accept(listening, nil, nil)
                guard connection >= 0 else { return }
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !String(decoding: received, as: UTF8.self).contains("\r\n\r\n") {
                    let count = read(connection, &buffer, buffer.count)
                    guard count > 0 else { break }
                    received += buffer[0..<count]
                }
                requests.withLock { $0.append(String(decoding: received, as: UTF8.self)) }
                let answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                _ = answer.withCString { write(connection, $0, strlen($0)) }
                close(connection)
            }
        }
        defer { shutdown(server.descriptor, Int32(SHUT_RDWR)) }
        let client = SyncthingClient(url: "http://127.0.0.1:\(server.port)", apiKey: "first-key", timeoutMilliseconds: 5_000)
        try client.ping()
        #expect(!client.use(apiKey: "first-key"), "the same key: nothing changes")
        #expect(client.use(apiKey: "second-key"))
        try client.ping()
        let seen = requests.withLock { $0 }
        #expect(seen.count == 2, "\(seen)")
        #expect(seen.first?.contains("X-API-Key: first-key\r\n") == true, "\(seen)")
        #expect(seen.last?.contains("X-API-Key: second-key\r\n") == true, "\(seen)")
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
