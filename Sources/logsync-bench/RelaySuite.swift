import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncSeal
import LogsyncPlatform
import LogsyncRelayTransport
import LogsyncStore
import LogsyncTransport
import Synchronization

/// `logsync-bench relay`: a real `sync-relay` on 127.0.0.1. Durable pushes per second from 64 pushers,
/// the fan-out of one push to 1,000 waiting long-polls, and commit → visible on another node through the
/// relay, next to the same through a shared folder in the same run.
struct RelaySuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "sync-relay on loopback: durable pushes/s from 64 pushers, long-poll fan-out to 1,000 waiters, node-to-node latency.",
        discussion: "Starts sync-relay and syncd from the folder of this executable: build every product first (swift build -c release).")

    @OptionGroup var options: SuiteOptions

    @Option(help: "Where the relays keep their data: sqlite (one relay, embedded) or postgres (two relays on one throwaway PostgreSQL cluster).")
    var backend: String = "sqlite"

    static let suite = "relay"
    /// The account the push and fan-out measurements load; the latency runs use syncd's (LatencySuite.account).
    static let account = "load"
    static let pushers = 64
    static let waiters = 1_000

    func run() throws {
        if backend == "postgres" { return try runPostgres() }
        guard backend == "sqlite" else {
            Report.progress("error: --backend must be sqlite or postgres, not \(backend)")
            throw ExitCode(ExitStatus.usage)
        }
        let quick = options.quick
        let pushesPerPusher = quick ? 60 : 300
        let fanOutRounds = quick ? 3 : 10
        let latencySamples = quick ? 50 : 200
        if quick {
            Report.progress(
                "--quick: \(pushesPerPusher) pushes per pusher instead of 300, \(fanOutRounds) fan-out rounds instead of 10, "
                    + "\(latencySamples) latency samples instead of 200")
        }
        raiseFileLimit()
        let syncd = try LatencySuite.locateSyncd()
        let relayExecutable = URL(fileURLWithPath: syncd).deletingLastPathComponent().path + "/sync-relay"
        guard FileManager.default.isExecutableFile(atPath: relayExecutable) else {
            Report.progress("error: no sync-relay next to syncd (\(relayExecutable)): build it first (swift build -c release)")
            throw ExitCode(ExitStatus.unavailable)
        }
        try withTemporaryDirectory { directory in
            let relay = try BenchRelay(executable: relayExecutable, store: ["--database", directory.file("relay.sqlite")])
            defer { relay.stop() }
            Report.progress("relay: sync-relay on \(relay.url), database in \(directory.path); \(ProcessInfo.processInfo.activeProcessorCount) cores")

            let (rate, cpu) = try measurePushes(relays: [relay], perPusher: pushesPerPusher)
            Report.emit(metric("pushes_per_s", rate, unit: "pushes/s", goal: 10_000, .higher, decimals: 0))
            Report.emit(metric("relay_cpu_us_per_push", cpu.relay, unit: "µs", goal: nil, .lower, decimals: 1))
            try emitSealedPushes(relays: [relay], perPusher: pushesPerPusher, plainRate: rate)

            let fanOut = try measureFanOut(waitOn: relay, pushTo: relay, rounds: fanOutRounds)
            Report.progress("  fan-out of one push to \(Self.waiters) long-polls, \(fanOut.count) answers: " + LatencySuite.summary(fanOut, timeouts: 0))
            Report.emit(metric("longpoll_p50_ms", Stats.percentile(fanOut, 50), unit: "ms", goal: nil, .lower))
            Report.emit(metric("longpoll_p99_ms", Stats.percentile(fanOut, 99), unit: "ms", goal: 100, .lower))

            let schema = NoteFixture.schema
            let tokens = try ["a", "b"].map { name -> String in
                let path = directory.file("\(name).token")
                try Data((try relay.admin(["token", "issue", LatencySuite.account]) + "\n").utf8).write(to: URL(fileURLWithPath: path))
                return path
            }
            Report.progress("relay latency: commit on A → visible on B, two syncd through the relay")
            let throughRelay = try withTemporaryDirectory { nodes in
                // Labelled: a trailing closure would bind to `sharedFolder`, the first closure parameter.
                try LatencySuite.measure(
                    directory: nodes, syncd: syncd, schema: schema, samples: latencySamples,
                    nodeConfig: { name in "[relay]\nurl = \"\(relay.url)\"\ntoken_file = \"\(tokens[name == "a" ? 0 : 1])\"\n" })
            }.map(\.latency)
            Report.progress("  through the relay: " + LatencySuite.summary(throughRelay, timeouts: 0))
            Report.progress("folder latency: the same through a local shared folder, for comparison")
            let throughFolder = try withTemporaryDirectory { nodes in
                try LatencySuite.measure(directory: nodes, syncd: syncd, schema: schema, samples: latencySamples)
            }.map(\.latency)
            Report.progress("  through the folder: " + LatencySuite.summary(throughFolder, timeouts: 0))
            Report.emit(metric("relay_p50_ms", Stats.percentile(throughRelay, 50), unit: "ms", goal: 10, .lower))
            Report.emit(metric("relay_p99_ms", Stats.percentile(throughRelay, 99), unit: "ms", goal: 50, .lower))
            Report.emit(metric("folder_p50_ms", Stats.percentile(throughFolder, 50), unit: "ms", goal: 5, .lower))
            Report.emit(metric("folder_p99_ms", Stats.percentile(throughFolder, 99), unit: "ms", goal: 15, .lower))
            emitDistribution("relay", throughRelay)
            emitDistribution("folder", throughFolder)
        }
    }

    /// 64 threads, each a node with its own connection, pushing small one-transaction segments as fast as
    /// acknowledgements come back, spread over `relays` (pusher i on relay i mod n). Every acknowledgement
    /// is durable (fsynced, shared by a group commit). Also the relays' CPU per push, and the database's
    /// (`databaseCPU`, PostgreSQL's processes) when given.
    /// With `sealed`, every segment is sealed first (untimed), as a sealed account's nodes push them
    /// (`docs/security.md`).
    func measurePushes(
        relays: [BenchRelay], perPusher: Int, databaseCPU: (() -> Double)? = nil, sealed: AccountKey? = nil
    ) throws -> (rate: Double, cpu: (relay: Double, database: Double)) {
        let relay = relays[0]
        let token = try relay.admin(["token", "issue", Self.account])
        Report.progress("pushes: \(Self.pushers) pushers × \(perPusher) one-transaction segments\(sealed == nil ? "" : ", sealed"), durable acknowledgements")
        let prepared: [(NodeID, [[UInt8]])] = try (0..<Self.pushers).map { _ in
            let node = NodeID(UUID().uuidString.lowercased())
            let keyring = sealed.map { SealKeyring(account: Self.account, accountKey: $0, signingKey: NodeSigningKey()) }
            var previous: [UInt8]?
            let segments = try (1...perPusher).map { sequence in
                let plain = try SegmentEncoder.encode(
                    schemaVersion: 1, account: Self.account, node: node,
                    transactions: [NoteFixture.transaction(sequence: UInt64(sequence))])
                guard let keyring else { return plain }
                let made = try Sealer.seal(
                    .segment, first: UInt64(sequence), last: UInt64(sequence), node: node, content: plain, previous: previous, keyring: keyring)
                previous = made.link
                return made.bytes
            }
            return (node, segments)
        }
        let failures = Mutex<[String]>([])
        let done = DispatchGroup()
        let relayCPUBefore = relays.map { $0.cpuSeconds() }.reduce(0, +)
        let databaseCPUBefore = databaseCPU?() ?? 0
        let benchCPUBefore = Self.ownCPUSeconds()
        let started = ContinuousClock.now
        for (index, (node, segments)) in prepared.enumerated() {
            done.enter()
            let url = relays[index % relays.count].url
            Thread.detachNewThread {
                defer { done.leave() }
                let transport = RelayTransport(settings: RelayClientSettings(url: url, account: Self.account, token: token), node: node)
                for (index, bytes) in segments.enumerated() {
                    let sequence = UInt64(index + 1)
                    do {
                        try transport.publish(SegmentName(node: node, firstSequence: sequence, lastSequence: sequence), bytes: bytes)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                        return
                    }
                }
            }
        }
        done.wait()
        let elapsed = (ContinuousClock.now - started).inMilliseconds / 1000
        let relayCPU = relays.map { $0.cpuSeconds() }.reduce(0, +) - relayCPUBefore
        let databaseCPU = (databaseCPU?() ?? 0) - databaseCPUBefore
        let benchCPU = Self.ownCPUSeconds() - benchCPUBefore
        let pushes = Double(Self.pushers * perPusher)
        Report.progress(
            "  CPU meanwhile: sync-relay \(formatted(relayCPU, decimals: 2)) s (\(formatted(relayCPU * 1e6 / pushes, decimals: 0)) µs per push), "
                + (databaseCPU > 0 ? "PostgreSQL \(formatted(databaseCPU, decimals: 2)) s (\(formatted(databaseCPU * 1e6 / pushes, decimals: 0)) µs per push), " : "")
                + "the 64 pushers \(formatted(benchCPU, decimals: 2)) s, of \(formatted(elapsed * Double(ProcessInfo.processInfo.activeProcessorCount), decimals: 2)) s of the machine's cores")
        let failed = failures.withLock { $0 }
        if !failed.isEmpty { throw BenchError("\(failed.count) pushers failed; the first: \(failed[0])") }
        let total = Self.pushers * perPusher
        let commits = relays.map { relay in
            ((try? relay.get("/metrics")) ?? "").split(separator: "\n").first { $0.hasPrefix("relay_commits_total ") }.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        }.reduce(0, +)
        Report.progress(
            "  \(grouped(total)) pushes in \(formatted(elapsed, decimals: 2)) s: \(grouped(Int(Double(total) / elapsed)))/s; "
                + "\(grouped(Int(commits))) commits so far (\(formatted(commits > 0 ? Double(total) / commits : 0, decimals: 1)) pushes per fsync)")
        return (Double(total) / elapsed, (relayCPU * 1e6 / pushes, databaseCPU * 1e6 / pushes))
    }

    /// Rounds of: `waiters` long-polls waiting on their own connections to `waitOn`, one push to `pushTo`,
    /// and the time from sending the push to each long-poll's answer arriving (all read with poll(2) on
    /// one thread).
    func measureFanOut(waitOn relay: BenchRelay, pushTo pusher: BenchRelay, rounds: Int, waiters: Int = RelaySuite.waiters, quiet: Bool = false) throws -> [Double] {
        let token = try relay.admin(["token", "issue", Self.account])
        let node = NodeID(UUID().uuidString.lowercased())
        if !quiet { Report.progress("fan-out: \(rounds) rounds of \(waiters) waiting long-polls woken by one push") }
        var latencies: [Double] = []
        for round in 1...rounds {
            let cursor = try relay.latestArrival(token: token)
            var sockets: [Int32] = []
            defer { for socket in sockets { close(socket) } }
            for _ in 0..<waiters {
                let socket = try BenchRelay.connect(port: relay.port)
                sockets.append(socket)
                let request = "GET /v1/accounts/\(Self.account)/segments?after=\(cursor)&wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"
                try BenchRelay.send(socket, Array(request.utf8))
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                if (try? relay.get("/metrics"))?.contains("relay_waiting_polls \(waiters)\n") == true { break }
                Thread.sleep(forTimeInterval: 0.01)
            }
            let bytes = try SegmentEncoder.encode(
                schemaVersion: 1, account: Self.account, node: node, transactions: [NoteFixture.transaction(sequence: UInt64(round))])
            let pushSocket = try BenchRelay.connect(port: pusher.port)
            defer { close(pushSocket) }
            let push = "PUT /v1/accounts/\(Self.account)/nodes/\(node)/segments/\(round)-\(round) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Length: \(bytes.count)\r\n\r\n"
            let sent = ContinuousClock.now
            try BenchRelay.send(pushSocket, Array(push.utf8) + bytes)
            var pending = Set(sockets.indices)
            var descriptors = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            while !pending.isEmpty, ContinuousClock.now < sent + .seconds(30) {
                guard poll(&descriptors, nfds_t(descriptors.count), 1_000) > 0 else { continue }
                let now = ContinuousClock.now
                for index in pending where descriptors[index].revents != 0 {
                    latencies.append((now - sent).inMilliseconds)
                    pending.remove(index)
                    descriptors[index].events = 0
                    descriptors[index].fd = -1
                }
            }
            if !pending.isEmpty { throw BenchError("\(pending.count) of \(waiters) long-polls did not answer within 30 s of the push") }
            if !quiet {
                Report.progress("  round \(round): all \(waiters) answered; the last \(formatted(latencies.suffix(waiters).max()!, decimals: 1)) ms after the push")
            }
        }
        return latencies
    }

    /// User and system CPU time of this process so far.
    static func ownCPUSeconds() -> Double {
        ProcessUsage.cpuTime / .seconds(1)
    }

    func raiseFileLimit() {
        DescriptorLimit.raise(to: 8_192)
    }
}

/// A `sync-relay` this run started, with an account and the administration commands.
final class BenchRelay: Sendable {
    let executable: String
    /// `--database FILE` or `--config FILE`: where its data is, for `serve` and the administration commands.
    let store: [String]
    let process: ChildProcess
    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }

    /// `createAccounts`: the first relay on a database creates the accounts the suite uses.
    init(executable: String, store: [String], createAccounts: Bool = true) throws {
        self.executable = executable
        self.store = store
        if createAccounts {
            for account in [RelaySuite.account, LatencySuite.account] {
                try ChildProcess(executable, ["account", "create", account] + store, standardOutput: .null).waitUntilExit()
            }
        }
        let output = try ChildProcess.pipe()
        process = try ChildProcess(
            executable, ["serve"] + store + ["--host", "127.0.0.1", "--port", "0", "--log-level", "warning"],
            standardOutput: .descriptor(output.write.fileDescriptor))
        try output.write.close()
        // The first line says where it listens.
        var line = ""
        let deadline = ContinuousClock.now + .seconds(30)
        while !line.hasSuffix("\n"), ContinuousClock.now < deadline {
            let byte = ChildProcess.read(output.read, maximum: 1)
            if byte.isEmpty { break }
            line += String(decoding: byte, as: UTF8.self)
        }
        guard let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw BenchError("sync-relay did not say where it listens: \(line)")
        }
        self.port = port
    }

    /// User and system CPU time the relay process has used so far (from /proc; 0 when unreadable).
    func cpuSeconds() -> Double {
        (try? ProcessCPU.seconds(process.processIdentifier)) ?? 0
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Runs `sync-relay ARGUMENTS` on its data and returns the first line it printed.
    func admin(_ arguments: [String]) throws -> String {
        let (status, data) = try ChildProcess.run(executable, arguments + store, standardError: .null)
        guard status == 0 else { throw BenchError("sync-relay \(arguments.joined(separator: " ")) failed") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }

    /// GET `path` on a connection of its own; the body.
    func get(_ path: String, token: String? = nil) throws -> String {
        let socket = try Self.connect(port: port)
        defer { close(socket) }
        let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        try Self.send(socket, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(auth)\r\n".utf8))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer.append(contentsOf: buffer[0..<count])
        }
        let text = String(decoding: answer, as: UTF8.self)
        return text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    }

    func latestArrival(token: String) throws -> UInt64 {
        let body = try get("/v1/accounts/\(RelaySuite.account)/nodes", token: token)
        guard let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], let cursor = object["cursor"] as? Int else {
            throw BenchError("the relay's nodes answer has no cursor: \(body)")
        }
        return UInt64(cursor)
    }

    static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BenchError("socket: errno \(errno)") }
        var time = timeval(tv_sec: 35, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var noDelay: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(descriptor)
            throw BenchError("connect to 127.0.0.1:\(port): errno \(errno)")
        }
        return descriptor
    }

    static func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw BenchError("send: errno \(errno)") }
            offset += written
        }
    }
}

extension RelaySuite {
    /// The same pushes sealed (`docs/security.md`), on the same relays, alternating with plain ones:
    /// plain (the run before this), sealed, plain, sealed, plain, sealed, plain. Each sealed rate is set
    /// against the mean of the plain rates just before and after it — the relay's database grows with
    /// every push, so neither side gets the emptier one — and the median of the three ratios is reported
    /// (`--quick`: one).
    func emitSealedPushes(relays: [BenchRelay], perPusher: Int, databaseCPU: (() -> Double)? = nil, plainRate firstPlain: Double) throws {
        var plain = [firstPlain]
        var sealed: [Double] = []
        var ratios: [Double] = []
        for _ in 0..<(options.quick ? 1 : 3) {
            sealed.append(try measurePushes(relays: relays, perPusher: perPusher, databaseCPU: databaseCPU, sealed: AccountKey.random()).rate)
            plain.append(try measurePushes(relays: relays, perPusher: perPusher, databaseCPU: databaseCPU).rate)
            let around = (plain[plain.count - 2] + plain[plain.count - 1]) / 2
            ratios.append(sealed.last! / around)
            Report.progress(
                "  sealed: \(grouped(Int(sealed.last!))) pushes/s against \(grouped(Int(around))) plain (\(grouped(Int(plain[plain.count - 2]))) before, \(grouped(Int(plain.last!))) after): \(formatted(ratios.last!, decimals: 3)) x")
        }
        Report.emit(metric("pushes_per_s_sealed", Stats.median(sealed), unit: "pushes/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("sealed_pushes_vs_plain", Stats.median(ratios), unit: "x", goal: 0.95, .higher, decimals: 3))
    }
}
