import NIOCore
import Synchronization

/// When the bodies being read must have moved on by (`request_timeout_s`), for all requests at once: one
/// sweep every ``tick`` while any body is being read ends the request stream of each late one
/// (``BodyCutter``), which ends its body there; its reader then answers 408 and the connection closes.
/// Watching a body is an entry in a table, not a timer and a task per request, which cost a push more
/// than the rest of its reading.
final class BodyDeadlines: Sendable {
    /// How late past its deadline a body may be cut.
    static let tick = Duration.milliseconds(100)

    private let state = Mutex(State())

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 0
        /// Whether a sweep is scheduled: one runs while any body is watched.
        var sweeping = false
    }

    private struct Entry {
        /// nil while the reader is busy with what it read (that time does not count).
        var deadline: ContinuousClock.Instant?
        let channel: any Channel
        var timedOut = false
    }

    /// One watched body.
    struct Watch: Sendable {
        fileprivate let id: Int
    }

    /// Starts watching a body read from `channel`, due by `deadline`.
    func watch(_ channel: any Channel, until deadline: ContinuousClock.Instant) -> Watch {
        let (id, startSweep) = state.withLock { state in
            state.nextID += 1
            state.entries[state.nextID] = Entry(deadline: deadline, channel: channel)
            defer { state.sweeping = true }
            return (state.nextID, !state.sweeping)
        }
        if startSweep { Task.detached { [self] in await sweep() } }
        return Watch(id: id)
    }

    /// Moves the deadline (nil: none while the reader works on what it read).
    func extend(_ watch: Watch, until deadline: ContinuousClock.Instant?) {
        state.withLock { $0.entries[watch.id]?.deadline = deadline }
    }

    /// Stops watching; true when the body was cut for being late.
    @discardableResult
    func end(_ watch: Watch) -> Bool {
        state.withLock { $0.entries.removeValue(forKey: watch.id)?.timedOut ?? false }
    }

    /// Whether the body was cut for being late.
    func timedOut(_ watch: Watch) -> Bool {
        state.withLock { $0.entries[watch.id]?.timedOut ?? false }
    }

    private func sweep() async {
        while true {
            try? await Task.sleep(for: Self.tick)
            let now = ContinuousClock.now
            let (late, done): ([any Channel], Bool) = state.withLock { state in
                var late: [any Channel] = []
                for (id, entry) in state.entries where !entry.timedOut {
                    guard let deadline = entry.deadline, deadline <= now else { continue }
                    state.entries[id]?.timedOut = true
                    late.append(entry.channel)
                }
                if state.entries.isEmpty { state.sweeping = false }
                return (late, !state.sweeping)
            }
            // The body's stream ends; the connection still takes the 408 answer, then closes.
            for channel in late { BodyCutter.cut(channel) }
            if done { return }
        }
    }
}

/// In each connection's pipeline between the HTTP codec and the request handling: ends the connection's
/// request stream when its body is late, as if the client had stopped sending, and then turns the
/// closing of the connection's writing side, which follows the answer, into closing it whole. Closing
/// the socket for reading would do the first part over plain TCP but not over TLS, which has no closing
/// of one direction alone.
final class BodyCutter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    private var cut = false

    /// Cuts the body being read on `channel`, from any thread.
    static func cut(_ channel: any Channel) {
        channel.eventLoop.execute {
            guard let context = try? channel.pipeline.syncOperations.context(handlerType: BodyCutter.self),
                let cutter = context.handler as? BodyCutter, !cutter.cut
            else { return }
            cutter.cut = true
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        context.close(mode: cut && mode == .output ? .all : mode, promise: promise)
    }
}
