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
    /// What the folder holds as far as this transport knows, and what its watcher reported since: shared
    /// by every copy of the transport.
    let index = FolderIndex()
    /// Told the node folder after each segment is durable in it: how a carrier of the folder (Syncthing)
    /// is asked to ship it at once. Must return promptly; it runs on the publishing thread.
    let published: (@Sendable (String) -> Void)?

    /// Opens the account folder under `root`, creating it and this node's folder if needed. `root` itself
    /// must exist: a missing shared folder is a configuration error, not something to create silently.
    /// `root` may be reached through links (the operator chose it); nothing inside it is. `published` is
    /// called with this node's folder after each publish.
    public init(root: String, account: String, node: NodeID, published: (@Sendable (String) -> Void)? = nil) throws(TransportError) {
        guard Self.isSafeComponent(account) else {
            throw TransportError(.notFound, "account name '\(account.prefix(64))' cannot be a folder name (use letters, digits, '-', '_', '.')", path: root)
        }
        self.root = root
        self.account = account
        self.node = node
        self.published = published
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
        let temporary = temporaryName(for: name.fileName)
        let folder: Directory
        let result: Directory.PublishResult
        do {
            folder = try openNodeFolder(name.node)
            result = try folder.publish(bytes, as: name.fileName, temporaryName: temporary)
        } catch {
            let hint = error.isNoSpace ? " (the disk is full: free space, then sync again; nothing was lost)" : Self.hint(error)
            throw TransportError(.io, "cannot write segment \(target)\(hint)", path: target, cause: error)
        }
        guard result == .existed else {
            published?(nodeFolder(name.node))
            return
        }
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

    /// Lists the whole folder, whatever this transport knows (``refresh(excluding:)`` looks only at what
    /// changed).
    public func scan(excluding excluded: NodeID) throws(TransportError) -> TransportScan {
        let fresh = FolderIndex()
        let view = try fresh.state.withLock { (state: inout FolderIndex.State) throws(TransportError) -> TransportView in
            try refresh(&state, reports: WatchReports(), excluding: excluded)
        }
        let segments = fresh.state.withLock { state in
            state.folders.sorted { $0.key < $1.key }.flatMap { name, folder in
                folder.segments.map { SegmentName(node: NodeID(name), firstSequence: $0.first, lastSequence: $0.last) }
            }
        }
        return TransportScan(segments: segments, ignored: view.ignored)
    }

    /// Brings what this transport knows of other nodes' segments up to date by looking only at what may
    /// have changed (see ``FolderIndex``): with ``arrivals(rescanInterval:)`` running, the names its
    /// watcher reported, and every folder's status when a rescan is due; without it, every folder's
    /// status. The first refresh lists everything.
    public func refresh(excluding excluded: NodeID) throws(TransportError) -> TransportView {
        let reports = index.reports.withLock { $0.take() }
        return try index.state.withLock { (state: inout FolderIndex.State) throws(TransportError) -> TransportView in
            try refresh(&state, reports: reports, excluding: excluded)
        }
    }

    public func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName] {
        let account = try openAccountFolder()
        guard account.kind(of: node.rawValue) == .directory else { return [] }
        do {
            return try account.subdirectory(node.rawValue).entries().compactMap { file in
                file.kind == .regular ? SegmentName.parse(fileName: file.name, node: node) : nil
            }.sorted()
        } catch {
            throw TransportError(.notFound, "cannot list this node's folder \(accountFolder)/\(node)", path: accountFolder + "/" + node.rawValue, cause: error)
        }
    }

    public func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName] {
        index.state.withLock { state in
            state.folders[node.rawValue]?.segments(after: sequence).map { SegmentName(node: node, firstSequence: $0.first, lastSequence: $0.last) } ?? []
        }
    }

    /// What this transport did so far: listings, names looked at, files read.
    public var counters: TransportCounters { index.state.withLock { $0.counters } }

    private func refresh(_ state: inout FolderIndex.State, reports: WatchReports, excluding excluded: NodeID) throws(TransportError) -> TransportView {
        let account = try openAccountFolder()
        // Without a watcher every refresh is a rescan; with one, only when the interval passed.
        let rescan = reports.rescanDue || !reports.live
        if reports.rescanDue { state.rescans += 1 }
        let whole = reports.everything || (reports.rescanDue && state.rescans % FolderIndex.wholeRescanEvery == 0)
        if !state.accountListed || reports.accountChanged || rescan || whole {
            try listAccount(account, into: &state, excluding: excluded)
        }
        let now = Int64(WallClock.nanoseconds())
        var appeared: [SegmentName] = []
        for name in state.folders.keys.sorted() {
            guard var folder = state.folders[name] else { continue }
            let node = NodeID(name)
            var listing = whole || folder.stamp == nil || folder.unreadable != nil || reports.listWhole.contains(name)
            if !listing, rescan || !reports.watched.contains(name) {
                // Has it changed since it was listed, or was it listed too soon after a change to tell?
                let status = account.status(of: name)
                let racy = (folder.stamp?.modified ?? .max) >= folder.listedAt - FolderIndex.racyNanoseconds
                listing = status != folder.stamp || racy
            }
            if listing {
                list(name, of: node, in: account, now: now, into: &folder, appeared: &appeared, counters: &state.counters)
            } else if let names = reports.names[name], !names.isEmpty {
                look(at: names, of: node, in: account, into: &folder, appeared: &appeared, counters: &state.counters)
            }
            state.folders[name] = folder
        }
        var ignored = state.accountIgnored
        var nodes: [NodeID] = []
        for (name, folder) in state.folders.sorted(by: { $0.key < $1.key }) {
            ignored += folder.ignored.values
            if let unreadable = folder.unreadable { ignored.append(unreadable) }
            if !folder.segments.isEmpty || folder.ignored.values.contains(where: { $0.segment != nil }) { nodes.append(NodeID(name)) }
        }
        return TransportView(appeared: appeared, ignored: ignored.sorted { $0.path < $1.path }, nodes: nodes)
    }

    /// Lists the account folder: which node folders there are, and what else.
    private func listAccount(_ account: Directory, into state: inout FolderIndex.State, excluding excluded: NodeID) throws(TransportError) {
        let entries: [Directory.Entry]
        do {
            entries = try account.entries()
        } catch {
            throw TransportError(.notFound, "cannot list the account folder \(accountFolder)", path: accountFolder, cause: error)
        }
        state.counters.accountListings += 1
        var present = Set<String>()
        var ignored: [IgnoredFile] = []
        for entry in entries {
            let path = accountFolder + "/" + entry.name
            guard SegmentName.isNodeFolderName(entry.name) else {
                if let reason = Self.classify(entry.name) { ignored.append(IgnoredFile(path: path, reason: reason)) }
                continue
            }
            guard entry.name != excluded.rawValue else { continue }
            guard entry.kind == .directory else {
                ignored.append(IgnoredFile(path: path, reason: .notADirectory(entry.kind)))
                continue
            }
            present.insert(entry.name)
            if state.folders[entry.name] == nil { state.folders[entry.name] = NodeFolderState() }
        }
        for gone in Set(state.folders.keys).subtracting(present) { state.folders.removeValue(forKey: gone) }
        state.accountIgnored = ignored
        state.accountListed = true
    }

    /// Lists one node folder whole; segments not known before are added to `appeared`.
    private func list(
        _ name: String, of node: NodeID, in account: Directory, now: Int64, into folder: inout NodeFolderState, appeared: inout [SegmentName],
        counters: inout TransportCounters
    ) {
        let folderPath = accountFolder + "/" + name
        let stamp = account.status(of: name)
        let files: [Directory.Entry]
        do {
            files = try account.subdirectory(name).entries()
        } catch {
            folder = NodeFolderState()
            folder.unreadable = IgnoredFile(path: folderPath, reason: .unreadableFolder(Self.describe(error)))
            folder.stamp = stamp
            folder.listedAt = now
            return
        }
        counters.folderListings += 1
        counters.listedEntries += files.count
        var segments: [SequenceRange] = []
        var ignored: [String: IgnoredFile] = [:]
        for file in files {
            if let segment = SegmentName.parse(fileName: file.name, node: node) {
                if file.kind == .regular {
                    segments.append(SequenceRange(first: segment.firstSequence, last: segment.lastSequence))
                } else {
                    ignored[file.name] = IgnoredFile(path: folderPath + "/" + file.name, reason: .notRegularFile(file.kind), segment: segment)
                }
            } else if let reason = Self.classify(file.name) {
                ignored[file.name] = IgnoredFile(path: folderPath + "/" + file.name, reason: reason)
            }
        }
        segments.sort()
        // What is new: walk both sorted lists.
        var known = folder.segments[...]
        for range in segments {
            while let first = known.first, first < range { known.removeFirst() }
            if known.first == range { continue }
            appeared.append(SegmentName(node: node, firstSequence: range.first, lastSequence: range.last))
        }
        folder.segments = segments
        folder.ignored = ignored
        folder.unreadable = nil
        folder.stamp = stamp
        folder.listedAt = now
    }

    /// Looks at the names the watcher reported in one node folder, one `fstatat` each. A segment reported
    /// again (written over) is in `appeared` again: its content may have changed.
    private func look(
        at names: Set<String>, of node: NodeID, in account: Directory, into folder: inout NodeFolderState, appeared: inout [SegmentName],
        counters: inout TransportCounters
    ) {
        let folderPath = accountFolder + "/" + node.rawValue
        guard let directory = try? account.subdirectory(node.rawValue) else {
            // Gone or replaced: the next refresh lists it (or finds it gone).
            folder.stamp = nil
            return
        }
        for file in names.sorted() {
            counters.namesLookedAt += 1
            let kind = directory.kind(of: file)
            if let segment = SegmentName.parse(fileName: file, node: node) {
                let range = SequenceRange(first: segment.firstSequence, last: segment.lastSequence)
                switch kind {
                case .regular?:
                    _ = folder.insert(range)
                    folder.ignored[file] = nil
                    appeared.append(segment)
                case nil:
                    folder.remove(range)
                    folder.ignored[file] = nil
                case let other?:
                    folder.remove(range)
                    folder.ignored[file] = IgnoredFile(path: folderPath + "/" + file, reason: .notRegularFile(other), segment: segment)
                }
            } else if let reason = Self.classify(file) {
                folder.ignored[file] = kind == nil ? nil : IgnoredFile(path: folderPath + "/" + file, reason: reason)
            }
        }
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        let target = path(of: name)
        let read: Directory.FileRead
        index.count { $0.filesRead += 1 }
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

    // MARK: Bounded growth (docs/retention.md)

    public func publishProgress(_ bytes: [UInt8]) throws(TransportError) {
        let target = nodeFolder(node) + "/" + ProgressRecordName.fileName
        do {
            try openNodeFolder(node).replace(ProgressRecordName.fileName, with: bytes, temporaryName: temporaryName(for: ProgressRecordName.fileName))
        } catch {
            throw TransportError(.io, "cannot write the progress record \(target)\(Self.hint(error))", path: target, cause: error)
        }
    }

    public func progressRecords() throws(TransportError) -> [NodeID: [UInt8]] {
        var records: [NodeID: [UInt8]] = [:]
        for (node, folder) in try nodeFolders() {
            if case .bytes(let bytes)? = try? folder.read(ProgressRecordName.fileName, maximumBytes: ProgressRecord.maximumByteCount) {
                records[node] = bytes
            }
        }
        return records
    }

    public func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError) {
        try requireOwn(name.node, "publish a baseline of")
        let target = nodeFolder(name.node) + "/" + name.fileName
        // The producer's own failure, kept to report it as it is rather than as a write error.
        var failure: (any Error)?
        do {
            // An existing file of the same name holds the same frontier's state: the same bytes.
            _ = try openNodeFolder(name.node).publish(as: name.fileName, temporaryName: temporaryName(for: name.fileName)) { () throws(SystemError) -> [UInt8]? in
                do {
                    return try next()
                } catch {
                    failure = error
                    throw SystemError(call: "write", path: target, errno: EIO)
                }
            }
        } catch {
            if let failure { throw TransportError(.io, "cannot write baseline \(target): \(failure)", path: target) }
            let hint = error.isNoSpace ? " (the disk is full: free space; nothing was lost)" : Self.hint(error)
            throw TransportError(.io, "cannot write baseline \(target)\(hint)", path: target, cause: error)
        }
    }

    public func baselines() throws(TransportError) -> [BaselineName] {
        var names: [BaselineName] = []
        for (node, folder) in (try? nodeFolders()) ?? [] {
            for file in (try? folder.entries()) ?? [] where file.kind == .regular {
                if let name = BaselineName.parse(fileName: file.name, node: node) { names.append(name) }
            }
        }
        return names.sorted()
    }

    /// Every node folder of the account that can be opened (never through a link), by node.
    private func nodeFolders() throws(TransportError) -> [(NodeID, Directory)] {
        let account = try openAccountFolder()
        let entries: [Directory.Entry]
        do {
            entries = try account.entries()
        } catch {
            throw TransportError(.io, "cannot list the account folder \(accountFolder)", path: accountFolder, cause: error)
        }
        return entries.compactMap { entry in
            guard entry.kind == .directory, SegmentName.isNodeFolderName(entry.name), let folder = try? account.subdirectory(entry.name) else { return nil }
            return (NodeID(entry.name), folder)
        }
    }

    public func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError) {
        let target = nodeFolder(name.node) + "/" + name.fileName
        do {
            switch try openNodeFolder(name.node).openChunks(name.fileName, maximumBytes: maximumBytes) {
            case .reader(let reader):
                while let chunk = try reader.next() { try consume(chunk) }
            case .tooLarge(let size):
                throw TransportError(.tooLarge, "baseline \(target) is \(size) bytes, larger than the \(maximumBytes)-byte limit", path: target)
            case .notRegular(let kind):
                throw TransportError(.notRegularFile, "\(target) is a \(kind), not a regular file", path: target)
            }
        } catch let error as TransportError {
            throw error
        } catch let error as SystemError {
            throw TransportError(.io, "cannot read baseline \(target)\(Self.hint(error))", path: target, cause: error)
        } catch {
            // What the reader threw (a sealed baseline that fails its seal), kept as the cause.
            throw TransportError(.io, "cannot read baseline \(target): \(error)", path: target, cause: error)
        }
    }

    public func remove(_ name: SegmentName) throws(TransportError) {
        try requireOwn(name.node, "delete segment \(name.fileName) of")
        try removeOwn(name.fileName)
    }

    public func remove(_ name: BaselineName) throws(TransportError) {
        try requireOwn(name.node, "delete baseline \(name.fileName) of")
        try removeOwn(name.fileName)
    }

    private func removeOwn(_ file: String) throws(TransportError) {
        let target = nodeFolder(node) + "/" + file
        do {
            try openNodeFolder(node).removeFile(file)
        } catch {
            throw TransportError(.io, "cannot delete \(target)\(Self.hint(error))", path: target, cause: error)
        }
    }

    /// A node writes and deletes only in its own folder.
    private func requireOwn(_ owner: NodeID, _ what: String) throws(TransportError) {
        guard owner == node else {
            throw TransportError(.forbidden, "refused to \(what) node \(owner): a node only writes and deletes its own files", path: nodeFolder(owner))
        }
    }

    private func temporaryName(for name: String) -> String {
        "." + name + "." + String(UInt64.random(in: 0...UInt64.max), radix: 36) + ".tmp"
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

    /// Wakes the caller at once, then whenever the watcher reports a change in another node's folder (or
    /// a new node folder), and at least every `rescanInterval`. What changed is kept for the next
    /// ``refresh(excluding:)``: the names reported, and that a rescan is due. This node's own folder is
    /// not watched: its own publishes are no news to it.
    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let folder = accountFolder
        let own = node.rawValue
        let reports = index
        let watch = DirectoryWatch(directory: folder, followingLink: false, reportingRemovals: true)
        let interval = Int32(clamping: rescanInterval.components.seconds * 1000 + rescanInterval.components.attoseconds / 1_000_000_000_000_000)
        // A new watcher cannot know what happened before it started: the next refresh lists everything.
        let generation = reports.reports.withLock { state in
            state.generation += 1
            state.live = watch != nil
            state.watched = []
            state.everything = true
            return state.generation
        }
        // Ends the watcher's wait; without inotify the loop ends at its next yield.
        continuation.onTermination = { _ in watch?.stop() }
        _ = WatchThread(name: "logsync.directory-transport", watch: watch) { waiter in
            var folders: [Int32: String] = [:]
            var listAccount = true
            while true {
                // New node folders appear over time; watch each one once, before telling the consumer to
                // look, so nothing published after it looked goes unnoticed (the folder is listed whole
                // once, for what came before its watch).
                if let watch, listAccount, let entries = try? Directory.open(folder).entries() {
                    let known = Set(folders.values)
                    var added: [String] = []
                    for entry in entries
                    where entry.kind == .directory && SegmentName.isNodeFolderName(entry.name) && entry.name != own && !known.contains(entry.name) {
                        if let descriptor = watch.addWatch(directory: folder + "/" + entry.name) {
                            folders[descriptor] = entry.name
                            added.append(entry.name)
                        }
                    }
                    listAccount = false
                    reports.reports.withLock { state in
                        guard state.generation == generation else { return }
                        state.watched.formUnion(added)
                        state.listWhole.formUnion(added)
                    }
                }
                // The first wake-up comes at once: a consumer looks when it starts.
                if case .terminated = continuation.yield(()) { break }
                // Without inotify this sleeps for the interval and every wake-up is a rescan.
                let (wake, events) = waiter.next(timeoutMilliseconds: max(interval, 1))
                if wake == .stopped { break }
                reports.reports.withLock { state in
                    guard state.generation == generation else { return }
                    if wake == .timeout {
                        state.rescanDue = true
                        listAccount = true
                    }
                    for event in events {
                        if event.overflowed {
                            state.everything = true
                            listAccount = true
                        } else if event.watch == watch?.rootWatch {
                            state.accountChanged = true
                            if event.isDirectory { listAccount = true }
                        } else if let name = folders[event.watch] {
                            if event.watchEnded {
                                folders[event.watch] = nil
                                state.watched.remove(name)
                                state.accountChanged = true
                                listAccount = true
                            } else if !event.name.isEmpty {
                                state.report(event.name, in: name)
                            }
                        }
                    }
                }
            }
            reports.reports.withLock { state in
                guard state.generation == generation else { return }
                state.live = false
                state.watched = []
            }
            continuation.finish()
        }
        return stream
    }

    /// Why a name that is not a segment is ignored, or nil for names not worth reporting.
    static func classify(_ name: String) -> IgnoredFile.Reason? {
        // A node's own records: known, not segments, nothing to report.
        if name == ProgressRecordName.fileName || BaselineName.parse(fileName: name, node: NodeID("")) != nil { return nil }
        if name.contains(".sync-conflict-") || name.contains("conflicted copy") { return .conflictCopy }
        if name.hasPrefix(".") || name.hasPrefix("~") || name.hasSuffix(".tmp") || name.hasSuffix(".partial") {
            return .temporary
        }
        return .unknownName
    }

    static func isSafeComponent(_ name: String) -> Bool { AccountName.problem(name) == nil }
}
