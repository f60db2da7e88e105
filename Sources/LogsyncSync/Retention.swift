import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTransport
import Synchronization
@_exported import struct LogsyncStatus.RetentionStatus
import LogsyncStatus

/// How a node bounds what it keeps (`docs/retention.md`).
public struct RetentionConfiguration: Sendable {
    /// Publish progress, write baselines, prune and bootstrap. Off: everything is kept, as before.
    public var enabled: Bool
    /// A node whose progress record is older than this stops holding pruning back (default 30 days).
    public var silentNodeAfterMilliseconds: UInt64
    /// A new baseline is written once the store's frontier includes this many transactions more than
    /// this node's newest baseline (default 10,000).
    public var baselineAfterTransactions: UInt64
    /// The progress record is published at least this often while the node runs (default 60 s), and at
    /// most once a second when what it says changes.
    public var progressIntervalMilliseconds: UInt64
    /// How often the node prunes (default 10 minutes).
    public var pruneIntervalMilliseconds: UInt64
    /// The largest baseline read from the transport (default 4 GiB).
    public var maximumBaselineBytes: Int
    /// Wall-clock milliseconds, for ages of progress records (tests move it forward).
    package var clock: @Sendable () -> UInt64 = { WallClock.milliseconds() }

    public init(
        enabled: Bool = true, silentNodeAfterMilliseconds: UInt64 = 30 * 86_400_000, baselineAfterTransactions: UInt64 = 10_000,
        progressIntervalMilliseconds: UInt64 = 60_000, pruneIntervalMilliseconds: UInt64 = 600_000, maximumBaselineBytes: Int = 4 << 30
    ) {
        self.enabled = enabled
        self.silentNodeAfterMilliseconds = silentNodeAfterMilliseconds
        self.baselineAfterTransactions = baselineAfterTransactions
        self.progressIntervalMilliseconds = progressIntervalMilliseconds
        self.pruneIntervalMilliseconds = pruneIntervalMilliseconds
        self.maximumBaselineBytes = maximumBaselineBytes
    }
}

/// What retention remembers between rounds.
final class RetentionMemory: Sendable {
    struct State {
        var lastProgress: (bytes: ProgressRecord, at: UInt64)?
        var lastPruneAt: UInt64 = 0
        /// When bootstrap last read the transport's progress records and baselines.
        var lastBootstrapCheckAt: UInt64?
        /// How many transactions this node's newest baseline includes, once known: the transport is
        /// listed for it once, not every round.
        var ownNewestBaseline: UInt64?
        /// The last two baselines this engine wrote, oldest first: history is purged up to the newer of
        /// them that every active node has applied.
        var ownBaselines: [OwnBaseline] = []
        /// Headers of baselines seen: names are immutable, so a header is read once.
        var headers: [BaselineName: BaselineHeader] = [:]
        var status = RetentionStatus()
        /// Baselines that failed to load or verify, with why: not tried again by this engine.
        var refused: [BaselineName: String] = [:]
        /// Per node, up to where this engine forgot the checksums of its applied segments (that node
        /// deleted them): such a segment seen again comes from an older copy of the carrier.
        var forgotten: [NodeID: UInt64] = [:]
        /// The transport's count of carrier resets already handled (``SyncEngine/recoverIfCarrierReset(into:)``).
        var carrierResets = 0
        /// Per node, the furthest sequence the account's progress records say exists, and when they were
        /// last read (``SyncEngine/claimedHeads()``).
        var claimedHeads: [NodeID: ClaimedHead] = [:]
        var claimedHeadsAt: UInt64?
        /// Whether this node's own history on the carrier was found no further than the store's
        /// (``SyncEngine/checkOwnHistory()``); until then nothing is exported.
        var ownHistoryChecked = false
        /// Set once the store took a new node id: this engine, made for the old one, runs no more rounds.
        var newIdentity: StoreRestored?
        /// Per node, the checksum of its sealed progress record as last read, and since when (this node's
        /// clock) it has not changed: one that stays the same past the silence limit no longer holds
        /// pruning back, like a silent node's.
        var sealedRecordSeen: [NodeID: (checksum: UInt64, since: UInt64)] = [:]
    }

    /// A baseline this node wrote: its frontier, and the newest history transaction it reflects.
    struct OwnBaseline {
        var frontier: Frontier
        var historyToken: Int64
    }

    let state = Mutex(State())
}

/// The furthest sequence of a node that a progress record says exists, and whose record says so.
struct ClaimedHead: Sendable, Hashable {
    var sequence: UInt64
    var by: NodeID
}

/// Stops a transport read once the header is in.
private struct EnoughBytes: Error {}

extension SyncEngine {
    /// What bounds this node's history now, as the last round saw it.
    public var retentionStatus: RetentionStatus { retentionMemory.state.withLock { $0.status } }

    private var now: UInt64 { configuration.retention.clock() }

    func noteProblem(_ problem: String) {
        retentionMemory.state.withLock { $0.status.lastProblem = problem }
    }

    // MARK: Progress, baselines and pruning

    /// Publishes progress, writes a baseline and prunes, each when due (`force`: prune now). Never throws:
    /// problems are kept in ``retentionStatus``.
    func maintainRetention(force: Bool) {
        do {
            let frontier = try store.sync.frontier()
            try publishProgressIfDue(frontier)
            try writeBaselineIfDue(frontier)
            let due = retentionMemory.state.withLock { now >= $0.lastPruneAt + configuration.retention.pruneIntervalMilliseconds }
            if force || due {
                _ = try pruneNow(dryRun: false)
                retentionMemory.state.withLock { $0.lastPruneAt = now }
            }
        } catch {
            noteProblem("\(error)")
        }
    }

    func publishProgressIfDue(_ frontier: Frontier) throws {
        let record = ProgressRecord(
            account: configuration.account, node: node, applied: frontier, prunedThrough: try store.sync.prunedSequence(),
            activeAtMilliseconds: now, schemaVersion: store.schema.version)
        let due = retentionMemory.state.withLock { state -> Bool in
            guard let last = state.lastProgress else { return true }
            let changed = last.bytes.applied != record.applied || last.bytes.prunedThrough != record.prunedThrough
                || last.bytes.schemaVersion != record.schemaVersion
            return now >= last.at + (changed ? min(1_000, configuration.retention.progressIntervalMilliseconds) : configuration.retention.progressIntervalMilliseconds)
        }
        guard due else { return }
        try transport.publishProgress(record.encoded())
        retentionMemory.state.withLock { $0.lastProgress = (record, now) }
    }

    /// Writes a baseline when the frontier has grown by ``RetentionConfiguration/baselineAfterTransactions``
    /// since this node's newest one, publishes it, and deletes this node's older baselines.
    func writeBaselineIfDue(_ frontier: Frontier) throws {
        let known = retentionMemory.state.withLock { $0.ownNewestBaseline }
        let newest = try known ?? transport.baselines().filter { $0.node == node }.max()?.transactionCount ?? 0
        retentionMemory.state.withLock { $0.ownNewestBaseline = newest }
        // `newest` comes from a file name, which anyone who writes into the folder can choose: no overflow.
        let (due, overflow) = newest.addingReportingOverflow(configuration.retention.baselineAfterTransactions)
        guard transport.wantsBaseline || (!overflow && frontier.transactionCount >= due) else { return }
        _ = try writeBaselineNow()
    }

    /// Writes and publishes a baseline of the store now; returns its name (nil when the store cannot write
    /// one now, such as in the middle of a segment).
    @discardableResult
    public func writeBaseline() throws -> BaselineName? {
        try serialized { try writeBaselineNow() }
    }

    func writeBaselineNow() throws -> BaselineName? {
        let (folder, file) = try localScratch("baseline-out")
        let writer = try folder.createFile(file)
        defer { try? folder.removeFile(file) }
        let written: WrittenBaseline
        do {
            written = try store.sync.writeBaseline(account: configuration.account) { try writer.write($0) }
        } catch let refusal as BaselineRefusal {
            noteProblem("no baseline written this round: \(refusal)")
            return nil
        }
        let name = BaselineName(node: node, frontier: written.header.frontier)
        let reader = try localReader(folder, file)
        try transport.publishBaseline(name) { try reader.next() }
        try store.sync.recordOwnBaseline(digest: name.frontierDigest, historyToken: written.historyToken)
        retentionMemory.state.withLock {
            $0.headers[name] = written.header
            $0.ownNewestBaseline = name.transactionCount
            $0.ownBaselines = Array(($0.ownBaselines + [RetentionMemory.OwnBaseline(frontier: written.header.frontier, historyToken: written.historyToken)]).suffix(2))
        }
        for older in try transport.baselines() where older.node == node && older < name {
            try transport.remove(older)
        }
        return name
    }

    /// The store's folder and a scratch file name in it for `purpose`.
    private func localScratch(_ purpose: String) throws -> (Directory, String) {
        let path = store.path
        let slash = path.lastIndex(of: "/")
        let folderPath = slash.map { String(path[..<$0]) } ?? "."
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        return (try Directory.open(folderPath.isEmpty ? "/" : folderPath, followingLink: true), "." + base + "." + purpose)
    }

    /// A local scratch file, opened to be read in chunks.
    private func localReader(_ folder: Directory, _ file: String) throws -> Directory.ChunkReader {
        guard case .reader(let reader) = try folder.openChunks(file, maximumBytes: Int.max) else {
            throw TransportError(.io, "the local copy of the baseline at \(folder.path)/\(file) is gone")
        }
        return reader
    }

    /// The header of a baseline, read once (only its first bytes are fetched).
    func header(of name: BaselineName) throws -> BaselineHeader {
        if let known = retentionMemory.state.withLock({ $0.headers[name] }) { return known }
        var bytes: [UInt8] = []
        var enough = false
        do {
            try transport.readBaseline(name, maximumBytes: configuration.retention.maximumBaselineBytes) { chunk in
                bytes.append(contentsOf: chunk)
                if bytes.count >= 64 * 1024 {
                    enough = true
                    throw EnoughBytes()
                }
            }
        } catch {
            // Stopping the read once the header is in is not a failure.
            guard enough else { throw error }
        }
        var served = false
        let decoder = try BaselineDecoder(limits: configuration.limits) {
            defer { served = true }
            return served ? nil : bytes
        }
        retentionMemory.state.withLock { $0.headers[name] = decoder.header }
        return decoder.header
    }

    /// Per other node, the furthest of its sequences that the account's progress records say exists (its
    /// own record says what it exported, the others' what they applied), read at most once per progress
    /// interval. What the carrier lists short of it is waited for by name, so a carrier that withholds a
    /// node's newest segments is noticed from any other node (sealed records cannot be forged by it).
    func claimedHeads() -> [NodeID: ClaimedHead] {
        guard configuration.retention.enabled else { return [:] }
        let due = retentionMemory.state.withLock { state in
            state.claimedHeadsAt.map { now >= $0 + configuration.retention.progressIntervalMilliseconds } ?? true
        }
        guard due, let records = try? progressRecords() else { return retentionMemory.state.withLock { $0.claimedHeads } }
        var heads: [NodeID: ClaimedHead] = [:]
        for (owner, record) in records where owner != node {
            for (origin, sequence) in record.applied.sorted where origin != node && sequence > heads[origin]?.sequence ?? 0 {
                heads[origin] = ClaimedHead(sequence: sequence, by: owner)
            }
        }
        retentionMemory.state.withLock { state in
            state.claimedHeads = heads
            state.claimedHeadsAt = now
        }
        return heads
    }

    /// Decoded progress records of this account, by node (this node's included); damaged ones are reported.
    func progressRecords() throws -> [NodeID: ProgressRecord] { try readProgress().records }

    /// ``progressRecords()``, and the nodes whose record is sealed while this node syncs unsealed (the
    /// account is being sealed in place): what they applied cannot be known here.
    func readProgress() throws -> (records: [NodeID: ProgressRecord], sealed: [NodeID]) {
        var records: [NodeID: ProgressRecord] = [:]
        var sealed: [NodeID] = []
        for (owner, bytes) in try transport.progressRecords() {
            if SealedHeader.isSealed(bytes) {
                // A device waiting for approval in a sealed account publishes a placeholder, which says
                // nothing was applied: not a node that holds anything back (nor is a header that cannot
                // be read).
                guard let header = try? SealedHeader.decode(bytes).header, header.keyEpoch != SealedHeader.placeholderEpoch else { continue }
                let checksum = Self.checksum(bytes)
                let clock = now
                let since = retentionMemory.state.withLock { state -> UInt64 in
                    if let seen = state.sealedRecordSeen[owner], seen.checksum == checksum { return seen.since }
                    state.sealedRecordSeen[owner] = (checksum, clock)
                    return clock
                }
                if clock < since + configuration.retention.silentNodeAfterMilliseconds { sealed.append(owner) }
                continue
            }
            do {
                let record = try ProgressRecord(decoding: bytes)
                guard record.node == owner, record.account == configuration.account else {
                    noteProblem("the progress record in node \(owner)'s place names node \(record.node) of account '\(record.account)': ignored")
                    continue
                }
                records[owner] = record
            } catch {
                noteProblem("the progress record of node \(owner) cannot be read: \(error)")
            }
        }
        return (records, sealed.sorted())
    }

    /// Works out what this node may delete (every active node applied it, and every current baseline
    /// covers it) and, unless `dryRun`, deletes it: its own segments and older baselines from the
    /// transport, their traces in the store, and local history that every active node has and a baseline
    /// holds. Returns the status with what would go (dry run) or went, and why.
    @discardableResult
    public func prune(dryRun: Bool) throws -> RetentionStatus {
        try serialized { try pruneNow(dryRun: dryRun) }
    }

    func pruneNow(dryRun: Bool) throws -> RetentionStatus {
        let (records, sealed) = try readProgress()
        // A peer that upgraded its app shows its version before it writes anything (`docs/schema-evolution.md`).
        var versions: [NodeID: Int] = [:]
        for record in records.values where record.node != node { versions[record.node] = record.schemaVersion }
        try store.sync.notePeerSchemaVersions(versions)
        let exported = try store.sync.exportedSequence()
        let prunedThrough = try store.sync.prunedSequence()
        let clock = now
        var status = RetentionStatus(prunedThrough: prunedThrough)
        var explanation: [String] = []
        var active: [ProgressRecord] = []
        for record in records.values where record.node != node {
            let age = clock > record.activeAtMilliseconds ? clock - record.activeAtMilliseconds : 0
            if age > configuration.retention.silentNodeAfterMilliseconds {
                status.silent.append(
                    RetentionStatus.Holder(
                        node: record.node.rawValue, applied: record.applied[node], activeAt: Int64(record.activeAtMilliseconds),
                        reason: "silent for \(age / 3_600_000) h, longer than the retention (\(configuration.retention.silentNodeAfterMilliseconds / 3_600_000) h): no longer holds pruning back; it bootstraps from a baseline when it returns"))
            } else {
                active.append(record)
            }
        }
        // Every active node's newest baseline (this node's too) must stay usable: nothing it needs goes.
        let activeNodes = Set(active.map(\.node)).union([node])
        let allBaselines = try transport.baselines()
        var newestByNode: [NodeID: BaselineName] = [:]
        for name in allBaselines where activeNodes.contains(name.node) {
            if newestByNode[name.node].map({ $0 < name }) ?? true { newestByNode[name.node] = name }
        }
        var limit = exported
        var baselineLimit: UInt64 = 0
        if newestByNode.isEmpty {
            limit = 0
            explanation.append("no baseline yet: every segment is kept (one is written after \(configuration.retention.baselineAfterTransactions) transactions)")
        } else {
            baselineLimit = .max
            for name in newestByNode.values {
                let covered = try header(of: name).frontier[node]
                baselineLimit = min(baselineLimit, covered)
                if covered < exported {
                    explanation.append("node \(name.node)'s newest baseline \(name.fileName) covers this node up to \(covered)")
                }
            }
            limit = min(limit, baselineLimit)
        }
        if let first = sealed.first {
            limit = 0
            explanation.append(
                "node \(first)'s progress record is sealed (the account is being sealed, docs/security.md): what it applied cannot be read here, so nothing is deleted until this node is sealed too")
        }
        for record in active {
            let applied = record.applied[node]
            limit = min(limit, applied)
            if applied < exported {
                status.holdingBack.append(
                    RetentionStatus.Holder(
                        node: record.node.rawValue, applied: applied, activeAt: Int64(record.activeAtMilliseconds),
                        reason: "has applied this node's history up to \(applied) of \(exported)"))
            }
        }
        if let newest = allBaselines.max() {
            status.newestBaseline = newest.description
            status.newestBaselineTransactions = newest.transactionCount
        }
        status.prunableThrough = max(limit, prunedThrough)
        let segments = try store.sync.publishedSegments(through: limit)
        status.wouldDelete = segments.map { SegmentName(node: node, firstSequence: $0.firstSequence, lastSequence: $0.lastSequence).fileName }
        explanation.insert(
            segments.isEmpty
                ? "nothing to delete: this node's segments up to \(max(limit, prunedThrough)) are gone or were never written"
                : "\(segments.count) of this node's segments up to sequence \(limit) are applied by every active node (\(active.count)) and covered by every current baseline",
            at: 0)
        status.explanation = explanation
        if !dryRun {
            for segment in segments {
                try transport.remove(SegmentName(node: node, firstSequence: segment.firstSequence, lastSequence: segment.lastSequence))
                try store.sync.recordPruned(firstSequence: segment.firstSequence, lastSequence: segment.lastSequence)
            }
            if let last = segments.last { status.prunedThrough = max(prunedThrough, last.lastSequence) }
            // Others' applied segments they deleted: their checksums are no longer needed.
            for record in records.values where record.node != node && record.prunedThrough > 0 {
                try store.sync.forgetAppliedSegments(of: record.node, through: record.prunedThrough)
                retentionMemory.state.withLock { $0.forgotten[record.node] = max($0.forgotten[record.node] ?? 0, record.prunedThrough) }
            }
            // Local history that every active node has applied and this node's newest baseline holds: up
            // to that baseline, or else up to the one this engine wrote before it (the newest holds it too).
            // No peer can have applied a baseline written moments ago; were only the newest tried, a node
            // whose baselines fall due as often as it prunes would never purge.
            if sealed.isEmpty, let own = newestByNode[node], let token = try store.sync.ownBaselineToken(digest: own.frontierDigest) {
                var candidates = [RetentionMemory.OwnBaseline(frontier: try header(of: own).frontier, historyToken: token)]
                let remembered = retentionMemory.state.withLock { $0.ownBaselines }
                if remembered.count == 2, remembered[1].frontier == candidates[0].frontier { candidates.append(remembered[0]) }
                if let applied = candidates.first(where: { candidate in active.allSatisfy { $0.applied.includes(candidate.frontier) } }) {
                    try store.purgeHistory(before: HistoryToken(applied.historyToken))
                }
            }
        }
        status.retainedSegments = try store.sync.retainedSegmentCount()
        let problem = retentionMemory.state.withLock { $0.status.lastProblem }
        status.lastProblem = problem
        if !dryRun { retentionMemory.state.withLock { $0.status = status } }
        return status
    }

    // MARK: Bootstrap

    /// Loads a baseline when this store needs one: it is new (it has applied nothing from any node) and a
    /// baseline exists, another node pruned segments this store has not applied, a load was interrupted,
    /// or the next segment of a node was refused by the transport (a sealed account's seal: a plain copy,
    /// a forgery) and a baseline covers it — the history it stands for, from a node that applied the
    /// genuine one (an account sealed in place: a plain segment a device that joined sealed cannot take,
    /// docs/security.md). Returns whether one was loaded.
    func bootstrapIfNeeded(into report: inout SyncReport, cancelled: () -> Bool) throws -> Bool {
        let mine = try store.sync.frontier()
        let interrupted = try store.sync.baselineLoadInProgress()
        // Reading every node's progress record and listing baselines costs a look at every node folder:
        // done on the first round, when a node waits on a gap, and otherwise once per progress interval,
        // not on every arrival.
        let clock = now
        if !interrupted, report.waiting.isEmpty {
            let recent = retentionMemory.state.withLock { state in
                state.lastBootstrapCheckAt.map { clock < $0 + configuration.retention.progressIntervalMilliseconds } ?? false
            }
            if recent { return false }
        }
        retentionMemory.state.withLock { $0.lastBootstrapCheckAt = clock }
        let records = (try? progressRecords()) ?? [:]
        let behind = records.values.filter { $0.node != node && $0.prunedThrough > mine[$0.node] }
        // Refused by the transport (a checksum of 0: the seal said no), where this store waits.
        let stuck = try store.sync.refusals().filter { $0.checksum == 0 && $0.node != node && $0.firstSequence == mine[$0.node] + 1 }
        let isNew = isNew(mine)
        guard interrupted || !behind.isEmpty || !stuck.isEmpty || isNew else { return false }
        let names = try transport.baselines()
        guard !names.isEmpty else {
            if !behind.isEmpty {
                noteProblem("node \(behind[0].node) deleted segments this store has not applied, and no baseline is there yet: waiting for one")
            }
            return false
        }
        let exported = try store.sync.exportedSequence()
        for name in names.sorted().reversed() {
            if cancelled() { return false }
            if retentionMemory.state.withLock({ $0.refused[name] }) != nil { continue }
            let header: BaselineHeader
            do {
                header = try self.header(of: name)
            } catch {
                refuse(name, "\(error)")
                continue
            }
            guard header.account == configuration.account, header.schemaVersion <= store.schema.version, header.frontier[node] <= exported
            else { continue }
            // It must bring something, and everything after it must still be there.
            guard interrupted || !mine.includes(header.frontier) else { continue }
            let usable = header.frontier.union(mine).sequences.allSatisfy { origin, sequence in
                guard origin != node else { return true }
                let next = transport.segments(of: origin, after: sequence)
                return next.isEmpty || next[0].firstSequence <= sequence + 1
            }
            guard usable else { continue }
            let behindCovered = !behind.isEmpty && behind.allSatisfy { header.frontier[$0.node] >= $0.prunedThrough }
            let stuckCovered = stuck.contains { header.frontier[$0.node] >= $0.lastSequence }
            guard behindCovered || stuckCovered || interrupted || isNew else { continue }
            do {
                try load(name, cancelled: cancelled)
                report.loadedBaseline = name
                return true
            } catch is CancellationError {
                return false
            } catch {
                refuse(name, "\(error)")
            }
        }
        if !behind.isEmpty {
            noteProblem("node \(behind[0].node) deleted segments this store has not applied, and no baseline here covers them yet: waiting")
        }
        return false
    }

    /// Whether a store at `frontier` is new: it has applied nothing from any other node.
    func isNew(_ frontier: Frontier) -> Bool {
        frontier.sequences.keys.allSatisfy { $0 == node }
    }

    private func refuse(_ name: BaselineName, _ reason: String) {
        noteProblem("baseline \(name) not used: \(reason)")
        retentionMemory.state.withLock { $0.refused[name] = reason }
    }

    /// Copies a baseline next to the store, checks its bytes (``BaselineDecoder/checkBytes(limits:source:)``),
    /// then merges it in, decoding it once.
    private func load(_ name: BaselineName, cancelled: () -> Bool) throws {
        let (folder, file) = try localScratch("baseline-in")
        defer { try? folder.removeFile(file) }
        let writer = try folder.createFile(file)
        try transport.readBaseline(name, maximumBytes: configuration.retention.maximumBaselineBytes) { try writer.write($0) }
        let check = try localReader(folder, file)
        _ = try BaselineDecoder.checkBytes(limits: configuration.limits) { try check.next() }
        let source = try localReader(folder, file)
        let decoder = try BaselineDecoder(limits: configuration.limits) { try source.next() }
        let options = BaselineLoadOptions(
            maximumChanges: configuration.maximumChangesPerSegment, limits: configuration.limits,
            batchRows: max(1_000, configuration.batching.maximumChanges))
        _ = try store.sync.loadBaseline(decoder, account: configuration.account, options: options, isCancelled: cancelled)
    }
}
