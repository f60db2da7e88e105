import LogsyncPlatform

/// Why `syncd` could not start, in words an operator can act on.
public struct DaemonError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        case alreadyRunning
        case socketInUse
        case setup
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
