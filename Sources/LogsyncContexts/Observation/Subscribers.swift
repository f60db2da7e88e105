import Foundation
import Synchronization

/// The streams a container hands out (``Container/changes()``, ``AccountContainer/accountChanges()``):
/// each buffers at most `limit` elements (the newest), and all end when the subscribers are finished.
final class Subscribers<Element: Sendable>: Sendable {
    private let state = Mutex<(streams: [UUID: AsyncStream<Element>.Continuation], finished: Bool)>(([:], false))
    private let limit: Int

    init(buffering limit: Int) { self.limit = limit }

    /// A new stream; one that ends at once when the subscribers are already finished. `first`, when
    /// given, is the stream's first element (the state a subscriber starts from).
    func stream(startingWith first: Element? = nil) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        let id = UUID()
        let accepted = state.withLock { state in
            guard !state.finished else { return false }
            state.streams[id] = continuation
            return true
        }
        guard accepted else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.streams.removeValue(forKey: id) } }
        if let first { continuation.yield(first) }
        return stream
    }

    func yield(_ elements: [Element]) {
        let streams = state.withLock { Array($0.streams.values) }
        for element in elements {
            for continuation in streams { continuation.yield(element) }
        }
    }

    /// Ends every stream, and every stream asked for later.
    func finish() {
        let streams = state.withLock { state in
            defer {
                state.finished = true
                state.streams = [:]
            }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}
