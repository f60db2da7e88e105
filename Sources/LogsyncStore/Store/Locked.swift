import Foundation

/// A value that is only touched while holding its lock. The store keeps each SQLite connection in one.
///
/// The lock is fair: threads get it in the order they asked for it. With a plain mutex, a thread that
/// releases it and asks again at once (an import going from one batch to the next) usually wins over a
/// thread that was already waiting, which then waits through two batches or more.
///
/// `@unchecked`: the value is touched only while the ticket is held, which a condition variable grants;
/// `Mutex` has no way to wait for a turn, so it cannot express the fairness.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let condition = NSCondition()
    /// The next ticket to hand out, and the ticket whose holder may run: guarded by `condition`.
    private var nextTicket: UInt64 = 0
    private var serving: UInt64 = 0

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    private func lock() {
        condition.lock()
        let ticket = nextTicket
        nextTicket += 1
        while serving != ticket { condition.wait() }
        condition.unlock()
    }

    private func unlock() {
        condition.lock()
        serving += 1
        // Only the holder of the next ticket can go on; waking them all is simplest, and there are few.
        if nextTicket != serving { condition.broadcast() }
        condition.unlock()
    }
}
