import Foundation
import LogsyncCore
import LogsyncTestKit
import Synchronization

/// How the load run loads the relays: `nodes` simulated nodes in `accounts` accounts, each keeping one
/// long-poll open on its relay (node i on relay i mod n), while pushes from random nodes to random relays
/// arrive at `pushesPerSecond` for `seconds`.
struct LoadPlan: Sendable {
    var nodes: Int
    var accounts: Int
    var seconds: Int
    var pushesPerSecond: Int
}

struct LoadResult: Sendable {
    var pushP50 = 0.0
    var pushP99 = 0.0
    var wakeP50 = 0.0
    var wakeP99 = 0.0
    var errors = 0
    var peakResidentMegabytes = 0.0
    var kilobytesPerIdlePoll = 0.0
}

/// The load run of `logsync-bench relay --backend postgres` (loopback only, bounded in time): first the
/// memory each idle long-poll costs the relays, then pushes and long-polls mixed. Long-polls are read on
/// one thread with poll(2), each on a keep-alive connection that asks again with its new cursor.
final class LoadRun: @unchecked Sendable {
    let plan: LoadPlan
    let relays: [BenchRelay]
    /// When each account's arrivals were pushed (sent), by arrival: what a woken long-poll is timed from.
    private let sent = Mutex<[Int: [UInt64: ContinuousClock.Instant]]>([:])
    private let tally = Mutex<(pushes: [Double], wakes: [Double], errors: Int, firstErrors: [String])>(([], [], 0, []))

    init(plan: LoadPlan, relays: [BenchRelay]) {
        self.plan = plan
        self.relays = relays
    }

    func run() throws -> LoadResult {
        Report.progress("load: \(plan.nodes) simulated nodes in \(plan.accounts) accounts over \(relays.count) relays; \(plan.pushesPerSecond) pushes/s for \(plan.seconds) s")
        let tokens = try (0..<plan.accounts).map { account -> String in
            _ = try? relays[0].admin(["account", "create", "load-\(account)"])
            return try relays[0].admin(["token", "issue", "load-\(account)"])
        }
        // Idle long-polls in two waves: the first pays for what a relay allocates once (thread arenas, the
        // pool's connections, buffers the allocator keeps after the burst of opening); the second's growth
        // is what each further idle long-poll holds.
        var polls: [Poll] = []
        defer { for poll in polls { close(poll.socket) } }
        var resident: [[Int]] = []
        for wave in 0..<2 {
            for index in (wave * plan.nodes / 2)..<((wave + 1) * plan.nodes / 2) {
                let relay = relays[index % relays.count]
                let poll = Poll(account: index % plan.accounts, token: tokens[index % plan.accounts], socket: try BenchRelay.connect(port: relay.port))
                try poll.ask()
                polls.append(poll)
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                let waiting = relays.map { relay in
                    ((try? relay.get("/metrics")) ?? "").split(separator: "\n").first { $0.hasPrefix("relay_waiting_polls ") }
                        .flatMap { Int($0.split(separator: " ")[1]) } ?? 0
                }.reduce(0, +)
                if waiting >= polls.count { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            Thread.sleep(forTimeInterval: 1)
            resident.append(relays.map { ProcessCPU.memory($0.process.processIdentifier).now })
        }
        let perPoll = Double(zip(resident[1], resident[0]).map { $0 - $1 }.reduce(0, +)) / Double(plan.nodes - plan.nodes / 2)
        Report.progress(
            "  idle long-polls: relays' RSS with \(plan.nodes / 2) waiting \(resident[0]) kB, with \(plan.nodes) \(resident[1]) kB: \(formatted(perPoll, decimals: 1)) KB per further long-poll")

        let stop = StopFlag()
        let reader = Thread { [self, polls] in read(polls, until: stop) }
        reader.start()
        let pushers = 64
        let group = DispatchGroup()
        let started = ContinuousClock.now
        for pusher in 0..<pushers {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                push(pusher: pusher, of: pushers, tokens: tokens, started: started)
            }
        }
        group.wait()
        // Long-polls woken by the last pushes answer, then the reader stops.
        Thread.sleep(forTimeInterval: 2)
        stop.value.store(true, ordering: .releasing)
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.05) }
        let peak = relays.map { ProcessCPU.memory($0.process.processIdentifier).peak }.max() ?? 0
        let (pushes, wakes, errors, firstErrors) = tally.withLock { $0 }
        Report.progress(
            "  \(pushes.count) pushes: " + LatencySuite.summary(pushes, timeouts: 0) + "; \(wakes.count) long-poll wake-ups: " + LatencySuite.summary(wakes, timeouts: 0)
                + "; \(errors) errors\(firstErrors.isEmpty ? "" : " (first: \(firstErrors.joined(separator: "; ")))"); peak RSS of a relay \(peak) kB")
        return LoadResult(
            pushP50: Stats.percentile(pushes, 50), pushP99: Stats.percentile(pushes, 99), wakeP50: Stats.percentile(wakes, 50),
            wakeP99: Stats.percentile(wakes, 99), errors: errors, peakResidentMegabytes: Double(peak) / 1024, kilobytesPerIdlePoll: perPoll)
    }

    private func error(_ text: String) {
        tally.withLock { tally in
            tally.errors += 1
            if tally.firstErrors.count < 3 { tally.firstErrors.append(text) }
        }
    }

    /// One pusher's share of the rate: pushes from its own nodes (node k of this pusher), each to a relay
    /// at random, on fresh connections.
    private func push(pusher: Int, of pushers: Int, tokens: [String], started: ContinuousClock.Instant) {
        let interval = Double(pushers) / Double(plan.pushesPerSecond)
        var sequences: [Int: UInt64] = [:]
        var count = 0
        let end = started + .seconds(plan.seconds)
        while ContinuousClock.now < end {
            let due = started + .milliseconds(Int64(Double(count) * interval * 1000))
            if ContinuousClock.now < due { Thread.sleep(forTimeInterval: Double((due - ContinuousClock.now).inMilliseconds) / 1000) }
            count += 1
            let node = pusher + pushers * Int.random(in: 0..<max(1, plan.nodes / pushers))
            let account = node % plan.accounts
            let nodeID = String(format: "%08x-0000-4000-8000-%012x", node, node)
            let sequence = sequences[node, default: 0] + 1
            guard
                let bytes = try? SegmentEncoder.encode(
                    schemaVersion: 1, account: "load-\(account)", node: NodeID(nodeID), transactions: [NoteFixture.transaction(sequence: sequence)])
            else { continue }
            let relay = relays.randomElement()!
            let sentAt = ContinuousClock.now
            do {
                let socket = try BenchRelay.connect(port: relay.port)
                defer { close(socket) }
                let head = "PUT /v1/accounts/load-\(account)/nodes/\(nodeID)/segments/\(sequence)-\(sequence) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(tokens[account])\r\nContent-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
                try BenchRelay.send(socket, Array(head.utf8) + bytes)
                let answer = try HTTPAnswer.read(socket)
                let latency = (ContinuousClock.now - sentAt).inMilliseconds
                guard answer.status == 201, let arrival = answer.number("arrival") else {
                    error("push \(answer.status) \(String(decoding: answer.body.prefix(120), as: UTF8.self))")
                    continue
                }
                sequences[node] = sequence
                sent.withLock { $0[account, default: [:]][UInt64(arrival)] = sentAt }
                tally.withLock { $0.pushes.append(latency) }
            } catch {
                self.error("push: \(error)")
            }
        }
    }

    /// Reads every long-poll's answers until `stop`: times each wake-up from the push it answers, and asks
    /// again with the new cursor on the same connection.
    private func read(_ polls: [Poll], until stop: StopFlag) {
        var descriptors = polls.map { pollfd(fd: $0.socket, events: Int16(POLLIN), revents: 0) }
        while !stop.value.load(ordering: .acquiring) {
            guard poll(&descriptors, nfds_t(descriptors.count), 200) > 0 else { continue }
            for index in descriptors.indices where descriptors[index].revents != 0 {
                let poll = polls[index]
                guard let answer = poll.receive() else {
                    if poll.failed {
                        error("long-poll connection closed")
                        descriptors[index].fd = -1
                    }
                    continue
                }
                guard answer.status == 200, let cursor = answer.number("cursor") else {
                    error("long-poll \(answer.status)")
                    descriptors[index].fd = -1
                    continue
                }
                let now = ContinuousClock.now
                if UInt64(cursor) > poll.cursor, let pushed = sent.withLock({ $0[poll.account]?[poll.cursor + 1] }) {
                    tally.withLock { $0.wakes.append((now - pushed).inMilliseconds) }
                }
                poll.cursor = max(poll.cursor, UInt64(cursor))
                do { try poll.ask() } catch {
                    self.error("long-poll: \(error)")
                    descriptors[index].fd = -1
                }
            }
        }
    }

    /// One simulated node's long-poll connection.
    final class Poll: @unchecked Sendable {
        let account: Int
        let token: String
        let socket: Int32
        var cursor: UInt64 = 0
        var buffer: [UInt8] = []
        var failed = false

        init(account: Int, token: String, socket: Int32) {
            self.account = account
            self.token = token
            self.socket = socket
        }

        func ask() throws {
            let request = "GET /v1/accounts/load-\(account)/segments?after=\(cursor)&wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"
            try BenchRelay.send(socket, Array(request.utf8))
        }

        /// Reads what is there; a whole answer once one arrived, else nil.
        func receive() -> HTTPAnswer? {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = recv(socket, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count == 0 { failed = true }
            if count > 0 { buffer += chunk[0..<count] }
            guard let (answer, used) = HTTPAnswer.parse(buffer) else { return nil }
            buffer.removeFirst(used)
            return answer
        }
    }
}

/// An HTTP/1.1 answer with a Content-Length body.
struct HTTPAnswer {
    var status: Int
    var body: [UInt8]

    /// An integer field of the JSON body, found by its key.
    func number(_ key: String) -> Int? {
        let text = String(decoding: body, as: UTF8.self)
        guard let range = text.range(of: "\"\(key)\":") else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }

    /// The first whole answer in `bytes` and the bytes it took, or nil when it is not all there yet.
    static func parse(_ bytes: [UInt8]) -> (HTTPAnswer, Int)? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) }) else { return nil }
        let head = String(decoding: bytes[0..<end], as: UTF8.self).lowercased()
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }.flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
        guard bytes.count >= end + 4 + length else { return nil }
        return (HTTPAnswer(status: status, body: Array(bytes[(end + 4)..<(end + 4 + length)])), end + 4 + length)
    }

    /// Reads one whole answer from a blocking socket.
    static func read(_ socket: Int32) throws -> HTTPAnswer {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let (answer, _) = parse(buffer) { return answer }
            let count = recv(socket, &chunk, chunk.count, 0)
            guard count > 0 else { throw BenchError("the relay closed the connection before answering") }
            buffer += chunk[0..<count]
        }
    }
}

final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
}
