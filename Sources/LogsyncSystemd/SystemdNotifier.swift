import CSystemd
import Foundation
import LogsyncPlatform

/// Tells the service manager how the daemon is doing (sd_notify): ready, status, watchdog pings,
/// reloading, stopping. Every call is a no-op when not started by systemd (no `NOTIFY_SOCKET`).
public struct SystemdNotifier: Sendable {
    public init() {}

    /// Whether a service manager listens (NOTIFY_SOCKET is set).
    public var isActive: Bool { ProcessInfo.processInfo.environment["NOTIFY_SOCKET"] != nil }

    /// The watchdog interval systemd expects pings within (`WatchdogSec=`), or nil.
    public var watchdogInterval: Duration? {
        var microseconds: UInt64 = 0
        guard csystemd_watchdog_enabled(&microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds))
    }

    public func ready(status: String? = nil) { send(["READY=1"] + (status.map { ["STATUS=\(Self.oneLine($0))"] } ?? [])) }

    public func status(_ text: String) { send(["STATUS=\(Self.oneLine(text))"]) }

    public func watchdog() { send(["WATCHDOG=1"]) }

    /// Before re-reading the configuration; follow with ``ready(status:)``. systemd 252 does not wait for
    /// this (that is `Type=notify-reload`, 253+); `ExecReload=syncctl reload` waits instead.
    public func reloading() {
        send(["RELOADING=1", "MONOTONIC_USEC=\(MonotonicClock.microseconds())"])
    }

    public func stopping() { send(["STOPPING=1"]) }

    private func send(_ assignments: [String]) {
        _ = csystemd_notify(assignments.joined(separator: "\n"))
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0 == "\n" ? " " : $0 })
    }
}
