import Foundation
import LogsyncCore
import LogsyncPlatform

/// Ships segments through a folder that every node can read and write: a local directory, an NFS
/// mount, or a folder that Syncthing or Dropbox keeps in step.
///
/// Layout: `<root>/<account>/<node id>/<first>-<last>.lseg`. Each node writes only its own folder. A
/// segment is written to `.<name>.<random>.tmp` in that folder (readers ignore dot files), fsynced, moved
/// into place without replacing anything, and the folder is fsynced. Readers take only exact segment
/// names and report the rest; nothing here ever deletes a file.
public struct DirectoryTransport: Transport {
    public let root: String
    public let account: String
    public let node: NodeID

    /// Opens the account folder under `root`, creating it and this node's folder if needed. `root` itself
    /// must exist: a missing shared folder is a configuration error, not something to create silently.
    public init(root: String, account: String, node: NodeID) throws(TransportError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw TransportError(.notFound, "the shared folder \(root) does not exist or is not a directory; create it or fix the path", path: root)
        }
        guard Self.isSafeComponent(account) else {
            throw TransportError(.notFound, "account name '\(account)' cannot be a folder name (use letters, digits, '-', '_', '.')", path: root)
        }
        self.root = root
        self.account = account
        self.node = node
        do {
            try DurableFiles.makeDirectories(nodeFolder(node))
        } catch {
            throw TransportError(.io, "cannot create this node's folder in \(accountFolder)", path: accountFolder, cause: error)
        }
    }

    public var accountFolder: String { root + "/" + account }

    public func nodeFolder(_ node: NodeID) -> String { accountFolder + "/" + node.rawValue }

    public func path(of name: SegmentName) -> String { nodeFolder(name.node) + "/" + name.fileName }

    public func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) {
        let target = path(of: name)
        let temporary = nodeFolder(name.node) + "/." + name.fileName + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
        let result: DurableFiles.PublishResult
        do {
            result = try DurableFiles.publish(bytes, at: target, temporaryPath: temporary)
        } catch {
            let hint = error.isNoSpace ? " (the disk is full: free space, then sync again; nothing was lost)" : ""
            throw TransportError(.io, "cannot write segment \(target)\(hint)", path: target, cause: error)
        }
        guard result == .existed else { return }
        let existing: [UInt8]?
        do {
            existing = try DurableFiles.read(target, maximumBytes: bytes.count)
        } catch {
            throw TransportError(.io, "cannot read back existing segment \(target)", path: target, cause: error)
        }
        guard existing == bytes else {
            throw TransportError(
                .conflict,
                "segment \(target) already exists with different content: another machine may be using this node's id",
                path: target)
        }
    }

    public func scan(excluding excluded: NodeID) throws(TransportError) -> TransportScan {
        let folders: [String]
        do {
            folders = try FileManager.default.contentsOfDirectory(atPath: accountFolder)
        } catch {
            throw TransportError(.notFound, "cannot list the account folder \(accountFolder)", path: accountFolder, cause: SendableError(error))
        }
        var segments: [SegmentName] = []
        var ignored: [IgnoredFile] = []
        for folder in folders.sorted() {
            let folderPath = accountFolder + "/" + folder
            guard SegmentName.isNodeFolderName(folder) else {
                if let reason = Self.classify(folder) { ignored.append(IgnoredFile(path: folderPath, reason: reason)) }
                continue
            }
            let node = NodeID(folder)
            guard node != excluded else { continue }
            guard let files = try? FileManager.default.contentsOfDirectory(atPath: folderPath) else { continue }
            for file in files {
                if let name = SegmentName.parse(fileName: file, node: node) {
                    segments.append(name)
                } else if let reason = Self.classify(file) {
                    ignored.append(IgnoredFile(path: folderPath + "/" + file, reason: reason))
                }
            }
        }
        return TransportScan(segments: segments.sorted(), ignored: ignored.sorted { $0.path < $1.path })
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        let target = path(of: name)
        let bytes: [UInt8]?
        do {
            bytes = try DurableFiles.read(target, maximumBytes: maximumBytes)
        } catch {
            throw TransportError(.io, "cannot read segment \(target)", path: target, cause: error)
        }
        guard let bytes else {
            throw TransportError(.tooLarge, "segment \(target) is larger than the \(maximumBytes)-byte limit", path: target)
        }
        return bytes
    }

    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let folder = accountFolder
        let watch = DirectoryWatch(directory: folder)
        let interval = Int32(clamping: rescanInterval.components.seconds * 1000 + rescanInterval.components.attoseconds / 1_000_000_000_000_000)
        continuation.onTermination = { _ in watch?.stop() }
        let thread = Thread {
            var watched = Set<String>()
            while true {
                // New node folders appear over time; watch each one once, before telling the consumer to
                // scan, so nothing published after the scan goes unnoticed.
                if let watch, let folders = try? FileManager.default.contentsOfDirectory(atPath: folder) {
                    for name in folders where SegmentName.isNodeFolderName(name) && watched.insert(name).inserted {
                        watch.add(directory: folder + "/" + name)
                    }
                }
                // The first wake-up comes at once: a consumer scans when it starts.
                if case .terminated = continuation.yield(()) { break }
                if let watch {
                    if watch.wait(timeoutMilliseconds: max(interval, 1)) == .stopped { break }
                } else {
                    Thread.sleep(forTimeInterval: Double(max(interval, 1)) / 1000)
                }
            }
            continuation.finish()
        }
        thread.name = "logsync.directory-transport"
        thread.start()
        return stream
    }

    /// Why a name that is not a segment is ignored, or nil for names not worth reporting.
    static func classify(_ name: String) -> IgnoredFile.Reason? {
        if name.contains(".sync-conflict-") || name.contains("conflicted copy") { return .conflictCopy }
        if name.hasPrefix(".") || name.hasPrefix("~") || name.hasSuffix(".tmp") || name.hasSuffix(".partial") {
            return .temporary
        }
        return .unknownName
    }

    static func isSafeComponent(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 128 && name != "." && name != ".." && !name.hasPrefix(".")
            && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }
}

/// Carries a Foundation error's text across a `Sendable` boundary.
struct SendableError: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ error: any Error) { description = error.localizedDescription }
}
