import Foundation
import LogsyncTestKit

/// Which direction of a metric is an improvement.
enum Better: String, Sendable {
    case lower
    case higher
}

/// One measured figure, printed as one JSON line on stdout.
struct Metric: Sendable {
    var suite: String
    var metric: String
    var value: Double
    var unit: String
    /// The target the value should meet; nil for informative metrics.
    var goal: Double?
    var better: Better
    /// Digits after the decimal point in the output; 0 prints an integer.
    var decimals: Int

    /// The JSON line, with the keys always in the order suite, metric, value, unit, goal, better.
    var jsonLine: String {
        let fields = [
            ("suite", JSONText.string(suite)),
            ("metric", JSONText.string(metric)),
            ("value", JSONText.number(value, decimals: decimals)),
            ("unit", JSONText.string(unit)),
            ("goal", goal.map { JSONText.number($0, decimals: max(decimals, 3)) } ?? "null"),
            ("better", JSONText.string(better.rawValue)),
        ]
        return "{" + fields.map { "\(JSONText.string($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }
}

/// Output: metrics to stdout, progress to stderr. Writes go straight to the file descriptors, so lines
/// appear in order even when both streams are redirected to one file.
enum Report {
    static func emit(_ metric: Metric) {
        FileHandle.standardOutput.write(Data((metric.jsonLine + "\n").utf8))
    }

    static func progress(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}

/// Minimal JSON rendering, enough for metric lines and with a fixed key order (which `JSONEncoder`
/// does not promise).
enum JSONText {
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `value` rounded to `decimals` places; `null` when it is not finite (JSON has no NaN or infinity).
    static func number(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "null" }
        if decimals <= 0 { return String(Int64(value.rounded())) }
        let scale = pow(10, Double(decimals))
        let rounded = (value * scale).rounded() / scale
        return rounded == 0 ? "0" : "\(rounded)"
    }
}

// MARK: - Statistics and timing

enum Stats {
    static func median(_ values: [Double]) -> Double {
        precondition(!values.isEmpty, "median of no values")
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it.
    static func percentile(_ values: [Double], _ percent: Double) -> Double {
        precondition(!values.isEmpty, "percentile of no values")
        let sorted = values.sorted()
        let rank = Int((percent / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}

extension Duration {
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }
}

/// Times `body` with `ContinuousClock`.
func timed(_ body: () throws -> Void) rethrows -> Double {
    try ContinuousClock().measure(body).seconds
}

/// Formats an integer with thousands separators for progress messages: 100000 → "100,000".
func grouped(_ number: Int) -> String {
    let digits = String(number.magnitude)
    var out = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out += "," }
        out.append(digit)
    }
    return number < 0 ? "-" + out : out
}

func formatted(_ value: Double, decimals: Int = 3) -> String {
    String(format: "%.\(decimals)f", value)
}

// MARK: - Scratch files

/// Runs `body` with a fresh temporary directory (TestKit's, as the tests use) and removes it afterwards.
/// Anything that holds files open in it (a `Store`, a ``PlainDatabase``) must be released before `body`
/// returns.
func withTemporaryDirectory<T>(_ body: (TemporaryDirectory) throws -> T) throws -> T {
    let directory = try TemporaryDirectory("bench")
    return try withExtendedLifetime(directory) { try body(directory) }
}

/// A benchmark precondition that failed (wrong row counts, an unexpected table shape).
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A suite of the benchmark: its name heads every metric it reports.
protocol BenchmarkSuite {
    static var suite: String { get }
}

extension BenchmarkSuite {
    /// One of this suite's metrics; `decimals` digits after the point in the output.
    func metric(_ name: String, _ value: Double, unit: String, goal: Double?, _ better: Better, decimals: Int = 2) -> Metric {
        Metric(suite: Self.suite, metric: name, value: value, unit: unit, goal: goal, better: better, decimals: decimals)
    }

    /// The distribution of latencies `values` (ms) as `PREFIX_qNN_ms` lines at the quantiles
    /// ``distributionQuantiles``, without goals: what `scripts/bench-charts.py` draws. The goals stay on
    /// the suite's own p50 and p99 lines.
    func emitDistribution(_ prefix: String, _ values: [Double]) {
        guard !values.isEmpty else { return }
        for quantile in Self.distributionQuantiles {
            Report.emit(metric("\(prefix)_q\(quantile)_ms", Stats.percentile(values, Double(quantile)), unit: "ms", goal: nil, .lower))
        }
    }

    static var distributionQuantiles: [Int] { [1, 5, 10, 25, 50, 75, 90, 95, 99] }
}
