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
/// `variable` asks for (long runs), starting at `first`; `@SEED` in the variable runs just that seed (one
/// a failure printed).
public func propertySeeds(_ variable: String, default defaultCount: Int, from first: UInt64) -> [UInt64] {
    let value = ProcessInfo.processInfo.environment[variable]
    if let value, value.hasPrefix("@"), let seed = UInt64(value.dropFirst()) { return [seed] }
    let count = value.flatMap(Int.init) ?? defaultCount
    return (0..<UInt64(max(count, 0))).map { first + $0 }
}
