import LogsyncTestKit
import Testing

/// The seeds a property test runs, from its environment variable's value.
@Suite("Property seeds: the forms a long run names its seeds in")
struct PropertySeedsTests {
    @Test("unset or empty: the default count from the test's first seed")
    func defaults() {
        #expect(propertySeeds(nil, variable: "X", default: 3, from: 10) == [10, 11, 12])
        #expect(propertySeeds("", variable: "X", default: 2, from: 7) == [7, 8])
    }

    @Test("COUNT, COUNT@FIRST and @SEED")
    func forms() {
        #expect(propertySeeds("4", variable: "X", default: 1, from: 100) == [100, 101, 102, 103])
        #expect(propertySeeds("3@5000", variable: "X", default: 1, from: 100) == [5000, 5001, 5002])
        #expect(propertySeeds("@42", variable: "X", default: 8, from: 100) == [42])
        #expect(propertySeeds("0", variable: "X", default: 8, from: 100) == [])
        #expect(propertySeeds("1@\(UInt64.max)", variable: "X", default: 8, from: 100) == [.max])
    }

    @Test("any other value stops the run rather than running the default seeds")
    func refusesOtherValues() async {
        await #expect(processExitsWith: .failure) { _ = propertySeeds("ten", variable: "X", default: 8, from: 1) }
        await #expect(processExitsWith: .failure) { _ = propertySeeds("5@", variable: "X", default: 8, from: 1) }
        await #expect(processExitsWith: .failure) { _ = propertySeeds("2@\(UInt64.max)", variable: "X", default: 8, from: 1) }
    }
}
