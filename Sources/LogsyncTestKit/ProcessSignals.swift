import Foundation

/// What the kernel says of a process's signal masks (`/proc/PID/task/TID/status`), for tests that must
/// signal a process only once it says it can take the signal: a signal that arrives before `main` runs
/// gets the default action, which no program can change, so a test that signals a child after a fixed
/// delay tests the machine's speed instead of the program.
public enum ProcessSignals {
    /// The mask with a bit for each of `signals` (bit `n - 1` for signal `n`, as the kernel prints it).
    public static func mask(_ signals: [Int32]) -> UInt64 {
        signals.reduce(UInt64(0)) { $0 | 1 << UInt64($1 - 1) }
    }

    /// The threads of process `pid`.
    public static func threads(of pid: Int32) throws -> [Int32] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { Int32($0) }
    }

    /// The signals thread `thread` of process `pid` blocks (its main thread when `thread` is nil); nil
    /// when the process or thread is gone.
    public static func blocked(pid: Int32, thread: Int32? = nil) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread ?? pid)/status", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
            .flatMap { UInt64($0.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16) }
    }

    /// Waits until the main thread of process `pid` blocks every one of `signals`: from then on the
    /// process decides what they do.
    public static func awaitBlocked(_ signals: [Int32], pid: Int32, within timeout: Duration = .seconds(60)) async throws {
        let wanted = mask(signals)
        try await eventually(within: timeout, every: .milliseconds(1), "process \(pid) to block signals \(signals)") {
            (blocked(pid: pid) ?? 0) & wanted == wanted
        }
    }
}
