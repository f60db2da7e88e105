import ArgumentParser
import Foundation
import LogsyncPlatform

/// A timed step run in a child copy of this executable, so that its peak RSS is the step's alone.
///
/// The parent runs `logsync-bench <suite> <hidden child options>`; the child does the step, then calls
/// ``finish(seconds:)``, which prints its seconds and its own `VmHWM` on stdout. `getrusage` of the children
/// would not do: it would report the parent's peak, since the child is spawned from the parent's address
/// space and Linux keeps that peak across the exec.
enum MeasuredChild {
    /// Runs this executable with `arguments` and returns the seconds and peak RSS (KiB) the child printed.
    /// `what` names the step in the error when the child fails.
    static func run(_ arguments: [String], what: String) throws -> (seconds: Double, peakKiB: Int) {
        let (status, data) = try ChildProcess.run(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path, arguments)
        let fields = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard status == 0, fields.count == 2, let seconds = Double(fields[0]), let peak = Int(fields[1]) else {
            throw BenchError("the \(what) child failed (exit \(status)): \(String(decoding: data, as: UTF8.self))")
        }
        return (seconds, peak)
    }

    /// In the child, at the end: its memory on stderr, then its seconds and peak RSS on stdout for ``run(_:what:)``.
    static func finish(seconds: Double) throws {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let memory = status.split(separator: "\n").filter { $0.hasPrefix("RssAnon") || $0.hasPrefix("RssFile") || $0.hasPrefix("VmHWM") }
        Report.progress("    child at the end: " + memory.map { $0.replacingOccurrences(of: "\t", with: " ").split(separator: " ").joined(separator: " ") }.joined(separator: ", "))
        print(seconds, try peakResidentKiB())
    }

    /// This process's peak resident set size in KiB (`VmHWM` in `/proc/self/status`).
    static func peakResidentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kib = Int(line.dropFirst("VmHWM:".count).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        else { throw BenchError("no VmHWM in /proc/self/status") }
        return kib
    }
}

/// The hidden options by which a suite runs itself as a ``MeasuredChild`` that builds a store at `store`
/// from what `folder` holds, expecting `rows` rows.
struct BuildChildOptions: ParsableArguments {
    @Option(help: .hidden) var childFolder: String?
    @Option(help: .hidden) var childStore: String?
    @Option(help: .hidden) var childRows: Int?

    /// What this child is asked to build; nil in the parent.
    var request: (folder: String, store: String, rows: Int)? {
        guard let childFolder, let childStore, let childRows else { return nil }
        return (childFolder, childStore, childRows)
    }

    /// The arguments that ask a child to build.
    static func arguments(folder: String, store: String, rows: Int) -> [String] {
        ["--child-folder", folder, "--child-store", store, "--child-rows", String(rows)]
    }
}
