import Foundation
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// ``ChildProcess``, which starts every child of the tests, the benchmarks and the tour.
@Suite("child processes")
struct ChildProcessTests {
    @Test("children start while this process holds 2,500 descriptors, and inherit none of them")
    func manyDescriptors() async throws {
        // Foundation's Process.run() (Swift 6.3.1) crashed CI here: it reads past glibc's readdir buffer
        // once the listing of /proc/self/fd fills it.
        let limit = DescriptorLimit.raise(to: 8_192)
        try #require(limit >= 3_000, "the test needs 3,000 file descriptors; the soft limit is \(limit)")
        var held: [Int32] = []
        defer { for descriptor in held { close(descriptor) } }
        for _ in 0..<2_500 {
            let descriptor = open("/dev/null", O_RDONLY)
            try #require(descriptor >= 0)
            held.append(descriptor)
        }
        for _ in 0..<20 {
            let listed = try await Subprocess.run("/bin/ls", ["/proc/self/fd"])
            #expect(listed.status == 0, "\(listed)")
            let descriptors = listed.stdout.split(separator: "\n").compactMap { Int32($0) }
            // 0, 1, 2, and the one ls lists the folder with.
            #expect(descriptors.count <= 4 && descriptors.allSatisfy { $0 < 4 }, "inherited: \(descriptors)")
        }
    }

    @Test("exit codes, signals, environment, /dev/null and the wait's deadline")
    func statusAndStreams() async throws {
        let exited = try ChildProcess("/bin/sh", ["-c", "exit 3"], standardInput: .null, standardOutput: .null)
        exited.waitUntilExit()
        #expect(exited.terminationStatus == 3 && !exited.endedBySignal && !exited.isRunning)

        let sleeping = try ChildProcess("/bin/sleep", ["30"], standardInput: .null)
        #expect(sleeping.isRunning && sleeping.terminationStatus == -1)
        #expect(!sleeping.wait(timeout: .milliseconds(50)), "still running after 50 ms")
        sleeping.terminate(SIGKILL)
        #expect(sleeping.wait(timeout: .seconds(10)))
        #expect(sleeping.terminationStatus == SIGKILL && sleeping.endedBySignal)
        sleeping.terminate()  // ended and reaped: nothing is sent

        let ran = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 4"], standardError: .null)
        #expect(ran.status == 4 && String(decoding: ran.output, as: UTF8.self) == "out\n", "\(ran)")

        let environment = try await Subprocess.run("/usr/bin/env", [], environment: ["ONLY": "this"])
        #expect(environment.stdout == "ONLY=this\n", "\(environment)")

        let missing = #expect(throws: SystemError.self) { try ChildProcess("/nonexistent/program", []) }
        #expect(missing?.errno == ENOENT, "\(String(describing: missing))")
    }

    @Test("stop: SIGTERM, and SIGKILL once the grace period has passed")
    func stopWithGrace() throws {
        let polite = try ChildProcess("/bin/sleep", ["30"], standardInput: .null)
        #expect(polite.stop(grace: .seconds(10)), "sleep ends on SIGTERM")
        #expect(polite.terminationStatus == SIGTERM && polite.endedBySignal)
        #expect(polite.stop(grace: .seconds(10)), "an ended child stops at once")

        // A shell that ignores SIGTERM and says so once it does: only SIGKILL ends it.
        let output = try ChildProcess.pipe()
        let stubborn = try ChildProcess(
            "/bin/sh", ["-c", "trap '' TERM; echo ready; while :; do sleep 1; done"], standardInput: .null,
            standardOutput: .descriptor(output.write.fileDescriptor))
        try output.write.close()
        #expect(String(decoding: ChildProcess.read(output.read), as: UTF8.self) == "ready\n")
        let started = ContinuousClock.now
        #expect(!stubborn.stop(grace: .milliseconds(300)), "the shell ignores SIGTERM")
        #expect(ContinuousClock.now - started >= .milliseconds(300), "the grace period was waited out")
        #expect(stubborn.terminationStatus == SIGKILL && stubborn.endedBySignal)
    }

    @Test("children start with no signal blocked or ignored, whatever this process ignores")
    func defaultSignals() async throws {
        // SIGUSR2 is no one's in the tests: ignored here while the child starts.
        let previous = signal(SIGUSR2, SIG_IGN)
        defer { signal(SIGUSR2, previous) }
        let sigusr2: UInt64 = 1 << (UInt64(SIGUSR2) - 1)
        #expect(try Self.masks(String(contentsOfFile: "/proc/self/status", encoding: .utf8))["SigIgn"].map { $0 & sigusr2 } == sigusr2)

        let status = try await Subprocess.run("/bin/grep", ["-E", "^Sig(Blk|Ign)", "/proc/self/status"])
        #expect(status.status == 0, "\(status)")
        let masks = Self.masks(status.stdout)
        // Signals 1 to 31; glibc keeps 32 and 33 for itself.
        #expect(masks["SigBlk"].map { $0 & 0x7fff_ffff } == 0, "\(status.stdout)")
        #expect(masks["SigIgn"].map { $0 & 0x7fff_ffff } == 0, "\(status.stdout)")
    }

    /// The `Sig…:` lines of a `/proc/PID/status`, as numbers.
    static func masks(_ status: String) -> [String: UInt64] {
        var masks: [String: UInt64] = [:]
        for line in status.split(separator: "\n") where line.hasPrefix("Sig") {
            let fields = line.split(separator: ":")
            guard fields.count == 2, let mask = UInt64(fields[1].trimmingCharacters(in: .whitespaces), radix: 16) else { continue }
            masks[String(fields[0])] = mask
        }
        return masks
    }
}
