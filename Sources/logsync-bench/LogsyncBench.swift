import ArgumentParser
import LogsyncCore

/// `logsync-bench SUITE [--quick]`: measures logsync against plain SQLite baselines taken in the same run.
///
/// Output contract (other tools parse it): stdout carries exactly one JSON object per line per metric, with
/// keys in the order `suite, metric, value, unit, goal, better` (see `Report.swift`); everything meant for
/// people goes to stderr.
///
/// Adding a suite: write a `ParsableCommand` in a file of its own (like `CaptureSuite.swift`), take
/// `@OptionGroup var options: SuiteOptions`, report through ``Report``, and list it in `subcommands` below.
@main
struct LogsyncBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-bench",
        abstract: "Benchmarks for logsync, each against a plain SQLite baseline measured in the same run.",
        discussion: """
            stdout: one JSON object per line per metric, keys in the order \
            suite, metric, value, unit, goal, better. Progress goes to stderr.

            Exit statuses (docs/exit-codes.md): 0 every metric measured (a missed goal is data, not a \
            failure); 1 a run failed (a precondition, a daemon that did not converge); 64 bad command line; \
            69 an executable a suite starts (syncd, sync-relay) is not built.
            """,
        version: LogsyncVersion.current,
        subcommands: [
            CaptureSuite.self,
            ReplaySuite.self,
            StallSuite.self,
            LatencySuite.self,
            ScaleSuite.self,
            RelaySuite.self,
            RebuildSuite.self,
            BootstrapSuite.self,
            UpgradeSuite.self,
            SoakSuite.self,
            SealSuite.self,
        ])
}

/// Options every suite takes.
struct SuiteOptions: ParsableArguments {
    @Flag(help: "Scale sizes and rounds down for a fast smoke run; the figures are noisier.")
    var quick = false
}
