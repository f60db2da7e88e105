import CSystemd
import Foundation
import Logging
import LogsyncPlatform
import Synchronization

/// A swift-log handler for daemons: structured entries to the journal when stderr is connected to it
/// (systemd sets `JOURNAL_STREAM`), plain lines on stderr otherwise.
///
/// Journal entries carry `PRIORITY` from the log level, `SYSLOG_IDENTIFIER`, `MESSAGE`, the message id
/// given as metadata `message_id` (a stable 128-bit id per event kind, so `journalctl MESSAGE_ID=…`
/// finds every occurrence), and every other metadata key upper-cased (`NODE`, `SEGMENT`, …).
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    /// The level of every logger the process made with this handler: one ``LogLevelSetting`` they share,
    /// so a reload changes it for all of them.
    public var logLevel: Logger.Level {
        get { level.level }
        set { level.configure(newValue) }
    }
    private let level: LogLevelSetting
    private let label: String
    private let identifier: String
    private let toJournal: Bool

    public init(label: String, identifier: String, level: LogLevelSetting = LogLevelSetting()) {
        self.label = label
        self.identifier = identifier
        self.level = level
        self.toJournal = Self.stderrIsJournal()
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        if toJournal {
            sendToJournal(event.level, "\(event.message)", fields)
        } else {
            var line = "\(identifier)[\(event.level)]: \(event.message)"
            let details = fields.filter { $0.key != "message_id" }.sorted { $0.key < $1.key }
            if !details.isEmpty { line += " (" + details.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") + ")" }
            line += "\n"
            StandardError.write(Array(line.utf8))
        }
    }

    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    private func sendToJournal(_ level: Logger.Level, _ message: String, _ fields: Logger.Metadata) {
        var entries = [
            "MESSAGE=\(message)", "PRIORITY=\(Self.priority(level))", "SYSLOG_IDENTIFIER=\(identifier)", "LOGGER=\(label)",
        ]
        for (key, value) in fields {
            let name = key == "message_id" ? "MESSAGE_ID" : Self.fieldName(key)
            entries.append("\(name)=\(value)")
        }
        let buffers = entries.map { Array($0.utf8) }
        var pointers: [UnsafeMutableRawPointer] = []
        defer { pointers.forEach { $0.deallocate() } }
        var vectors: [iovec] = []
        for bytes in buffers {
            let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            bytes.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            pointers.append(pointer)
            vectors.append(iovec(iov_base: pointer, iov_len: bytes.count))
        }
        _ = vectors.withUnsafeBufferPointer { csystemd_journal_sendv($0.baseAddress, Int32($0.count)) }
    }

    /// Journal field names: upper-case ASCII letters, digits and underscores, not starting with one.
    static func fieldName(_ key: String) -> String {
        var name = String(key.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
        while name.hasPrefix("_") { name.removeFirst() }
        return name.isEmpty ? "FIELD" : name
    }

    /// systemd sets JOURNAL_STREAM to stderr's "device:inode" when stderr goes to the journal.
    static func stderrIsJournal() -> Bool {
        guard let value = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] else { return false }
        return StandardError.isStream(value)
    }
}

/// Stable ids for the events operators look for: `journalctl MESSAGE_ID=<id>`.
public enum MessageID {
    public static let ready = "8a2e4b3c1d5f4e6a9b7c0d1e2f3a4b5c"
    public static let stopping = "1f2e3d4c5b6a47988776655443322110"
    public static let reloaded = "3c4d5e6f708192a3b4c5d6e7f8091a2b"
    public static let reloadFailed = "4d5e6f708192a3b4c5d6e7f8091a2b3c"
    public static let syncCompleted = "5e6f708192a3b4c5d6e7f8091a2b3c4d"
    public static let syncFailed = "6f708192a3b4c5d6e7f8091a2b3c4d5e"
    public static let quarantined = "708192a3b4c5d6e7f8091a2b3c4d5e6f"
    /// A node's segments wait: the next one is missing, not a regular file, rejected, or held.
    public static let waiting = "cc3b280f190443249c48793b4f6cb4d6"
    /// Something in the shared folder named like a segment or a node folder that is not one.
    public static let strayFile = "f1ed0b4ebb534e03a3264804f5257c64"
    /// A segment failed verification.
    public static let rejected = "49c75abc6d0840ee9343fedf870d3bee"
    /// The operator dropped a refused segment (`syncctl quarantine drop`): its transactions are never applied here.
    public static let dropped = "f6e31b6c0377480582526ce073487240"
    /// A control client was refused (too many) or dropped (it stopped reading).
    public static let clientRefused = "4324210d562e45a89fff89384e41e4ef"
    public static let clientDropped = "20d30d564c1b40aeb26f4b72ddc42e25"
    /// The store was found damaged; syncing stopped (or syncd refused to start).
    public static let damaged = "29eb065cc2b84cee9526e6fd209e99f2"
    /// An account switch started, reached a step, made progress rebuilding, or finished.
    public static let accountSwitch = "c1ff88a80bd54bd7b9fa66e3cc790b3d"
    /// A retired store was kept (changes not shipped, or held by a process), or shipped and deleted.
    public static let storeRetained = "f9cd6160a4d44d0da9c69df44c0e2827"
    /// Syncthing did not take a request to scan this node's folder (once per cause), or takes them again.
    public static let syncthingFailed = "797cb1480b23402c8ed4cae77358cb9a"
    public static let syncthingRecovered = "e10173c4ed6f415ab01e26fa392a32c0"
    /// sync-relay started with a new epoch: its database may hold less than it acknowledged (a restore).
    public static let relayEpochChanged = "fca7a2b7549e46f891a1c5a920df1e61"
    /// syncd found that its relay lost history (a new identity or epoch, or arrivals below its cursor):
    /// it pulled again from the start and pushed again what it still had.
    public static let relayReset = "caad8f0a3813446ab853d9ec30c99175"
    /// The store was behind its own node's history on the carrier (restored from an older backup) and
    /// took a new node id.
    public static let storeRestored = "5b0e3c7d2a9f4e61b8d47c0a93e1f256"
    /// A device of a sealed account was approved or revoked.
    public static let devices = "8d3f6a1e0b7c4e2a9f51c6d2e8b04a73"
    /// A peer writes with a newer schema than this node's app (once per peer and version).
    public static let newerSchema = "9ac294e804fa435e9fb6802718ca4db1"
}

/// The level below which a process logs nothing: from its configuration (`[log] level`), unless its
/// command line pinned one (`--log-level`), which configuration never overrides.
public final class LogLevelSetting: Sendable {
    private let state: Mutex<(level: Logger.Level, pinned: Bool)>

    public init(_ level: Logger.Level = .info, pinned: Bool = false) {
        state = Mutex((level, pinned))
    }

    public var level: Logger.Level { state.withLock { $0.level } }

    /// Takes `level` from configuration, unless the command line pinned one.
    public func configure(_ level: Logger.Level) {
        state.withLock { if !$0.pinned { $0.level = level } }
    }
}
