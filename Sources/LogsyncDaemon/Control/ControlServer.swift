import Foundation
import LogsyncPlatform

/// Serves the control protocol on a Unix socket (owner-only), one thread per connection.
final class ControlServer: @unchecked Sendable {
    let path: String
    private let socket: UnixSocket
    private unowned let daemon: SyncDaemon
    private let stopped = NSLock()
    private var isStopped = false

    init(path: String, daemon: SyncDaemon) throws(SystemError) {
        self.path = path
        self.daemon = daemon
        socket = try UnixSocket.listen(at: path)
    }

    func start() {
        let thread = Thread { [self] in
            while let client = socket.accept() {
                let worker = Thread { [self] in serve(client) }
                worker.name = "syncd.control-client"
                worker.start()
            }
        }
        thread.name = "syncd.control"
        thread.start()
    }

    func stop() {
        stopped.withLock { isStopped = true }
        socket.shutdown()
        unlink(path)
    }

    private func serve(_ client: UnixSocket) {
        var reader = LineReader(client)
        let decoder = JSONDecoder()
        while let line = try? reader.next() {
            guard let request = try? decoder.decode(ControlRequest.self, from: Data(line)) else {
                var response = ControlResponse(id: 0, ok: false)
                response.error = ControlFailure(.badRequest, "not a control request: expected one JSON object per line (docs/control-protocol.md)")
                send(response, to: client)
                continue
            }
            guard request.version == ControlProtocol.version else {
                var response = ControlResponse(id: request.id, ok: false)
                response.error = ControlFailure(
                    .unsupportedVersion, "this syncd speaks control protocol version \(ControlProtocol.version), not \(request.version)")
                send(response, to: client)
                continue
            }
            if request.command == .watch {
                watch(request, client)
                return
            }
            send(handle(request), to: client)
        }
    }

    private func handle(_ request: ControlRequest) -> ControlResponse {
        var response = ControlResponse(id: request.id)
        do {
            switch request.command {
            case .status:
                response.status = try daemon.status()
            case .peers:
                response.peers = try daemon.status().peers
            case .history:
                response.history = try daemon.history(limit: max(1, min(request.limit ?? 20, 10_000)))
            case .trigger:
                let timeout = Double(request.timeoutMilliseconds ?? 30_000) / 1000
                switch daemon.trigger(timeout: timeout) {
                case nil:
                    response.ok = false
                    response.error = ControlFailure(.timeout, "the sync did not complete within \(timeout) s")
                case .completed(let report, let summary)?:
                    response.trigger = TriggerResult(
                        summary: summary, published: report.published.map(\.description), applied: report.applied.map(\.description),
                        waiting: Dictionary(uniqueKeysWithValues: report.waiting.map { ($0.key.rawValue, $0.value) }),
                        rejected: report.rejected.map(\.description), quarantined: report.quarantined.map(\.description))
                case .failed(let error, let summary)?:
                    response.ok = false
                    response.error = ControlFailure(.syncFailed, String(describing: error))
                    response.trigger = TriggerResult(summary: summary, published: [], applied: [], waiting: [:], rejected: [], quarantined: [])
                }
            case .reload:
                let result = daemon.reload()
                response.reload = result
                if !result.ok {
                    response.ok = false
                    response.error = ControlFailure(.reloadFailed, result.message)
                }
            case .watch:
                break
            }
        } catch {
            response.ok = false
            response.error = ControlFailure(.internalError, String(describing: error))
        }
        return response
    }

    /// Streams events until the client goes away or the daemon stops.
    private func watch(_ request: ControlRequest, _ client: UnixSocket) {
        send(ControlResponse(id: request.id), to: client)
        let gone = Disconnection()
        let subscription = daemon.subscribe { event in
            var response = ControlResponse(id: request.id)
            response.event = event
            guard let data = try? JSONEncoder().encode(response), (try? client.write(Array(data) + [10])) != nil else {
                gone.signal()
                return
            }
        }
        defer { daemon.unsubscribe(subscription) }
        // The client sends nothing more; reading returns when it disconnects.
        let detector = Thread {
            _ = try? client.read()
            gone.signal()
        }
        detector.start()
        gone.wait(orUntil: { self.stopped.withLock { self.isStopped } })
    }

    private func send(_ response: ControlResponse, to client: UnixSocket) {
        guard let data = try? JSONEncoder().encode(response) else { return }
        try? client.write(Array(data) + [10])
    }
}

/// Set once, when a watching client goes away.
private final class Disconnection: @unchecked Sendable {
    private let condition = NSCondition()
    private var closed = false

    func signal() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Waits until signalled or `stop()` says the server is stopping (checked twice a second).
    func wait(orUntil stop: () -> Bool) {
        condition.withLock {
            while !closed, !stop() { _ = condition.wait(until: Date().addingTimeInterval(0.5)) }
        }
    }
}
