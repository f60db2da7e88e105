import Foundation

/// A fresh directory per test under /tmp (short paths keep Unix socket names legal later), removed when
/// the value is deinitialized.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "t") throws {
        let base = "/tmp/lstest-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        path = base
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `text` to a file in this directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let target = file(name)
        try text.write(toFile: target, atomically: true, encoding: .utf8)
        return target
    }
}
