import LogsyncCore
import LogsyncTransport
import Synchronization

/// A carrier in memory: what the shared folder or a relay holds, per account, for nodes in one process.
/// Its transports (``transport(account:node:)``) publish into it and see each other's segments, progress
/// records and baselines; each is woken when another node of its account publishes. For tests of the
/// daemon's parts in one process, without files or sockets for the logs.
public final class MemoryCarrier: Sendable {
    struct Account {
        var segments: [SegmentName: [UInt8]] = [:]
        var progress: [NodeID: [UInt8]] = [:]
        var baselines: [BaselineName: [UInt8]] = [:]
    }

    private let accounts = Mutex([String: Account]())
    /// Per account, the continuations of the transports that listen for arrivals.
    private let listeners = Mutex([String: [Int: AsyncStream<Void>.Continuation]]())
    private let nextListener = Mutex(0)

    public init() {}

    /// A transport of `account`'s logs for node `node`.
    public func transport(account: String, node: NodeID) -> any Transport {
        MemoryTransport(carrier: self, account: account, node: node)
    }

    /// Every segment name `account` holds, by node.
    public func segments(of account: String) -> [SegmentName] {
        accounts.withLock { $0[account]?.segments.keys.sorted() ?? [] }
    }

    func withAccount<T>(_ account: String, _ body: (inout Account) throws(TransportError) -> T) throws(TransportError) -> T {
        try accounts.withLock { (accounts: inout [String: Account]) throws(TransportError) -> T in
            var held = accounts[account] ?? Account()
            defer { accounts[account] = held }
            return try body(&held)
        }
    }

    func listen(_ account: String, _ continuation: AsyncStream<Void>.Continuation) -> Int {
        let id = nextListener.withLock { next in
            next += 1
            return next
        }
        listeners.withLock { $0[account, default: [:]][id] = continuation }
        return id
    }

    func stopListening(_ account: String, _ id: Int) {
        _ = listeners.withLock { $0[account]?.removeValue(forKey: id) }
    }

    /// Wakes every transport listening to `account`.
    func announce(_ account: String) {
        for continuation in listeners.withLock({ Array(($0[account] ?? [:]).values) }) { continuation.yield() }
    }
}

/// A ``Transport`` over a ``MemoryCarrier``.
final class MemoryTransport: Transport {
    private let memory: MemoryCarrier
    private let account: String
    private let node: NodeID
    /// The names this transport has seen already (for ``refresh(excluding:)``'s `appeared`).
    private let seen = Mutex(Set<SegmentName>())

    init(carrier: MemoryCarrier, account: String, node: NodeID) {
        self.memory = carrier
        self.account = account
        self.node = node
    }

    func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) {
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in
            if let stored = held.segments[name], stored != bytes {
                throw TransportError(.conflict, "\(name) is stored with other bytes")
            }
            held.segments[name] = bytes
        }
        memory.announce(account)
    }

    func scan(excluding node: NodeID) throws(TransportError) -> TransportScan {
        let names = try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.segments.keys.filter { $0.node != node } }
        return TransportScan(segments: names.sorted(), ignored: [])
    }

    func refresh(excluding node: NodeID) throws(TransportError) -> TransportView {
        let names = try scan(excluding: node).segments
        let appeared = seen.withLock { seen in
            defer { seen.formUnion(names) }
            return names.filter { !seen.contains($0) }
        }
        return TransportView(appeared: appeared, ignored: [], nodes: Array(Set(names.map(\.node))).sorted())
    }

    func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName] {
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.segments.keys.filter { $0.node == node }.sorted() }
    }

    func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName] {
        ((try? scan(excluding: self.node).segments) ?? []).filter { $0.node == node && $0.lastSequence > sequence }
    }

    func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        let bytes = try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.segments[name] }
        guard let bytes else { throw TransportError(.notFound, "\(name) is not in the carrier") }
        guard bytes.count <= maximumBytes else { throw TransportError(.tooLarge, "\(name) is \(bytes.count) bytes, over \(maximumBytes)") }
        return bytes
    }

    func arrivals(rescanInterval: Duration) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = memory.listen(account, continuation)
        let (carrier, account) = (memory, account)
        continuation.onTermination = { _ in carrier.stopListening(account, id) }
        continuation.yield()
        return stream
    }

    func publishProgress(_ bytes: [UInt8]) throws(TransportError) {
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.progress[node] = bytes }
    }

    func progressRecords() throws(TransportError) -> [NodeID: [UInt8]] {
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.progress }
    }

    func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError) {
        var bytes: [UInt8] = []
        do {
            while let chunk = try next() { bytes += chunk }
        } catch {
            throw TransportError(.io, "writing the baseline \(name): \(error)")
        }
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.baselines[name] = bytes }
    }

    func baselines() throws(TransportError) -> [BaselineName] {
        try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.baselines.keys.sorted() }
    }

    func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError) {
        let bytes = try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.baselines[name] }
        guard let bytes else { throw TransportError(.notFound, "\(name) is not in the carrier") }
        do {
            try consume(bytes)
        } catch {
            throw TransportError(.io, "reading the baseline \(name): \(error)", cause: error)
        }
    }

    func remove(_ name: SegmentName) throws(TransportError) {
        guard name.node == node else { throw TransportError(.forbidden, "\(name) is another node's") }
        _ = try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.segments.removeValue(forKey: name) }
    }

    func remove(_ name: BaselineName) throws(TransportError) {
        guard name.node == node else { throw TransportError(.forbidden, "\(name) is another node's") }
        _ = try memory.withAccount(account) { (held: inout MemoryCarrier.Account) throws(TransportError) in held.baselines.removeValue(forKey: name) }
    }
}
