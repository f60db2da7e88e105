import LogsyncControl
import LogsyncPlatform
import Synchronization

/// Who hears the daemon's events (`syncctl watch` clients), and the handing out of each event. A
/// subscriber only enqueues (``EventQueue``): publishing never waits for a client.
final class EventHub: Sendable {
    private struct Subscriber {
        var accountEvents: Bool
        var refusalEvents: Bool
        var handler: @Sendable (DaemonEvent) -> Void
    }

    private let subscribers = Mutex((next: 0, all: [Int: Subscriber]()))

    /// Adds a subscriber; account events (`stores_will_change`, …) and refusal events (`refused`,
    /// `dropped`) reach it only when it asks for them, so that older clients never meet kinds they do not
    /// know. Returns its id for ``unsubscribe(_:)``.
    func subscribe(accountEvents: Bool = false, refusalEvents: Bool = false, _ handler: @escaping @Sendable (DaemonEvent) -> Void) -> Int {
        subscribers.withLock { state in
            state.next += 1
            state.all[state.next] = Subscriber(accountEvents: accountEvents, refusalEvents: refusalEvents, handler: handler)
            return state.next
        }
    }

    func unsubscribe(_ id: Int) {
        _ = subscribers.withLock { $0.all.removeValue(forKey: id) }
    }

    func publish(_ event: DaemonEvent) {
        let isAccountEvent = [.storesWillChange, .switchProgress, .storesDidChange].contains(event.kind)
        let isRefusalEvent = [.refused, .dropped].contains(event.kind)
        let handlers = subscribers.withLock {
            $0.all.values.filter { ($0.accountEvents || !isAccountEvent) && ($0.refusalEvents || !isRefusalEvent) }.map(\.handler)
        }
        for handler in handlers { handler(event) }
    }

    /// ``publish(_:)`` of an event of `kind` stamped now.
    func publish(_ kind: DaemonEvent.Kind, _ message: String) {
        publish(DaemonEvent(kind: kind, at: Int64(clamping: WallClock.milliseconds()), message: message))
    }
}
