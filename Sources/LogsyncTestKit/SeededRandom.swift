import Foundation

/// SplitMix64: a small, fast, seeded generator, so every randomized test is reproducible from the seed
/// it prints.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The seeds a property test runs: `defaultCount` in CI, or as many as the environment variable
/// `variable` asks for (long runs), starting at `first`. `COUNT@FIRST` runs `COUNT` seeds from `FIRST`
/// (a range no run has tried), and `@SEED` runs just that seed (one a failure printed).
public func propertySeeds(_ variable: String, default defaultCount: Int, from first: UInt64) -> [UInt64] {
    propertySeeds(ProcessInfo.processInfo.environment[variable], variable: variable, default: defaultCount, from: first)
}

/// ``propertySeeds(_:default:from:)`` for a given value of the variable. A value that is none of the
/// forms stops the run: silently running the default seeds would pass a long run that never ran.
public func propertySeeds(_ value: String?, variable: String, default defaultCount: Int, from first: UInt64) -> [UInt64] {
    guard let value, !value.isEmpty else { return (0..<UInt64(max(defaultCount, 0))).map { first + $0 } }
    let parts = value.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
    let count = parts[0].isEmpty && parts.count == 2 ? 1 : UInt64(parts[0])
    let start = parts.count == 2 ? UInt64(parts[1]) : first
    guard let count, let start, count == 0 || !start.addingReportingOverflow(count - 1).overflow else {
        preconditionFailure("\(variable)=\(value): expected COUNT, COUNT@FIRST or @SEED (decimal numbers)")
    }
    return (0..<count).map { start + $0 }
}
