import Dispatch
import Foundation
import Logging
import LogsyncControl
import LogsyncPlatform
import LogsyncSystemd
import Synchronization

/// Serves the control protocol on a Unix socket (owner-only), one thread per connection, with bounds
/// everywhere, so that no client can hold up the daemon or its sync loop:
///
/// - at most ``maximumClients`` connections at once; one more is told `too_many_clients` and closed;
/// - a client has ``requestDeadline`` to send each request and ``writeDeadline`` to take each answer
///   (`SO_RCVTIMEO`, `SO_SNDTIMEO`), else it is disconnected;
/// - a `watch` client gets events through a queue of at most ``watchQueueLimit`` events, filled without
///   ever waiting by whoever publishes them; a client that falls that far behind, or does not take an
///   event within the write deadline, is dropped with a message in the log and, if its socket has room,
///   a last line saying why.
final class ControlServer: Sendable {
    static let maximumClients = 32
    static let requestDeadline = 10_000
    static let writeDeadline = 2_000
    static let watchQueueLimit = 256
    static let maximumRequestBytes = 64 << 10

    let path: String
    private let socket: UnixSocket
    private let logger: Logger
    private let clients = Mutex(Clients())
    /// Signalled as each client's thread ends: a stop waits (bounded) for the `watch` clients to go.
    private let watchersEnded = Wakeup()

    private struct Clients {
        var open: [Int: UnixSocket] = [:]
        /// The queues of the `watch` clients among them.
        var watching: [Int: EventQueue] = [:]
        var next = 0
        var stopped = false
        /// Connections refused since the last time that was logged, and when that was.
        var refused = 0
        var refusalLoggedAt: ContinuousClock.Instant?
    }

    init(path: String, logger: Logger) throws(SystemError) {
        self.path = path
        self.logger = logger
        socket = try UnixSocket.listen(at: path)
    }

    /// Accepts clients on a thread of its own, answering them with `handler`, until ``stop()``.
    func start(handler: ControlHandler) {
        let thread = Thread { [self] in
            while let client = socket.accept() {
                guard let id = admit(client) else {
                    refuse(client)
                    continue
                }
                client.setReceiveTimeout(milliseconds: Self.requestDeadline)
                client.setSendTimeout(milliseconds: Self.writeDeadline)
                let worker = Thread { [self] in
                    serve(client, id: id, handler: handler)
                    clients.withLock { clients in
                        clients.open[id] = nil
                        clients.watching[id] = nil
                    }
                    watchersEnded.signal()
                    client.shutdown()
                }
                worker.name = "syncd.control-client"
                worker.start()
            }
        }
        thread.name = "syncd.control"
        thread.start()
    }

    /// Stops accepting, lets `watch` clients have what is queued for them (the `stopping` event) if they
    /// take it within ``flushDeadline``, disconnects every client (their threads end at once) and removes
    /// the socket file.
    func stop() {
        let queues = clients.withLock { clients in
            clients.stopped = true
            return Array(clients.watching.values)
        }
        socket.shutdown()
        for queue in queues { queue.close() }
        _ = watchersEnded.wait(timeout: Self.flushDeadline) { clients.withLock { $0.watching.isEmpty } }
        for client in clients.withLock({ Array($0.open.values) }) { client.shutdown() }
        try? DurableFiles.remove(path)
    }

    static let flushDeadline = Duration.milliseconds(250)

    private var isStopped: Bool { clients.withLock { $0.stopped } }

    private func admit(_ client: UnixSocket) -> Int? {
        clients.withLock { clients in
            guard !clients.stopped, clients.open.count < Self.maximumClients else {
                clients.refused += 1
                return nil
            }
            clients.next += 1
            clients.open[clients.next] = client
            return clients.next
        }
    }

    /// Tells a client over the limit why, without waiting for it, and logs refusals at most once a second.
    private func refuse(_ client: UnixSocket) {
        var response = ControlResponse(id: 0, ok: false)
        response.error = ControlFailure(
            .tooManyClients, "syncd already serves \(Self.maximumClients) control clients; try again shortly")
        if let data = try? JSONEncoder().encode(response) { try? client.write(Array(data) + [10], waiting: false) }
        client.shutdown()
        let count: Int? = clients.withLock { clients in
            let now = ContinuousClock.now
            guard clients.refusalLoggedAt.map({ now - $0 >= .seconds(1) }) ?? true else { return nil }
            defer { clients.refused = 0 }
            clients.refusalLoggedAt = now
            return clients.refused
        }
        if let count {
            logger.warning(
                "refused \(count) control connection(s): \(Self.maximumClients) clients are already connected",
                metadata: ["message_id": "\(MessageID.clientRefused)"])
        }
    }

    private func serve(_ client: UnixSocket, id: Int, handler: ControlHandler) {
        var reader = LineReader(client, maximumLine: Self.maximumRequestBytes)
        while !isStopped {
            let line: [UInt8]?
            do {
                line = try reader.next()
            } catch {
                // The request deadline passed (EAGAIN), or the connection failed: nothing to answer.
                return
            }
            guard let line else {
                if reader.overflowed {
                    send(Self.failure(id: 0, .badRequest, "a request is one JSON line of at most \(Self.maximumRequestBytes) bytes"), to: client)
                }
                return
            }
            let request: ControlRequest
            switch Self.decode(line) {
            case .invalid(let response):
                guard send(response, to: client) else { return }
                continue
            case .request(let decoded):
                request = decoded
            }
            if request.command == .watch {
                watch(request, client, id: id, handler: handler)
                return
            }
            guard send(handler.handle(request), to: client) else { return }
        }
    }

    enum Decoded {
        case request(ControlRequest)
        /// The answer that says what is wrong with the line.
        case invalid(ControlResponse)
    }

    /// A request, or the answer that says what is wrong with it: with the request's id whenever the line
    /// is JSON with an id, and naming a command this daemon does not know.
    static func decode(_ line: [UInt8]) -> Decoded {
        struct Envelope: Decodable {
            var v: Int?
            var id: Int?
            var command: String?
        }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: Data(line)) else {
            return .invalid(failure(id: 0, .badRequest, "not a control request: expected one JSON object per line (docs/control-protocol.md)"))
        }
        let id = envelope.id ?? 0
        guard envelope.v == ControlProtocol.version else {
            let given = envelope.v.map(String.init) ?? "(none given)"
            return .invalid(failure(id: id, .unsupportedVersion, "this syncd speaks control protocol version \(ControlProtocol.version), not \(given)"))
        }
        guard let name = envelope.command, ControlRequest.Command(rawValue: name) != nil else {
            let known = ControlRequest.Command.allCases.map(\.rawValue).joined(separator: ", ")
            let named = envelope.command.map { "unknown command '\($0.prefix(64))'" } ?? "no command given"
            return .invalid(failure(id: id, .badRequest, "\(named); this syncd knows: \(known)"))
        }
        do {
            return .request(try JSONDecoder().decode(ControlRequest.self, from: Data(line)))
        } catch {
            return .invalid(failure(id: id, .badRequest, "malformed '\(name)' request: \(error)"))
        }
    }

    static func failure(id: Int, _ code: ControlFailure.Code, _ message: String) -> ControlResponse {
        var response = ControlResponse(id: id, ok: false)
        response.error = ControlFailure(code, message)
        return response
    }

    /// Streams events until the client goes away, falls behind, or the daemon stops.
    private func watch(_ request: ControlRequest, _ client: UnixSocket, id: Int, handler: ControlHandler) {
        guard send(ControlResponse(id: request.id), to: client) else { return }
        let queue = EventQueue(limit: Self.watchQueueLimit)
        let admitted = clients.withLock { clients in
            if !clients.stopped { clients.watching[id] = queue }
            return !clients.stopped
        }
        guard admitted else { return }
        var optIns: Set<DaemonEvent.OptIn> = []
        if request.accountEvents == true { optIns.insert(.account) }
        if request.refusalEvents == true { optIns.insert(.refusal) }
        if request.schemaEvents == true { optIns.insert(.schema) }
        let subscription = handler.events.subscribe(optIns: optIns) { queue.offer($0) }
        defer { handler.events.unsubscribe(subscription) }
        while true {
            switch queue.next(waitingAtMost: .milliseconds(250)) {
            case .event(let event):
                var response = ControlResponse(id: request.id)
                response.event = event
                do {
                    // Once the daemon stops, what is left goes only as far as the socket takes it at once.
                    try client.write(Self.line(response), waiting: !queue.isClosed)
                } catch {
                    if (error.errno == EAGAIN || error.errno == EWOULDBLOCK) && !queue.isClosed {
                        drop(client, request, because: "it took no event for \(Self.writeDeadline) ms")
                    }
                    return
                }
            case .overflowed:
                drop(client, request, because: "it fell \(Self.watchQueueLimit) events behind")
                return
            case .closed:
                return
            case .idle:
                if client.peerHasClosed() { return }
            }
        }
    }

    /// Disconnects a watch client that stopped keeping up: says so in the log and, if its socket takes
    /// it at once, in a last line to the client.
    private func drop(_ client: UnixSocket, _ request: ControlRequest, because reason: String) {
        logger.warning(
            "dropped a watch client: \(reason); events are never held up for a client (it may reconnect)",
            metadata: ["message_id": "\(MessageID.clientDropped)"])
        let response = Self.failure(id: request.id, .slowConsumer, "syncd dropped this watch: \(reason)")
        try? client.write(Self.line(response), waiting: false)
    }

    private static func line(_ response: ControlResponse) -> [UInt8] {
        ((try? JSONEncoder().encode(response)).map(Array.init) ?? []) + [10]
    }

    /// Sends a response within the write deadline; false when the client did not take it.
    @discardableResult
    private func send(_ response: ControlResponse, to client: UnixSocket) -> Bool {
        (try? client.write(Self.line(response))) != nil
    }
}

/// The events waiting for one watch client: filled without waiting, bounded; past the bound it only
/// remembers that it overflowed. Once closed, it hands out what it holds, then `.closed`.
final class EventQueue: Sendable {
    enum Next {
        case event(DaemonEvent)
        case overflowed
        case closed
        case idle
    }

    private struct State {
        var events: [DaemonEvent] = []
        var overflowed = false
        var closed = false
    }

    private let limit: Int
    private let state = Mutex(State())
    private let available = Wakeup()

    init(limit: Int) { self.limit = limit }

    /// Adds an event; never waits.
    func offer(_ event: DaemonEvent) {
        let added = state.withLock { state -> Bool in
            guard !state.overflowed, !state.closed else { return false }
            guard state.events.count < limit else {
                state.overflowed = true
                state.events = []
                return true
            }
            state.events.append(event)
            return true
        }
        if added { available.signal() }
    }

    /// No more events: the reader gets what is queued, then `.closed`.
    func close() {
        state.withLock { $0.closed = true }
        available.signal()
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// The next event, `.overflowed` once the queue has overflowed, `.closed` once closed and empty, or
    /// `.idle` after `timeout` without any of these.
    func next(waitingAtMost timeout: Duration) -> Next {
        while true {
            let next: Next? = state.withLock { state in
                if state.overflowed { return .overflowed }
                if !state.events.isEmpty { return .event(state.events.removeFirst()) }
                return state.closed ? .closed : nil
            }
            if let next { return next }
            if !available.wait(timeout: timeout) { return .idle }
        }
    }
}
