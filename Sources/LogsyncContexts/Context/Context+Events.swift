import Foundation
import LogsyncCore
import LogsyncStore
import Synchronization

extension Context {
    // MARK: - Events and observation

    /// What happens to the context from now on: merges (with the object ids that changed and the
    /// conflicts met), saves, rollbacks and resets. The stream ends when the container closes.
    public func events() -> AsyncStream<ContextChanges> {
        let (stream, continuation) = AsyncStream<ContextChanges>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        let closed = state.withLock { $0.closed }
        if closed {
            continuation.finish()
            return stream
        }
        listeners.withLock { $0.events[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.events.removeValue(forKey: id) }
        }
        return stream
    }

    /// The records matching `request` now, and again with a diff whenever they change: after merges,
    /// saves and this context's own unsaved changes. The first element has every record as an insert.
    public func observe<R: Record>(_ request: FetchRequest<R>) -> AsyncStream<FetchedResults<R>> {
        let (stream, continuation) = AsyncStream<FetchedResults<R>>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let observer = ResultsObserver(request: request, continuation: continuation)
        let id = UUID()
        listeners.withLock { $0.observers[id] = observer }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.observers.removeValue(forKey: id) }
        }
        observer.refresh(in: self)
        return stream
    }

    func emit(_ changes: ContextChanges) {
        for continuation in listeners.withLock({ Array($0.events.values) }) { continuation.yield(changes) }
    }

    func refreshObservers() {
        for observer in listeners.withLock({ Array($0.observers.values) }) { observer.refresh(in: self) }
    }
}
