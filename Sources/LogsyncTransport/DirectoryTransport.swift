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
///
/// Anyone may put anything in a shared folder, so every access goes through ``Directory``: the account
/// and node folders are opened without following links, only regular files are opened (never blocking,
/// never through a link), and whatever else carries a segment's or a node folder's name is reported with
/// what it is.
public struct DirectoryTransport: Transport {
    public let root: String
    public let account: String
    public let node: NodeID

    /// Opens the account folder under `root`, creating it and this node's folder if needed. `root` itself
    /// must exist: a missing shared folder is a configuration error, not something to create silently.
    /// `root` may be reached through links (the operator chose it); nothing inside it is.
    public init(root: String, account: String, node: NodeID) throws(TransportError) {
        guard Self.isSafeComponent(account) else {
            throw TransportError(.notFound, "account name '\(account.prefix(64))' cannot be a folder name (use letters, digits, '-', '_', '.')", path: root)
        }
        self.root = root
        self.account = account
        self.node = node
        let base: Directory
        do {
            base = try Directory.open(root, followingLink: true)
        } catch {
            throw TransportError(.notFound, "the shared folder \(root) does not exist or is not a directory; create it or fix the path", path: root, cause: error)
        }
        do {
            _ = try base.subdirectory(account, create: true).subdirectory(node.rawValue, create: true)
        } catch {
            throw TransportError(.io, "cannot create or open this node's folder \(nodeFolder(node))\(Self.hint(error))", path: nodeFolder(node), cause: error)
        }
    }

    public var accountFolder: String { root + "/" + account }

    public func nodeFolder(_ node: NodeID) -> String { accountFolder + "/" + node.rawValue }

    public func path(of name: SegmentName) -> String { nodeFolder(name.node) + "/" + name.fileName }

    /// The account folder, opened without following a link.
    private func openAccountFolder() throws(TransportError) -> Directory {
        do {
            return try Directory.open(accountFolder)
        } catch {
            throw TransportError(.notFound, "cannot open the account folder \(accountFolder)\(Self.hint(error))", path: accountFolder, cause: error)
        }
    }

    /// A node's folder, reached without following links.
    private func openNodeFolder(_ node: NodeID) throws(SystemError) -> Directory {
        try Directory.open(accountFolder).subdirectory(node.rawValue)
    }

    public func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) {
        let target = path(of: name)
        let temporary = "." + name.fileName + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
        let folder: Directory
        let result: Directory.PublishResult
        do {
            folder = try openNodeFolder(name.node)
            result = try folder.publish(bytes, as: name.fileName, temporaryName: temporary)
        } catch {
            let hint = error.isNoSpace ? " (the disk is full: free space, then sync again; nothing was lost)" : Self.hint(error)
            throw TransportError(.io, "cannot write segment \(target)\(hint)", path: target, cause: error)
        }
        guard result == .existed else { return }
        let existing: Directory.FileRead
        do {
            existing = try folder.read(name.fileName, maximumBytes: bytes.count)
        } catch {
            throw TransportError(.io, "cannot read back existing segment \(target)", path: target, cause: error)
        }
        switch existing {
        case .bytes(let existing) where existing == bytes:
            return
        case .notRegular(let kind):
            throw TransportError(
                .conflict, "\(target) already exists and is a \(kind), not a segment: remove it so this node can publish", path: target)
        case .bytes, .tooLarge:
            throw TransportError(
                .conflict,
                "segment \(target) already exists with different content: another machine may be using this node's id",
                path: target)
        }
    }

    public func scan(excluding excluded: NodeID) throws(TransportError) -> TransportScan {
        let folder = try openAccountFolder()
        let entries: [Directory.Entry]
        do {
            entries = try folder.entries()
        } catch {
            throw TransportError(.notFound, "cannot list the account folder \(accountFolder)", path: accountFolder, cause: error)
        }
        var segments: [SegmentName] = []
        var ignored: [IgnoredFile] = []
        for entry in entries.sorted(by: { $0.name < $1.name }) {
            let folderPath = accountFolder + "/" + entry.name
            guard SegmentName.isNodeFolderName(entry.name) else {
                if let reason = Self.classify(entry.name) { ignored.append(IgnoredFile(path: folderPath, reason: reason)) }
                continue
            }
            let node = NodeID(entry.name)
            guard node != excluded else { continue }
            guard entry.kind == .directory else {
                ignored.append(IgnoredFile(path: folderPath, reason: .notADirectory(entry.kind)))
                continue
            }
            let files: [Directory.Entry]
            do {
                files = try folder.subdirectory(entry.name).entries()
            } catch {
                ignored.append(IgnoredFile(path: folderPath, reason: .unreadableFolder(Self.describe(error))))
                continue
            }
            for file in files {
                if let name = SegmentName.parse(fileName: file.name, node: node) {
                    if file.kind == .regular {
                        segments.append(name)
                    } else {
                        ignored.append(IgnoredFile(path: folderPath + "/" + file.name, reason: .notRegularFile(file.kind), segment: name))
                    }
                } else if let reason = Self.classify(file.name) {
                    ignored.append(IgnoredFile(path: folderPath + "/" + file.name, reason: reason))
                }
            }
        }
        return TransportScan(segments: segments.sorted(), ignored: ignored.sorted { $0.path < $1.path })
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        let target = path(of: name)
        let read: Directory.FileRead
        do {
            read = try openNodeFolder(name.node).read(name.fileName, maximumBytes: maximumBytes)
        } catch {
            throw TransportError(.io, "cannot read segment \(target)\(Self.hint(error))", path: target, cause: error)
        }
        switch read {
        case .bytes(let bytes):
            return bytes
        case .tooLarge(let size):
            throw TransportError(.tooLarge, "segment \(target) is \(size) bytes, larger than the \(maximumBytes)-byte limit", path: target)
        case .notRegular(let kind):
            throw TransportError(
                .notRegularFile, "\(target) is a \(kind), not a regular file: only regular files are read from the shared folder", path: target)
        }
    }

    /// What an operator should know about a failed access in the shared folder, beyond errno.
    private static func hint(_ error: SystemError) -> String {
        switch error.errno {
        case ELOOP: return " (\(error.path ?? "it") is a symbolic link: links inside the shared folder are not followed; remove it)"
        case ENOTDIR: return " (\(error.path ?? "it") is not a directory)"
        default: return ""
        }
    }

    private static func describe(_ error: SystemError) -> String {
        switch error.errno {
        case ELOOP: return "it is a symbolic link, which is not followed"
        case ENOTDIR: return "it is not a directory"
        default: return error.description
        }
    }

    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let folder = accountFolder
        let watch = DirectoryWatch(directory: folder, followingLink: false)
        let interval = Int32(clamping: rescanInterval.components.seconds * 1000 + rescanInterval.components.attoseconds / 1_000_000_000_000_000)
        continuation.onTermination = { _ in watch?.stop() }
        let thread = Thread {
            var watched = Set<String>()
            while true {
                // New node folders appear over time; watch each one once, before telling the consumer to
                // scan, so nothing published after the scan goes unnoticed.
                if let watch, let entries = try? Directory.open(folder).entries() {
                    for entry in entries
                    where entry.kind == .directory && SegmentName.isNodeFolderName(entry.name) && watched.insert(entry.name).inserted {
                        watch.add(directory: folder + "/" + entry.name)
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

    /// Why `name` cannot be an account (a folder name in the shared folder), or nil when it can: 1 to 128
    /// ASCII letters, digits, '-', '_' and '.', not starting with '.'.
    public static func accountNameProblem(_ name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.utf8.count > 128 { return "is \(name.utf8.count) bytes long; an account name has at most 128" }
        guard name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }) else {
            return "has characters other than letters, digits, '-', '_' and '.' (it names a folder in the shared folder)"
        }
        if name.hasPrefix(".") { return "starts with '.' (\(name == "." || name == ".." ? "it would name another folder" : "readers ignore dot folders"))" }
        return nil
    }

    static func isSafeComponent(_ name: String) -> Bool { accountNameProblem(name) == nil }
}
