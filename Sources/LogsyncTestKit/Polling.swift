import Foundation

/// The one way tests and benchmarks wait for something that happens elsewhere (another process, another
/// thread, the file system): look until it is there or a deadline passes, never sleep a fixed time.
///
/// Each waits once more after its deadline: on two busy cores the cooperative pool can be held for many
/// seconds by CPU-bound tests, and a task that wakes long after its deadline must not report as missing
/// what arrived in time.

/// A wait that ended without what it waited for.
public struct NotInTime: Error, CustomStringConvertible {
    /// What was awaited, with whatever the caller added to explain it (a log, an output).
    public let what: String
    public let timeout: Duration

    public var description: String { "not within \(timeout): \(what)" }
}

/// Looks for something with `find` until it is there or `timeout` has passed, and returns it; throws
/// ``NotInTime``, naming `what`, when it never came.
public func eventually<Found>(
    within timeout: Duration, every interval: Duration = .milliseconds(2), _ what: @autoclosure () -> String,
    _ find: () async throws -> Found?
) async throws -> Found {
    guard let found = try await poll(timeout: timeout, every: interval, find) else {
        throw NotInTime(what: what(), timeout: timeout)
    }
    return found
}

/// Waits until `condition` holds, or throws ``NotInTime`` naming `what` once `timeout` has passed.
public func eventually(
    within timeout: Duration, every interval: Duration = .milliseconds(2), _ what: @autoclosure () -> String,
    _ condition: () async throws -> Bool
) async throws {
    let held: Bool = try await eventually(within: timeout, every: interval, what()) { try await condition() ? true : nil }
    _ = held
}

/// What ``eventually(within:every:_:_:)`` is made of, for waits that handle a missing result themselves:
/// the value, or nil when it never came.
func poll<Found>(
    timeout: Duration, every interval: Duration = .milliseconds(2), _ find: () async throws -> Found?
) async throws -> Found? {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let found = try await find() { return found }
        guard ContinuousClock.now < deadline else { return try await find() }
        try await Task.sleep(for: interval)
    }
}

/// Runs long synchronous work (a property test's thousands of rounds) on a thread of its own and awaits
/// it. Swift Testing runs a synchronous test on one of the cooperative threads, and a 2-core machine has
/// two: two such tests would hold every other test's awaits (and its deadlines) until they end.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.stackSize = 8 << 20
        thread.name = "test.own-thread"
        thread.start()
    }
}
