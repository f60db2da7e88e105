import Synchronization

/// Counters for `/metrics`, written in Prometheus' text format (version 0.0.4).
final class RelayMetrics: Sendable {
    private let counters = Mutex<(named: [String: Double], requests: [RequestKey: Double])>(([:], [:]))

    /// `relay_requests_total`'s labels, kept apart so that counting a request builds no string.
    private struct RequestKey: Hashable {
        var route: String
        var status: Int
    }

    /// Adds to a counter; `name` may carry labels (`relay_requests_total{status="200"}`).
    func add(_ name: String, _ value: Double = 1) {
        counters.withLock { $0.named[name, default: 0] += value }
    }

    /// Adds to two counters at once.
    func add(_ name: String, _ value: Double, _ other: String, _ otherValue: Double) {
        counters.withLock {
            $0.named[name, default: 0] += value
            $0.named[other, default: 0] += otherValue
        }
    }

    /// Counts an answered request in `relay_requests_total{route,status}`.
    func addRequest(route: String, status: Int) {
        counters.withLock { $0.requests[RequestKey(route: route, status: status), default: 0] += 1 }
    }

    /// The counters, then `gauges`, then `families`: gauges with one series per set of labels (names and
    /// values as they are; the values are escaped here).
    func text(
        gauges: [(name: String, help: String, value: Double)],
        families: [(name: String, help: String, series: [(labels: [(String, String)], value: Double)])] = []
    ) -> String {
        var values = counters.withLock { $0.named }
        for (key, count) in counters.withLock({ $0.requests }) {
            values["relay_requests_total{route=\"\(key.route)\",status=\"\(key.status)\"}", default: 0] += count
        }
        var lines: [String] = []
        let help: [String: String] = [
            "relay_requests_total": "HTTP requests answered, by route and status.",
            "relay_pushes_total": "Segment pushes, by outcome (stored, duplicate, refused).",
            "relay_stored_bytes_total": "Segment bytes stored.",
            "relay_pulled_segments_total": "Segments sent in pull answers.",
            "relay_refusals_total": "Requests refused, by error code.",
            "relay_progress_records_total": "Progress records stored (each replaces its node's last one).",
            "relay_baselines_total": "Baseline uploads, by outcome (stored, duplicate).",
            "relay_baseline_bytes_total": "Baseline bytes stored.",
            "relay_deleted_segments_total": "Segments deleted by their nodes (pruning).",
            "relay_deleted_baselines_total": "Baselines deleted by their nodes.",
        ]
        for family in help.keys.sorted() {
            lines.append("# HELP \(family) \(help[family]!)")
            lines.append("# TYPE \(family) counter")
            for (name, value) in values.sorted(by: { $0.key < $1.key }) where name == family || name.hasPrefix(family + "{") {
                lines.append("\(name) \(format(value))")
            }
        }
        for gauge in gauges {
            lines.append("# HELP \(gauge.name) \(gauge.help)")
            lines.append("# TYPE \(gauge.name) \(gauge.name.hasSuffix("_total") ? "counter" : "gauge")")
            lines.append("\(gauge.name) \(format(gauge.value))")
        }
        for family in families where !family.series.isEmpty {
            lines.append("# HELP \(family.name) \(family.help)")
            lines.append("# TYPE \(family.name) gauge")
            for series in family.series {
                let labels = series.labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",")
                lines.append("\(family.name){\(labels)} \(format(series.value))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A label value as the text format writes it: backslash, quote and newline escaped.
    private static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    private func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
