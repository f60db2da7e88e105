import LogsyncControl
import LogsyncPlatform
import LogsyncStore

/// Why `syncd` could not start, in words an operator can act on.
public struct DaemonError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        case alreadyRunning
        case socketInUse
        /// The store failed SQLite's check at start: syncing it could spread the damage.
        case damaged
        /// Another program changed the synced tables (`StoreError.Code.schemaDrift`): syncing would make
        /// nodes differ until the change is undone.
        case schemaDrift
        /// The folder for the control socket is not private (another user's, writable by others, a link).
        case unsafeRuntimeFolder
        case setup
    }

    public var code: Code
    public var message: String
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        guard let cause else { return message }
        let detail = String(describing: cause)
        return message.contains(detail) ? message : "\(message): \(detail)"
    }

    /// `syncd`'s exit status for this error (`docs/exit-codes.md`).
    public var exitStatus: Int32 {
        switch code {
        case .alreadyRunning: return ExitStatus.temporaryFailure
        case .damaged, .schemaDrift: return ExitStatus.dataError
        case .unsafeRuntimeFolder: return ExitStatus.notPermitted
        case .socketInUse: return ExitStatus.systemError
        case .setup: return cause.map(Self.startExitStatus) ?? ExitStatus.systemError
        }
    }

    /// `syncd`'s exit status for any error that stops its start: what a store said of itself decides (a
    /// file that is not a store is bad data, 65, like a damaged one), whichever step of the start met it;
    /// anything else is a system error.
    public static func startExitStatus(_ error: any Error) -> Int32 {
        switch error {
        case let daemon as DaemonError: return daemon.exitStatus
        case let store as StoreError where store.exitStatus != ExitStatus.failed: return store.exitStatus
        default: return ExitStatus.systemError
        }
    }
}
