import LogsyncCore
import LogsyncPlatform
import Synchronization

/// What one refresh of a transport found: what is new since the last one, and what stands in the folder
/// that is not a segment.
public struct TransportView: Sendable {
    /// Segments that appeared since the previous refresh, or were written again (their content may have
    /// changed): every segment on the first refresh.
    public var appeared: [SegmentName]
    /// Files seen but not taken as segments, with why (all of them, not only new ones).
    public var ignored: [IgnoredFile]
    /// Every other node that has segments, or files standing where its segments would be.
    public var nodes: [NodeID]

    public init(appeared: [SegmentName], ignored: [IgnoredFile], nodes: [NodeID]) {
        self.appeared = appeared
        self.ignored = ignored
        self.nodes = nodes
    }
}

/// The work the shared-folder transport did, counted since it was opened: what tests and benchmarks
/// read to show that an arrival costs the same however many files the folder holds.
public struct TransportCounters: Sendable, Hashable {
    /// The account folder listed (it holds one folder per node).
    public var accountListings = 0
    /// Node folders listed whole.
    public var folderListings = 0
    /// Entries those listings returned.
    public var listedEntries = 0
    /// Single names looked at (`fstatat`) because the watcher reported them.
    public var namesLookedAt = 0
    /// Segment files opened and read.
    public var filesRead = 0
}

/// A first and last sequence: a segment of a known node.
struct SequenceRange: Sendable, Hashable, Comparable {
    var first: UInt64
    var last: UInt64

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.first, lhs.last) < (rhs.first, rhs.last) }
}

/// What the watcher of the shared folder reported since the last refresh: written by the arrivals
/// thread, taken by the refresh.
struct WatchReports: Sendable {
    /// Bumped by every new watcher; an ended watcher leaves a newer one's state alone.
    var generation = 0
    /// A watcher is running: names it reports are all that changed in the folders it watches (until a
    /// rescan is due, for changes made on other hosts).
    var live = false
    /// Node folders the running watcher watches.
    var watched: Set<String> = []
    /// Per node folder, the names reported changed.
    var names: [String: Set<String>] = [:]
    var reportedNames = 0
    /// Node folders to list whole: newly watched, or more names reported than are worth keeping.
    var listWhole: Set<String> = []
    /// Entries of the account folder changed (a node folder appeared or went).
    var accountChanged = false
    /// The rescan interval passed: look for changes no event reports (NFS, synced folders).
    var rescanDue = false
    /// Events may have been lost (a new watcher, a queue overflow): list everything whole.
    var everything = false

    /// At most this many reported names are kept per refresh; past it the folder is listed whole.
    static let maximumNames = 65_536

    mutating func report(_ name: String, in folder: String) {
        guard !listWhole.contains(folder) else { return }
        if reportedNames >= Self.maximumNames {
            listWhole.insert(folder)
            reportedNames -= names.removeValue(forKey: folder)?.count ?? 0
            return
        }
        if names[folder, default: []].insert(name).inserted { reportedNames += 1 }
    }

    /// Takes what was reported, leaving the watcher's own state.
    mutating func take() -> WatchReports {
        let taken = self
        names = [:]
        reportedNames = 0
        listWhole = []
        accountChanged = false
        rescanDue = false
        everything = false
        return taken
    }
}

/// What this process knows one node folder holds.
struct NodeFolderState: Sendable {
    /// Its segments, in order.
    var segments: [SequenceRange] = []
    /// Files in it that are not segments (by name).
    var ignored: [String: IgnoredFile] = [:]
    /// Why it could not be read, when it could not.
    var unreadable: IgnoredFile?
    /// The folder's status just before it was last listed, and when that was (wall clock, ns).
    var stamp: Directory.EntryStatus?
    var listedAt: Int64 = 0

    /// Adds a segment (or keeps it); true when it is new.
    mutating func insert(_ range: SequenceRange) -> Bool {
        if let last = segments.last, last < range {
            segments.append(range)
            return true
        }
        let index = segments.partitioningIndex { $0 >= range }
        if index < segments.count, segments[index] == range { return false }
        segments.insert(range, at: index)
        return true
    }

    mutating func remove(_ range: SequenceRange) {
        let index = segments.partitioningIndex { $0 >= range }
        if index < segments.count, segments[index] == range { segments.remove(at: index) }
    }

    /// The segments that hold a sequence after `sequence`, in order. Segments of one node follow each
    /// other without overlapping, so those are the ones from the first starting after `sequence`, and
    /// the one just before it when it reaches past `sequence` (a segment applied in part).
    func segments(after sequence: UInt64) -> ArraySlice<SequenceRange> {
        var start = segments.partitioningIndex { $0.first > sequence }
        while start > 0, segments[start - 1].last > sequence { start -= 1 }
        return segments[start...]
    }
}

/// What the shared folder holds, as far as this process knows, and what its watcher reported since.
///
/// A refresh looks only at what may have changed: the names the watcher reported, folders that are new
/// or not watched, and, when a rescan is due, folders whose status (modification time, inode) changed
/// since they were listed. A folder listed less than a second after it last changed is listed again
/// next time (a name added in the same clock tick leaves the modification time as it was), and every
/// tenth rescan lists every folder whole, for file systems whose times cannot be trusted.
final class FolderIndex: Sendable {
    struct State: Sendable {
        var folders: [String: NodeFolderState] = [:]
        /// Entries of the account folder that are not node folders.
        var accountIgnored: [IgnoredFile] = []
        var accountListed = false
        var rescans = 0
        var counters = TransportCounters()
    }

    let state = Mutex(State())
    let reports = Mutex(WatchReports())

    /// A folder whose status is this close to its listing (or after it) is listed again.
    static let racyNanoseconds: Int64 = 1_000_000_000
    /// Every this many rescans, every folder is listed whole whatever its status says.
    static let wholeRescanEvery = 10

    func count(_ update: (inout TransportCounters) -> Void) {
        state.withLock { update(&$0.counters) }
    }
}

extension Collection {
    /// The index of the first element for which `predicate` holds, in a collection where it holds for a
    /// suffix (binary search).
    func partitioningIndex(where predicate: (Element) -> Bool) -> Index {
        var low = startIndex
        var count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if predicate(self[middle]) {
                count = half
            } else {
                low = index(after: middle)
                count -= half + 1
            }
        }
        return low
    }
}
