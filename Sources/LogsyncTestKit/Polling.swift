/// Looks for something with `find` until it is there or `timeout` has passed, and returns it (nil when it
/// never came). It looks once more after the deadline: on two busy cores the cooperative pool can be
/// held for many seconds by CPU-bound tests, and a task that wakes long after its deadline must not
/// report as missing what arrived in time.
public func poll<Found>(
    timeout: Duration, every interval: Duration = .milliseconds(2), _ find: () throws -> Found?
) async throws -> Found? {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let found = try find() { return found }
        guard ContinuousClock.now < deadline else { return try find() }
        try await Task.sleep(for: interval)
    }
}
