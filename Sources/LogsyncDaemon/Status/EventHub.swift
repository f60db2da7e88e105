import LogsyncControl
import LogsyncPlatform
import Synchronization

/// Who hears the daemon's events (`syncctl watch` clients), and the handing out of each event. A
/// subscriber only enqueues (``EventQueue``): publishing never waits for a client.
final class EventHub: Sendable {
    private struct Subscriber {
        var optIns: Set<DaemonEvent.OptIn>
        var handler: @Sendable (DaemonEvent) -> Void
    }

    private let subscribers = Mutex((next: 0, all: [Int: Subscriber]()))

    /// Adds a subscriber; the kinds of an opt-in group (account events such as `stores_will_change`,
    /// refusal events, schema events: ``DaemonEvent/Kind/optIn``) reach it only when it asks for them, so
    /// that older clients never meet kinds they do not know. Returns its id for ``unsubscribe(_:)``.
    func subscribe(optIns: Set<DaemonEvent.OptIn> = [], _ handler: @escaping @Sendable (DaemonEvent) -> Void) -> Int {
        subscribers.withLock { state in
            state.next += 1
            state.all[state.next] = Subscriber(optIns: optIns, handler: handler)
            return state.next
        }
    }

    func unsubscribe(_ id: Int) {
        _ = subscribers.withLock { $0.all.removeValue(forKey: id) }
    }

    func publish(_ event: DaemonEvent) {
        let optIn = event.kind.optIn
        let handlers = subscribers.withLock { $0.all.values.filter { optIn.map($0.optIns.contains) ?? true }.map(\.handler) }
        for handler in handlers { handler(event) }
    }

    /// ``publish(_:)`` of an event of `kind` stamped now.
    func publish(_ kind: DaemonEvent.Kind, _ message: String) {
        publish(DaemonEvent(kind: kind, at: Int64(clamping: WallClock.milliseconds()), message: message))
    }
}
