import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTransport
import Synchronization

/// How a store syncs.
public struct SyncConfiguration: Sendable {
    /// Which account's logs to exchange; segments of other accounts are rejected.
    public var account: String
    /// At most this many changes per exported segment (a larger single transaction gets a segment of its
    /// own).
    public var maximumChangesPerSegment: Int
    /// How imports group whole remote transactions into SQLite transactions, across segments: as many as
    /// possible, ending a batch as soon as a local writer announces itself (``ImportBatching``).
    public var batching: ImportBatching
    public var limits: SegmentLimits
    /// Progress records, baselines and pruning (`docs/retention.md`).
    public var retention: RetentionConfiguration

    public init(
        account: String = "default", maximumChangesPerSegment: Int = 2_000, batching: ImportBatching = ImportBatching(),
        limits: SegmentLimits = .default, retention: RetentionConfiguration = RetentionConfiguration()
    ) {
        self.account = account
        self.maximumChangesPerSegment = maximumChangesPerSegment
        self.batching = batching
        self.limits = limits
        self.retention = retention
    }
}

/// The one entry for syncing: one store through one transport. Each ``sync(cancellation:)`` exports local
/// history, publishes it, then verifies and applies other nodes' segments in per-node sequence order,
/// exactly once, and says what it did in a ``SyncReport``.
///
/// ```swift
/// let store = try Store(path: "notes.sqlite", schema: .notes)
/// let engine = try SyncEngine(store: store, sharedFolder: "/srv/shared", configuration: SyncConfiguration(account: "alice"))
/// let report = try engine.sync()   // whenever there is something to do; syncd drives it on every commit and arrival
/// ```
///
/// ``sync(cancellation:)`` calls are serialized. Everything below it (the outbox, cursors, segment imports)
/// is the package's own: an app never imports a segment that the engine has not verified.
public final class SyncEngine: Sendable {
    public let store: Store
    public let transport: any Transport
    public let configuration: SyncConfiguration
    private let running: NSLock
    /// Segments at or below their node's cursor that this engine has not read since they appeared (at
    /// start-up, every one): each is read once, a few per round after the imports, to check that it is
    /// what was applied. Names the engine applies itself are never here.
    let unchecked: UncheckedSegments
    /// What retention remembers between rounds (``RetentionMemory``): shared by reconfigured engines.
    let retentionMemory: RetentionMemory

    /// At most this many segments at or below the cursor are read again per round, and for at most
    /// ``checkMilliseconds``: after a restart on a large folder, the check goes on over later rounds
    /// instead of holding up arrivals.
    package static let checksPerRound = 256
    package static let checkMilliseconds = 10

    /// Syncs `store` through the shared folder `sharedFolder` (local, NFS, Syncthing), in the folder of
    /// `configuration.account` beneath it. `sharedFolder` must exist.
    public convenience init(store: Store, sharedFolder: String, configuration: SyncConfiguration = SyncConfiguration()) throws(TransportError) {
        let transport = try DirectoryTransport(root: sharedFolder, account: configuration.account, node: NodeID(store.nodeID))
        self.init(store: store, transport: transport, configuration: configuration)
    }

    /// Syncs `store` through any ``Transport``.
    public init(store: Store, transport: any Transport, configuration: SyncConfiguration = SyncConfiguration()) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        running = NSLock()
        unchecked = UncheckedSegments()
        retentionMemory = RetentionMemory()
    }

    private init(_ engine: SyncEngine, configuration: SyncConfiguration) {
        store = engine.store
        transport = engine.transport
        self.configuration = configuration
        running = engine.running
        unchecked = engine.unchecked
        retentionMemory = engine.retentionMemory
    }

    /// The same engine with new settings (a reload): what it knows of the transport and what it has
    /// still to check carry over, and its rounds stay serialized with this one's.
    public func reconfigured(_ configuration: SyncConfiguration) -> SyncEngine {
        SyncEngine(self, configuration: configuration)
    }

    public var node: NodeID { NodeID(store.nodeID) }

    /// Runs `body` between rounds, never during one.
    func serialized<T>(_ body: () throws -> T) rethrows -> T {
        running.lock()
        defer { running.unlock() }
        return try body()
    }

    /// One full round: export, publish, scan, import. Throws only for failures that stop the round (the
    /// store or the transport unusable); problems with individual segments are in the report.
    ///
    /// `cancellation` stops the round at its next safe point (between import batches, between nodes):
    /// the report then says ``SyncReport/interrupted``, and what was committed stays.
    public func sync(cancellation: Cancellation? = nil) throws -> SyncReport {
        running.lock()
        defer { running.unlock() }
        var report = SyncReport()
        let cancelled = { cancellation?.isCancelled ?? false }
        // A store behind its own node's history on the carrier exports nothing (a restored backup).
        try checkOwnHistory()
        try exportToOutbox()
        // A segment this node cannot publish (its folder unwritable, its name taken by something else)
        // fails the round, but only after other nodes' segments were imported: a problem with this
        // node's own folder does not stop it from receiving.
        var publishFailure: (any Error)?
        do {
            try publish(into: &report)
        } catch {
            publishFailure = error
        }
        // A store that has applied nothing from other nodes loads a baseline first, if there is one:
        // loading is cheaper than replaying the segments it covers.
        if !cancelled(), configuration.retention.enabled, isNew(try store.sync.frontier()) {
            _ = try loadBaselineIfNeeded(into: &report, cancelled: cancelled)
        }
        // What an upgrade of this node's schema now declares of the parts kept for it, before what arrived.
        if !cancelled() {
            let kept = try store.sync.applyKeptChanges(
                account: configuration.account, maximumChanges: configuration.maximumChangesPerSegment, limits: configuration.limits)
            report.appliedKept = kept.applied
            report.undeclaredKept = kept.undeclared
        }
        if !cancelled() { try importAvailable(into: &report, cancelled: cancelled) }
        if !report.keptForSchema.isEmpty || report.appliedKept > 0 || !report.undeclaredKept.isEmpty {
            report.keptTransactions = try store.sync.keptTransactionCount()
        }
        // A relay that lost history gets back what this node still has (docs/relay-protocol.md).
        if !cancelled() { try recoverIfCarrierReset(into: &report) }
        // Bounded growth: a node behind what others pruned loads a baseline and imports what follows it;
        // then progress, baselines and pruning, each when due. Problems here are reported in the
        // retention status and never stop syncing.
        if !cancelled(), configuration.retention.enabled {
            if try loadBaselineIfNeeded(into: &report, cancelled: cancelled), !cancelled() {
                // What waited before the baseline (segments others pruned) follows on from it now: the
                // second pass says again what still waits, instead of reporting the first pass's gaps.
                report.waiting = [:]
                report.waitingReasons = [:]
                try importAvailable(into: &report, cancelled: cancelled)
            }
            if !cancelled() { maintainRetention(force: false) }
        }
        report.interrupted = cancelled()
        if let publishFailure { throw publishFailure }
        // Importing folds local writes made meanwhile into the outbox: publish them too.
        if !report.interrupted { try publish(into: &report) }
        return report
    }

    /// ``bootstrapIfNeeded(into:cancelled:)``, with a transport that has no baselines (or cannot be
    /// reached now) noted in the retention status: syncing then goes on from segments.
    private func loadBaselineIfNeeded(into report: inout SyncReport, cancelled: () -> Bool) throws -> Bool {
        do {
            return try bootstrapIfNeeded(into: &report, cancelled: cancelled)
        } catch let error as TransportError {
            noteProblem("looking for a baseline: \(error)")
            return false
        }
    }

    /// Exports local history to the outbox and publishes everything unpublished.
    package func export(into report: inout SyncReport) throws {
        try checkOwnHistory()
        try exportToOutbox()
        try publish(into: &report)
    }

    private func exportToOutbox() throws {
        let exported = try store.sync.exportToOutbox(
            account: configuration.account, maximumChanges: configuration.maximumChangesPerSegment, limits: configuration.limits)
        // Only when segments were added: the daemon's first round, which may run before it reports
        // ready, usually exports nothing, and a crash there would not be a crash during export.
        if exported > 0 { FaultInjection.point("export.after-outbox") }
    }

    private func publish(into report: inout SyncReport) throws {
        for segment in try store.sync.unpublishedSegments() {
            let name = SegmentName(node: node, firstSequence: segment.firstSequence, lastSequence: segment.lastSequence)
            FaultInjection.delay("export.slow-publish", milliseconds: 300)
            try transport.publish(name, bytes: segment.bytes)
            FaultInjection.point("export.after-publish")
            try store.sync.markPublished(firstSequence: segment.firstSequence)
            report.published.append(name)
            report.publishedBytes += segment.bytes.count
        }
    }

    private func importAvailable(into report: inout SyncReport, cancelled: () -> Bool) throws {
        // Only what changed since the last round is looked at: the transport remembers what the folder
        // holds, and the cursors say what was applied.
        let view = try transport.refresh(excluding: node)
        report.ignored = view.ignored
        let cursors = try store.sync.appliedSequences()
        let covered = view.appeared.filter { $0.lastSequence <= cursors[$0.node] ?? 0 && !isForgotten($0) }
        if !covered.isEmpty { unchecked.names.withLock { $0.formUnion(covered) } }
        // Things named like a node's segments that are not regular files: they explain a wait.
        let unreadable = Dictionary(grouping: view.ignored.filter { $0.segment != nil }, by: { $0.segment!.node })
        let context = try loadContext()
        // Nodes the progress records say wrote more than the carrier lists: a withheld tail is waited for.
        let claims = claimedHeads()
        for origin in Set(view.nodes).union(unreadable.keys).union(claims.keys).sorted() {
            if cancelled() { return }
            // The segments that hold sequences after the cursor, in order.
            let names = transport.segments(of: origin, after: cursors[origin] ?? 0)
            // Why a sequence is not in the folder as a segment that can be read.
            func missing(_ sequence: UInt64) -> String {
                if let file = unreadable[origin]?.first(where: { $0.segment!.firstSequence <= sequence && sequence <= $0.segment!.lastSequence }) {
                    return "sequence \(sequence): \(file.path) is \(file.reason)"
                }
                guard let next = names.first(where: { $0.firstSequence > sequence }) else {
                    return "sequence \(sequence) is not in the shared folder yet"
                }
                return "sequence \(sequence) is missing from the shared folder; the segments from sequence \(next.firstSequence) on wait for it"
            }
            var pending = names[...]
            // Segments at or below the cursor are checked once the import is done: quarantining one is a
            // write, which cannot happen while the import holds the write lock.
            var belowCursor: [SegmentName] = []
            // The segment after the one handed over, read and decoded on another thread while that one is
            // applied.
            var prefetched: (name: SegmentName, load: Prefetch<SegmentLoad>)?
            // Refusals found in this round, recorded once the import has let go of the write lock; and the
            // segment handed to the import last: the one being applied if applying fails.
            var refusals: [SegmentRefusal] = []
            var handed: (name: SegmentName, checksum: UInt64)?
            do {
                try store.sync.importSegments(
                    from: origin, account: configuration.account, maximumChanges: configuration.maximumChangesPerSegment,
                    batching: configuration.batching, limits: configuration.limits, isCancelled: cancelled,
                    next: { cursor in
                        while let name = pending.popFirst() {
                            if name.lastSequence <= cursor {
                                belowCursor.append(name)
                                continue
                            }
                            // The next segment, or one interrupted between batches (resumed only with the same bytes).
                            guard name.firstSequence <= cursor + 1 else {
                                report.wait(origin, for: cursor + 1, because: missing(cursor + 1))
                                return nil
                            }
                            let load: SegmentLoad
                            if let ahead = prefetched, ahead.name == name {
                                load = ahead.load.value()
                            } else {
                                load = Self.load(name, context: context)
                            }
                            prefetched = nil
                            let segment: SegmentImport
                            switch load {
                            case .segment(let loaded, let size):
                                segment = loaded
                                report.appliedBytes += size
                            case .rejected(let rejection, let refusal):
                                report.rejected.append(rejection)
                                if let refusal { refusals.append(refusal) }
                                report.wait(
                                    origin, for: cursor + 1,
                                    because: "segment \(describe(name)) was rejected: \(rejection.reason)"
                                        + (refusal == nil ? "" : "; only this node's stream waits: see 'syncctl quarantine list'"))
                                return nil
                            }
                            handed = (name, segment.checksum)
                            if segment.header.maxTimestamp.physicalMilliseconds > WallClock.milliseconds() + HybridLogicalClock.maximumDrift {
                                report.heldForClockSkew.append(name)
                                report.wait(
                                    origin, for: cursor + 1,
                                    because: "segment \(describe(name)) is stamped \(segment.header.maxTimestamp.wallClockDescription), more than \(HybridLogicalClock.maximumDrift / 60_000) minutes ahead of this machine's clock: held until local time catches up; check that node's clock")
                                return nil
                            }
                            // Handed over: applied in this batch or the next.
                            if !segment.kept.isEmpty { report.keptForSchema.append(name) }
                            if segment.header.schemaVersion > store.schema.version {
                                report.newerSchemas[origin] = max(report.newerSchemas[origin] ?? 0, segment.header.schemaVersion)
                            }
                            if let following = pending.first, following.firstSequence > name.lastSequence, following.firstSequence - name.lastSequence == 1 {
                                let preparer = store.sync.freshRowPreparer
                                prefetched = (following, Prefetch { Self.load(following, context: context, preparingFor: preparer) })
                            }
                            return segment
                        }
                        return nil
                    },
                    outcome: { header, outcome in
                        // `load` checked that the header says what the name says.
                        let name = SegmentName(node: header.node, firstSequence: header.firstSequence, lastSequence: header.lastSequence)
                        switch outcome {
                        case .applied(let count):
                            report.applied.append(name)
                            report.appliedTransactions += count
                        case .alreadyApplied:
                            break
                        case .gap(let expected):
                            report.wait(origin, for: expected, because: missing(expected))
                        case .divergent:
                            try quarantine(
                                name, reason: "partly applied from different content: same node and sequences", location: describe(name),
                                into: &report)
                        }
                    })
            } catch let error as StoreError where error.code == .constraint {
                // The checks on loading keep this from happening; should a segment still fail against the
                // tables' constraints, it holds its own node only, like any refused segment.
                guard let (name, checksum) = handed else { throw error }
                let reason = "applying it failed: \(error.message)"
                report.rejected.append(RejectedSegment(name: name, reason: reason))
                refusals.append(
                    SegmentRefusal(
                        node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence, checksum: checksum,
                        reason: reason, location: describe(name)))
                report.wait(origin, for: name.firstSequence, because: "segment \(describe(name)) was rejected: \(reason)")
            }
            // Written only when new: a write every round would wake syncd's commit watcher for another round.
            for refusal in refusals {
                let name = SegmentName(node: refusal.node, firstSequence: refusal.firstSequence, lastSequence: refusal.lastSequence)
                guard context.refused[name]?.checksum != refusal.checksum else { continue }
                try store.sync.refuse(refusal)
                report.refused.append(RejectedSegment(name: name, reason: refusal.reason))
            }
            let cursor = try store.sync.appliedSequence(from: origin)
            if context.refused.keys.contains(where: { $0.node == origin && $0.lastSequence <= cursor }) {
                try store.sync.forgetRefusals(of: origin, through: cursor)
            }
            for name in belowCursor { try checkApplied(name, into: &report) }
            if report.waiting[origin] == nil, !cancelled(), unreadable[origin]?.contains(where: { $0.segment!.firstSequence == cursor + 1 }) == true {
                report.wait(origin, for: cursor + 1, because: missing(cursor + 1))
            }
            let rejected = Set(report.rejected.map(\.name))
            let available = Self.contiguousEnd(of: names.filter { !rejected.contains($0) }, after: cursor)
            report.available[origin] = available
            if report.waiting[origin] == nil, !cancelled(), let claim = claims[origin], claim.sequence > available {
                let by = claim.by == origin ? "its own progress record says so" : "node \(claim.by)'s progress record says it applied them"
                report.wait(
                    origin, for: available + 1,
                    because: "node \(origin)'s sequences up to \(claim.sequence) exist (\(by)), but the carrier has not delivered sequence \(available + 1): withheld, or still on its way")
            }
        }
        if !cancelled() { try checkSomeApplied(into: &report) }
    }

    /// Reads a few of the segments at or below the cursor that were not checked yet (``checksPerRound``,
    /// within ``checkMilliseconds``), after this round's imports.
    private func checkSomeApplied(into report: inout SyncReport) throws {
        let batch = unchecked.names.withLock { Array($0.prefix(Self.checksPerRound)) }
        let deadline = ContinuousClock.now + .milliseconds(Self.checkMilliseconds)
        for name in batch {
            guard ContinuousClock.now < deadline else { break }
            try checkApplied(name, into: &report)
            _ = unchecked.names.withLock { $0.remove(name) }
        }
        report.unchecked = unchecked.names.withLock { $0.count }
    }

    /// The last sequence that `names` cover without a gap after `cursor` (`cursor` itself when the next
    /// one is missing).
    static func contiguousEnd(of names: [SegmentName], after cursor: UInt64) -> UInt64 {
        var end = cursor
        // `end` may be any name's last sequence (a relay's listing is not bounded like a file name): no `+ 1`.
        for name in names.sorted() where name.firstSequence <= end || name.firstSequence - end == 1 {
            end = max(end, name.lastSequence)
        }
        return end
    }

    /// A segment at or below the cursor must be one that was applied, with the same bytes: anything else
    /// is divergence (the node rewrote history, or two machines share a node id) and is quarantined.
    private func checkApplied(_ name: SegmentName, into report: inout SyncReport) throws {
        let location = describe(name)
        guard let applied = try store.sync.appliedSegment(from: name.node, firstSequence: name.firstSequence),
            applied.lastSequence == name.lastSequence
        else {
            // Included in a baseline this store loaded: never applied one by one, nothing to compare.
            if name.lastSequence <= (try store.sync.coveredByBaseline(name.node)) { return }
            try quarantine(name, reason: "overlaps sequences already applied from other segments of this node", location: location, into: &report)
            return
        }
        let bytes: [UInt8]
        do {
            bytes = try transport.read(name, maximumBytes: configuration.limits.maxSegmentBytes)
        } catch where error.code == .unsealable {
            // A sealed account's applied segment that now fails its seal, or comes back from another history.
            try quarantine(name, reason: error.message, location: location, into: &report)
            return
        } catch {
            return
        }
        if Self.checksum(bytes) != applied.checksum {
            try quarantine(name, reason: "same node and sequences as an applied segment, different content", location: location, into: &report)
        }
    }

    private func quarantine(_ name: SegmentName, reason: String, location: String, into report: inout SyncReport) throws {
        let known = try store.sync.quarantined().contains { $0.node == name.node && $0.firstSequence == name.firstSequence && $0.lastSequence == name.lastSequence }
        try store.sync.quarantine(QuarantineRecord(node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence, reason: reason, location: location))
        if !known { report.quarantined.append(name) }
    }

    /// A segment read and verified completely, or why it was refused.
    enum SegmentLoad: Sendable {
        /// The segment, and how many bytes it was.
        case segment(SegmentImport, size: Int)
        /// Not applied. `refusal`: the bytes were read and are wrong whatever happens next (they fail
        /// verification or do not fit this node's schema), so the refusal is recorded with their checksum;
        /// nil for what may pass later (a read error, a newer format).
        case rejected(RejectedSegment, refusal: SegmentRefusal?)
    }

    /// What loading a segment needs, all of it `Sendable`: it runs on the prefetching thread too.
    struct LoadContext: Sendable {
        let transport: any Transport
        let configuration: SyncConfiguration
        /// The store's schema as the rules a change must follow (``ChangeRules``).
        let rules: ChangeRules
        /// Refusals recorded before this round, by name: the same bytes are refused again without decoding.
        let refused: [SegmentName: SegmentRefusal]
        /// Where a segment is, for messages.
        let location: @Sendable (SegmentName) -> String

        init(store: Store, transport: any Transport, configuration: SyncConfiguration, refused: [SegmentName: SegmentRefusal] = [:]) {
            self.transport = transport
            self.configuration = configuration
            rules = store.sync.changeRules
            self.refused = refused
            location = { name in (transport.carrierTransport as? DirectoryTransport)?.path(of: name) ?? name.description }
        }
    }

    /// Reads and verifies a segment completely before anything of it is used: its bytes, its header
    /// against its name and account, every transaction, and every change against this node's schema (of a
    /// segment written under a newer schema, the parts this schema declares; the rest is kept). Touches nothing but the transport, so
    /// it can run on another thread while the previous segment is applied.
    static func load(_ name: SegmentName, context: LoadContext) -> SegmentLoad {
        let bytes: [UInt8]
        do {
            bytes = try context.transport.read(name, maximumBytes: context.configuration.limits.maxSegmentBytes)
        } catch where error.code == .unsealable {
            // A sealed account's segment that fails its seal (forged, changed, misplaced, another history):
            // refused like bytes that fail verification, with the reason the seal gave.
            let refusal = SegmentRefusal(
                node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence, checksum: 0, reason: error.message,
                location: context.location(name))
            return .rejected(RejectedSegment(name: name, reason: error.message), refusal: refusal)
        } catch {
            return .rejected(RejectedSegment(name: name, reason: error.description), refusal: nil)
        }
        let sum = checksum(bytes)
        func refuse(_ reason: String) -> SegmentLoad {
            let refusal = SegmentRefusal(
                node: name.node, firstSequence: name.firstSequence, lastSequence: name.lastSequence, checksum: sum, reason: reason,
                location: context.location(name))
            return .rejected(RejectedSegment(name: name, reason: reason), refusal: refusal)
        }
        if let known = context.refused[name], known.checksum == sum { return refuse(known.reason) }
        if SealedHeader.isSealed(bytes) {
            return refuse(
                "it is sealed (docs/security.md), and this node syncs account '\(context.configuration.account)' unsealed: give syncd the account's recovery phrase ([seal] in syncd.toml)")
        }
        do {
            var decoder = try SegmentDecoder(bytes: bytes, limits: context.configuration.limits)
            let header = decoder.header
            guard header.node == name.node, header.firstSequence == name.firstSequence, header.lastSequence == name.lastSequence else {
                return refuse("its header says node \(header.node) sequences \(header.firstSequence)–\(header.lastSequence), not what its name says")
            }
            guard header.account == context.configuration.account else {
                return refuse("it belongs to account '\(header.account)', not '\(context.configuration.account)'")
            }
            // A newer schema's segment is applied in what this schema declares; the rest is kept until
            // this node's app registers that schema (`docs/schema-evolution.md`).
            let newer = header.schemaVersion > context.rules.schemaVersion
            var transactions: [LogTransaction] = []
            var kept: [Int: SegmentImport.KeptPart] = [:]
            // Checked in the log's names, merged in the store's (a renamed attribute: `LogNames`).
            let names = context.rules.names
            while let transaction = try decoder.next() {
                if newer {
                    let (understood, remainder, problem) = context.rules.split(transaction)
                    if let problem { return refuse("its changes to what this node's schema declares do not fit it: \(problem)") }
                    if let remainder {
                        kept[transactions.count] = try SegmentImport.KeptPart(remainder, of: header, limits: context.configuration.limits)
                    }
                    transactions.append(names.current(understood))
                    continue
                }
                if let problem = context.rules.problem(in: transaction) {
                    return refuse("it does not fit this node's schema: \(problem)")
                }
                transactions.append(names.current(transaction))
            }
            return .segment(SegmentImport(header: header, transactions: transactions, checksum: sum, kept: kept), size: bytes.count)
        } catch where error.code == .unsupportedFormat {
            return .rejected(RejectedSegment(name: name, reason: error.description), refusal: nil)
        } catch {
            return refuse("\(error)")
        }
    }

    /// ``load(_:context:)``, then the segment's first inserts prepared (``FreshRowPreparer``): on
    /// the thread that prefetches the segment, not the writer's.
    static func load(_ name: SegmentName, context: LoadContext, preparingFor preparer: FreshRowPreparer) -> SegmentLoad {
        let loaded = load(name, context: context)
        guard case .segment(var segment, let size) = loaded else { return loaded }
        preparer.prepare(&segment)
        return .segment(segment, size: size)
    }

    /// What loading segments needs in this round.
    private func loadContext() throws -> LoadContext {
        var refused: [SegmentName: SegmentRefusal] = [:]
        for refusal in try store.sync.refusals() {
            refused[SegmentName(node: refusal.node, firstSequence: refusal.firstSequence, lastSequence: refusal.lastSequence)] = refusal
        }
        return LoadContext(store: store, transport: transport, configuration: configuration, refused: refused)
    }

    private func describe(_ name: SegmentName) -> String {
        (transport.carrierTransport as? DirectoryTransport)?.path(of: name) ?? name.description
    }

    /// FNV-1a over the whole file: what "the same segment" means when a name comes back.
    static func checksum(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}

/// The segments an engine (and the engines a reload makes of it) still has to check.
final class UncheckedSegments: Sendable {
    let names = Mutex<Set<SegmentName>>([])
}
