import Foundation
import LogsyncPlatform

/// Prometheus's own parser of the text exposition format (PyPI's `prometheus_client`), run on text a test
/// scraped: what a real scraper would make of it, not what a hand-written reader expects.
///
/// The Python that has it: `LOGSYNC_TEST_PYTHON`, else the test suite's virtual environment
/// (`.build/test-venv`, which `scripts/test.sh` makes), else `python3` if it can import the module.
public enum PrometheusParser {
    /// One sample: its name (with `_total`, `_sum`, … as scraped), labels and value.
    public struct Sample: Sendable, Hashable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    /// The Python that can import `prometheus_client`, or nil.
    public static let python: String? = {
        var candidates = [Products.packageRoot + "/.build/test-venv/bin/python3", "/usr/bin/python3"]
        if let chosen = ProcessInfo.processInfo.environment["LOGSYNC_TEST_PYTHON"] { candidates.insert(chosen, at: 0) }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
            guard let child = try? ChildProcess(candidate, ["-c", "import prometheus_client"], standardOutput: .null, standardError: .null),
                child.wait(timeout: .seconds(60)), child.terminationStatus == 0
            else { continue }
            return candidate
        }
        return nil
    }()

    /// Why no parser is there, for a test's `.enabled(if:)`; in CI (`CI` set) its absence is a failure
    /// of the setup, not a reason to skip.
    public static var missing: String {
        "prometheus_client is not installed (scripts/test.sh puts it in .build/test-venv; or set LOGSYNC_TEST_PYTHON)"
    }

    /// Parses `text` with `prometheus_client.parser.text_string_to_metric_families`; throws with the
    /// parser's own message when it refuses the text. Returns the families' types by name, and every sample.
    public static func parse(_ text: String) async throws -> (types: [String: String], samples: [Sample]) {
        guard let python else { throw SubprocessError.exited(status: -1, stdout: "", stderr: missing) }
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            families = list(text_string_to_metric_families(sys.stdin.read()))
            print(json.dumps({
                "types": {f.name: f.type for f in families},
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for f in families for s in f.samples],
            }))
            """
        let child = try Subprocess(python, ["-c", script])
        try child.send(text)
        try child.closeInput()
        let status = try await child.waitForExit()
        guard status == 0, let object = try JSONSerialization.jsonObject(with: Data(child.stdout.utf8)) as? [String: Any] else {
            throw SubprocessError.exited(status: status, stdout: child.stdout, stderr: child.stderr)
        }
        let types = object["types"] as? [String: String] ?? [:]
        let samples = (object["samples"] as? [[String: Any]] ?? []).map { sample in
            Sample(
                name: sample["name"] as? String ?? "", labels: sample["labels"] as? [String: String] ?? [:],
                value: (sample["value"] as? NSNumber)?.doubleValue ?? .nan)
        }
        return (types, samples)
    }
}
