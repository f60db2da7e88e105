import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncTestKit

/// `logsync-bench relay --backend postgres`: two relays on one throwaway PostgreSQL cluster (loopback,
/// Unix socket). Pushes per second from 64 pushers spread over both, next to `pgbench` one-row inserts
/// from as many clients on the same database in the same run; one push on relay A to 1,000 long-polls on
/// relay B; single cross-relay wake-ups; the relays' and the database's CPU per push; and a load run of
/// simulated nodes over both relays (`load_*` metrics).
extension RelaySuite {
    func runPostgres() throws {
        let quick = options.quick
        let pushesPerPusher = quick ? 60 : 300
        let fanOutRounds = quick ? 3 : 10
        let wakeSamples = quick ? 40 : 200
        let load = LoadPlan(nodes: 2_000, accounts: 100, seconds: quick ? 15 : 60, pushesPerSecond: quick ? 200 : 400)
        if quick {
            Report.progress(
                "--quick: \(pushesPerPusher) pushes per pusher instead of 300, \(fanOutRounds) fan-out rounds instead of 10, \(wakeSamples) wake-ups instead of 200, a \(load.seconds) s load run instead of 60 s")
        }
        raiseFileLimit()
        let syncd = try LatencySuite.locateSyncd()
        let relayExecutable = URL(fileURLWithPath: syncd).deletingLastPathComponent().path + "/sync-relay"
        guard FileManager.default.isExecutableFile(atPath: relayExecutable), PostgresServer.installed else {
            Report.progress("error: needs sync-relay next to syncd (\(relayExecutable)) and PostgreSQL (scripts/install-deps.sh)")
            throw ExitCode(ExitStatus.unavailable)
        }
        let server = try runBlocking { try await PostgresServer.start("benchpg") }
        defer { try? runBlocking { try await server.stop() } }
        let database = try runBlocking { try await server.createDatabase("bench") }
        let config = try server.directory.write("sync-relay.toml", server.relayConfiguration(database: database, extra: "max_connections = 16\n"))
        let a = try BenchRelay(executable: relayExecutable, store: ["--config", config])
        defer { a.stop() }
        let b = try BenchRelay(executable: relayExecutable, store: ["--config", config], createAccounts: false)
        defer { b.stop() }
        let databaseCPU = { Self.postgresCPUSeconds(dataDirectory: server.dataDirectory) }
        Report.progress("relay (postgres): relays A \(a.url) and B \(b.url) on PostgreSQL \(server.socketDirectory) port \(server.port); \(ProcessInfo.processInfo.activeProcessorCount) cores")

        let (rate, cpu) = try measurePushes(relays: [a, b], perPusher: pushesPerPusher, databaseCPU: databaseCPU)
        let ceiling = try pgbench(server: server, database: database, clients: Self.pushers, seconds: quick ? 5 : 15)
        Report.progress("  pgbench, \(Self.pushers) clients of one-row inserts (\(Self.segmentSizedRow) bytes) on the same database: \(grouped(Int(ceiling))) transactions/s")
        Report.emit(metric("pushes_per_s", rate, unit: "pushes/s", goal: 10_000, .higher, decimals: 0))
        Report.emit(metric("pgbench_inserts_per_s", ceiling, unit: "tx/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("pushes_vs_pgbench", rate / max(ceiling, 1), unit: "x", goal: 0.5, .higher))
        Report.emit(metric("relay_cpu_us_per_push", cpu.relay, unit: "µs", goal: nil, .lower, decimals: 1))
        Report.emit(metric("database_cpu_us_per_push", cpu.database, unit: "µs", goal: nil, .lower, decimals: 1))
        try emitSealedPushes(relays: [a, b], perPusher: pushesPerPusher, databaseCPU: databaseCPU, plainRate: rate)

        let fanOut = try measureFanOut(waitOn: b, pushTo: a, rounds: fanOutRounds)
        Report.progress("  fan-out of one push on A to \(Self.waiters) long-polls on B, \(fanOut.count) answers: " + LatencySuite.summary(fanOut, timeouts: 0))
        Report.emit(metric("longpoll_p50_ms", Stats.percentile(fanOut, 50), unit: "ms", goal: nil, .lower))
        Report.emit(metric("longpoll_p99_ms", Stats.percentile(fanOut, 99), unit: "ms", goal: 100, .lower))

        Report.progress("cross-relay wake-ups: one long-poll on B, one push on A, \(wakeSamples) times")
        let wakes = try measureFanOut(waitOn: b, pushTo: a, rounds: wakeSamples, waiters: 1, quiet: true)
        Report.progress("  " + LatencySuite.summary(wakes, timeouts: 0))
        Report.emit(metric("cross_relay_wake_p50_ms", Stats.percentile(wakes, 50), unit: "ms", goal: 10, .lower))
        Report.emit(metric("cross_relay_wake_p99_ms", Stats.percentile(wakes, 99), unit: "ms", goal: nil, .lower))

        // The load run on two relays of its own, started now: their memory is the load's alone.
        a.stop()
        b.stop()
        let loadA = try BenchRelay(executable: relayExecutable, store: ["--config", config], createAccounts: false)
        defer { loadA.stop() }
        let loadB = try BenchRelay(executable: relayExecutable, store: ["--config", config], createAccounts: false)
        defer { loadB.stop() }
        let result = try LoadRun(plan: load, relays: [loadA, loadB]).run()
        Report.emit(metric("load_push_p50_ms", result.pushP50, unit: "ms", goal: nil, .lower))
        Report.emit(metric("load_push_p99_ms", result.pushP99, unit: "ms", goal: nil, .lower))
        Report.emit(metric("load_wake_p50_ms", result.wakeP50, unit: "ms", goal: nil, .lower))
        Report.emit(metric("load_wake_p99_ms", result.wakeP99, unit: "ms", goal: nil, .lower))
        Report.emit(metric("load_errors", Double(result.errors), unit: "requests", goal: 0, .lower, decimals: 0))
        Report.emit(metric("load_relay_peak_rss_mb", result.peakResidentMegabytes, unit: "MB", goal: nil, .lower, decimals: 1))
        Report.emit(metric("idle_longpoll_kb", result.kilobytesPerIdlePoll, unit: "KB", goal: 16, .lower, decimals: 1))
    }

    /// Bytes of the row pgbench inserts: about a small segment's.
    static let segmentSizedRow = 600

    /// `pgbench` one-row inserts (a `bytea` of a small segment's size, one row per transaction) from
    /// `clients` connections for `seconds`: transactions per second.
    func pgbench(server: PostgresServer, database: String, clients: Int, seconds: Int) throws -> Double {
        _ = try runBlocking { try await server.sql("CREATE TABLE IF NOT EXISTS pgbench_rows(id bigserial PRIMARY KEY, body bytea NOT NULL)", database: database) }
        let script = try server.directory.write(
            "insert.sql", "INSERT INTO pgbench_rows(body) VALUES (decode(repeat('ab', \(Self.segmentSizedRow)), 'hex'));\n")
        let tool = URL(fileURLWithPath: PostgresServer.binDirectory ?? "").appendingPathComponent("pgbench").path
        let (status, output) = try ChildProcess.run(
            tool,
            ["-n", "-c", String(clients), "-j", "2", "-T", String(seconds), "-f", script, "-h", server.socketDirectory, "-p", String(server.port), "-U", "postgres", database],
            standardError: .null)
        let text = String(decoding: output, as: UTF8.self)
        guard status == 0, let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = Double(line.split(separator: " ")[2])
        else { throw BenchError("pgbench failed (\(status)): \(text)") }
        return tps
    }

    /// CPU seconds of the PostgreSQL server whose data is in `dataDirectory`: its postmaster with the
    /// children it reaped, and the children alive now.
    static func postgresCPUSeconds(dataDirectory: String) -> Double {
        guard let pidText = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
            let postmaster = pidText.split(separator: "\n").first.flatMap({ Int32($0) })
        else { return 0 }
        var total = ProcessCPU.seconds(postmaster, includingReaped: true)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), pid != postmaster, ProcessCPU.parent(pid) == postmaster else { continue }
            total += ProcessCPU.seconds(pid, includingReaped: false)
        }
        return total
    }
}

/// CPU time with the children a process reaped, parents, and memory, from /proc.
extension ProcessCPU {
    static func parent(_ pid: Int32) -> Int32? {
        let fields = fields(pid)
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    /// utime + stime (+ cutime + cstime: children waited for), in seconds.
    static func seconds(_ pid: Int32, includingReaped: Bool) -> Double {
        let fields = fields(pid)
        guard fields.count > 14 else { return 0 }
        let ticks = (11...(includingReaped ? 14 : 12)).compactMap { Double(fields[$0]) }.reduce(0, +)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The peak resident set (VmHWM) of a process, in kB, and its current one (VmRSS).
    static func memory(_ pid: Int32) -> (peak: Int, now: Int) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        func value(_ key: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(key) }.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        }
        return (value("VmHWM:"), value("VmRSS:"))
    }
}
