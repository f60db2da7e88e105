import Crypto
import LogsyncCore
import LogsyncPlatform
import LogsyncTransport
import Synchronization

/// A sealed account's carriage (`docs/security.md`): wraps the transport that reaches the carrier (the
/// shared folder, the relay) so that everything it holds is sealed — segments, progress records and
/// baselines — and everything read from it is opened and checked before anyone uses it:
///
/// - the key: sealed under this account's key, or refused as `wrongKey` (nothing opened);
/// - the seal: ciphertext, header and signature authentic, or refused (changed, cut, forged);
/// - the place: the node, range, account and kind inside equal where the carrier put it;
/// - the signer: the node's objects keep the key its first one was signed with;
/// - the chain: a node's next segment names the link of the one before it, as verified here, and a
///   node's sequences never come back with other content;
/// - progress records never go back to an older one.
///
/// What fails is refused with ``TransportError/Code/unsealable`` (segments, baselines) or left out and
/// reported among the ignored files (progress records). Plain objects are refused: an account is sealed
/// or not — except, in an account sealed in place, the plain history it held (``SealedTransport+Plain.swift``).
public final class SealedTransport: Transport {
    public let inner: any Transport
    let account: String
    let signingKey: NodeSigningKey
    let node: NodeID
    /// The keys, the roster and the device cards seen (``SealedTransport+Devices.swift``).
    let devicesState: Mutex<DeviceState>
    /// Where the roster this node holds is kept; nil: in memory only.
    let rosterPath: String?
    let rosterInterval: Duration
    /// Held while the slot is published (``publishSlot(record:)``).
    let slotPublishing = Mutex<Void>(())
    /// Where the ledger is kept; nil: in memory only.
    let ledgerPath: String?
    let ledger: Mutex<(state: ChainLedger, dirty: Bool)>
    /// Whether the ledger file was there and could not be read.
    let ledgerUnreadable: Bool
    /// Progress records that failed their seal at the last read, for the next view's ignored files.
    let refusedRecords = Mutex<[IgnoredFile]>([])
    /// The newest progress record read from each other node (its plain bytes), served in place of an
    /// older one the carrier hands over later.
    let newestRecords = Mutex<[NodeID: [UInt8]]>([:])
    /// `[seal] from_plain`: this account held plain history, which is read until every node is sealed.
    let convertsPlain: Bool
    /// In an account sealed in place: how soon after a sealed baseline another is written to cover plain
    /// segments read since, and when this transport last published one.
    let rebaselineInterval: Duration
    let lastBaselineAt = Mutex<ContinuousClock.Instant?>(nil)

    /// What a sealed object may add to its plain content: header, length, prefix, padding, tag, signature.
    public static let overheadBytes = 8 * 1_024

    /// A member's transport: `keyring` holds the account key (from the recovery phrase) or the keys a
    /// roster granted; the roster kept at `rosterPath` adds the later epochs at once.
    /// `rosterInterval`: how often a refresh reads the progress slots for a newer roster (a member that
    /// writes on after a revocation must seal under the new epoch as soon as it can). `fromPlain`: the
    /// account held plain history and is being sealed in place (``SealedTransport+Plain.swift``), and
    /// `rebaselineInterval` bounds how often it writes a baseline to cover plain segments read.
    public convenience init(
        wrapping inner: any Transport, keyring: SealKeyring, node: NodeID, ledgerPath: String?, rosterPath: String? = nil, rosterInterval: Duration = .seconds(1),
        fromPlain: Bool = false, rebaselineInterval: Duration = .seconds(600)
    ) {
        self.init(
            inner: inner, account: keyring.account, signingKey: keyring.signingKey, keyring: keyring, node: node, ledgerPath: ledgerPath, rosterPath: rosterPath,
            rosterInterval: rosterInterval, fromPlain: fromPlain, rebaselineInterval: rebaselineInterval)
    }

    /// The transport of a device that holds no key of the account yet: it publishes its device card and
    /// waits until a member approves it (`syncctl devices approve`), or finds the grant in the roster it
    /// kept at `rosterPath`.
    public convenience init(
        waitingForApprovalOf account: String, wrapping inner: any Transport, signingKey: NodeSigningKey, node: NodeID, ledgerPath: String?, rosterPath: String?,
        rosterInterval: Duration = .seconds(1)
    ) {
        self.init(
            inner: inner, account: account, signingKey: signingKey, keyring: nil, node: node, ledgerPath: ledgerPath, rosterPath: rosterPath,
            rosterInterval: rosterInterval, fromPlain: false, rebaselineInterval: .zero)
    }

    private init(
        inner: any Transport, account: String, signingKey: NodeSigningKey, keyring: SealKeyring?, node: NodeID, ledgerPath: String?, rosterPath: String?,
        rosterInterval: Duration, fromPlain: Bool, rebaselineInterval: Duration
    ) {
        self.inner = inner
        convertsPlain = fromPlain
        self.rebaselineInterval = rebaselineInterval
        self.rosterInterval = rosterInterval
        self.account = account
        self.signingKey = signingKey
        self.node = node
        self.rosterPath = rosterPath
        devicesState = Mutex(DeviceState(keyring: keyring))
        self.ledgerPath = ledgerPath
        let loaded = ledgerPath.map(ChainLedger.load) ?? ChainLedger()
        ledgerUnreadable = loaded == nil
        ledger = Mutex((loaded ?? ChainLedger(), false))
        loadRoster()
    }

    public var carrierTransport: any Transport { inner.carrierTransport }

    /// Checks what the carrier already holds of this account before anything is read or applied: when
    /// other nodes' progress records are there and not one of them opens under this node's account key,
    /// either they are sealed under another key (this node was given the wrong phrase) or they are all
    /// plain (the account is not sealed): both stop here. One record that opens is proof enough that the
    /// key is right; the others are then the carrier's or a broken writer's, refused one by one as they
    /// are read. A carrier that cannot be reached now is not an error here (each object is checked as it
    /// is read).
    public func checkAccount() throws(TransportError) {
        if ledgerUnreadable, let ledgerPath {
            throw TransportError(
                .unsealable,
                "the chain ledger \(ledgerPath) cannot be read: without it the checks of other nodes' chains would start afresh unnoticed. Move it aside to start them afresh knowingly (docs/security.md)",
                path: ledgerPath)
        }
        // A device waiting for approval holds no key to check with: it reads nothing until it is granted one.
        guard let keyring = self.keyring, let records = try? inner.progressRecords() else { return }
        var foreign: (owner: NodeID, problem: String)?
        var plain: NodeID?
        var keyFound = false
        for (owner, slot) in records.sorted(by: { $0.key < $1.key }) where owner != node {
            guard SealedHeader.isSealed(slot) else {
                plain = plain ?? owner
                continue
            }
            let bytes = ProgressSlot.decode(slot).record
            if SealedHeader.isPlaceholder(bytes) { continue }
            do {
                let opened = try Sealer.open(bytes, kind: .progressRecord, keyring: keyring, maximumBytes: ProgressRecord.maximumByteCount)
                if opened.header.account == keyring.account {
                    keyFound = true
                    break
                }
            } catch where error.code == .wrongKey || error.code == .unknownEpoch {
                foreign = foreign ?? (owner, error.message)
            } catch {}
        }
        if keyFound { return try notePlainNodes() }
        if let foreign {
            throw TransportError(.unsealable, "account '\(keyring.account)' (node \(foreign.owner)'s progress record): \(foreign.problem)")
        }
        if let plain, !convertsPlain {
            throw TransportError(
                .unsealable,
                "account '\(keyring.account)' holds only plain progress records (node \(plain)'s among them) and none sealed under this key: the account's other nodes sync it unsealed. Every node of an account is sealed with the same key or none is; do not turn [seal] off on this node to match them unless the account is meant to be plain (docs/security.md)")
        }
        try notePlainNodes()
    }

    /// This node's signing key's fingerprint, and per other node whose objects were opened here, the
    /// fingerprint of the key they are signed with and the newest sequence verified in order.
    public func devices() -> (own: String, others: [(node: NodeID, fingerprint: String, verifiedThrough: UInt64)]) {
        let peers = ledger.withLock { $0.state.peers }
        return (
            signingKey.fingerprint,
            peers.sorted { $0.key < $1.key }.map { (NodeID($0.key), NodeSigningKey.fingerprint(of: Hex.decode($0.value.signer) ?? []), $0.value.last) }
        )
    }

    static func refusal(_ what: String, _ error: SealError) -> TransportError {
        TransportError(.unsealable, "\(what) \(error.message)", cause: error)
    }

    // MARK: Segments

    public func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) {
        let keyring = try keys()
        let previous = ledger.withLock { $0.state.previousOwnLink(before: name.firstSequence) }
        let sealed: Sealer.Sealed
        do {
            sealed = try Sealer.seal(.segment, first: name.firstSequence, last: name.lastSequence, node: node, content: bytes, previous: previous, keyring: keyring)
        } catch {
            throw TransportError(.io, "cannot seal segment \(name): \(error)", cause: error)
        }
        do {
            try inner.publish(name, bytes: sealed.bytes)
        } catch where error.code == .conflict {
            // Published before (a retry after a crash, a push again after a carrier reset) under another
            // link: the same content is the same segment.
            guard let stored = try? inner.read(name, maximumBytes: sealed.bytes.count + Self.overheadBytes),
                let opened = try? Sealer.open(stored, kind: .segment, keyring: keyring, maximumBytes: stored.count), opened.content == bytes
            else { throw error }
            try record(own: name, link: opened.link)
            return
        }
        try record(own: name, link: sealed.link)
    }

    private func record(own name: SegmentName, link: [UInt8]) throws(TransportError) {
        try updateLedger { ledger in
            ledger.recordOwn(first: name.firstSequence, last: name.lastSequence, link: link)
            return true
        }
    }

    /// Changes the ledger and keeps it at once; `change` says whether it changed anything.
    func updateLedger(_ change: (inout ChainLedger) -> Bool) throws(TransportError) {
        let state = ledger.withLock { held -> ChainLedger? in
            guard change(&held.state) else { return nil }
            held.dirty = true
            return held.state
        }
        if let state { try save(state) }
    }

    /// Writes `state` to the ledger's file; the ledger is clean again unless it changed meanwhile.
    func save(_ state: ChainLedger) throws(TransportError) {
        guard let ledgerPath else { return }
        do {
            try state.save(ledgerPath)
        } catch {
            throw TransportError(.io, "cannot keep the seal's chain ledger \(ledgerPath): \(error)", path: ledgerPath, cause: error)
        }
        ledger.withLock { held in if held.state == state { held.dirty = false } }
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        let keyring = try keys()
        let bytes = try inner.read(name, maximumBytes: maximumBytes + Self.overheadBytes)
        let what = "segment \(name):"
        if convertsPlain, !SealedHeader.isSealed(bytes) {
            if let refusal = plainSegmentRefusal(name.node, through: name.lastSequence) { throw TransportError(.unsealable, "\(what) \(refusal)") }
            // The account's plain history: checked by the engine as a plain account's.
            guard bytes.count <= maximumBytes else { throw TransportError(.tooLarge, "segment \(name) holds \(bytes.count) bytes, over \(maximumBytes)") }
            if name.node != node { notePlainRead(name) }
            return bytes
        }
        let opened: Sealer.Sealed
        do {
            opened = try Sealer.open(bytes, kind: .segment, keyring: keyring, maximumBytes: maximumBytes + Self.overheadBytes)
            try checkPlace(opened.header, node: name.node, first: name.firstSequence, last: name.lastSequence)
            try checkSigner(opened.signer, of: name.node, through: name.lastSequence)
        } catch {
            throw Self.refusal(what, error)
        }
        guard opened.content.count <= maximumBytes else {
            throw TransportError(.tooLarge, "segment \(name) holds \(opened.content.count) bytes, over \(maximumBytes)")
        }
        let content = Hex.encode(Array(SHA256.hash(data: opened.content)))
        // A segment pushed again (after a carrier lost history, or by a node that lost its ledger) is
        // sealed again, with a new link: the same content under the same name is the same segment, so a
        // segment that names a new link for the one verified last is taken once that one, read again, is
        // the same content under that link.
        let known = ledger.withLock { $0.state.peers[name.node.rawValue] }
        var resealed: String?
        if let known, known.last > 0, let first = known.first, let digest = known.content, name.firstSequence == known.last + 1,
            opened.previous != Sealer.zeroLink, Hex.encode(opened.previous) != known.link,
            let bytes = try? inner.read(SegmentName(node: name.node, firstSequence: first, lastSequence: known.last), maximumBytes: maximumBytes + Self.overheadBytes),
            let again = try? Sealer.open(bytes, kind: .segment, keyring: keyring, maximumBytes: maximumBytes + Self.overheadBytes),
            again.header.node == name.node, again.header.first == first, again.header.last == known.last, again.signer == opened.signer,
            again.link == opened.previous, Hex.encode(Array(SHA256.hash(data: again.content))) == digest
        {
            resealed = Hex.encode(again.link)
        }
        let check: SealError? = ledger.withLock { held in
            var peer = held.state.peers[name.node.rawValue] ?? ChainLedger.Peer(signer: Hex.encode(opened.signer))
            if let problem = Self.signerProblem(peer, opened.signer) { return problem }
            let link = Hex.encode(opened.link)
            if let resealed, peer.last == known?.last { peer.link = resealed }
            if peer.last > 0, name.firstSequence == peer.last + 1, opened.previous != Sealer.zeroLink, Hex.encode(opened.previous) != peer.link {
                return SealError(
                    .chainBroken,
                    "it names a segment before it that is not the one this node verified at sequence \(peer.last): another history of node \(name.node)")
            }
            if peer.last > 0, name.lastSequence == peer.last, link != peer.link {
                // Sealed again with the same content: the same segment, under its new link.
                guard name.firstSequence == peer.first, content == peer.content else {
                    return SealError(.chainBroken, "node \(name.node)'s sequences \(name.firstSequence)-\(name.lastSequence) were verified here with other content: a second history")
                }
                peer.link = link
            }
            if convertsPlain, peer.sealedFrom.map({ name.firstSequence < $0 }) ?? true { peer.sealedFrom = name.firstSequence }
            if name.lastSequence >= peer.last {
                peer.first = name.firstSequence
                peer.last = name.lastSequence
                peer.link = link
                peer.content = content
            }
            if held.state.peers[name.node.rawValue] != peer {
                held.state.peers[name.node.rawValue] = peer
                held.dirty = true
            }
            return nil
        }
        if let check { throw Self.refusal(what, check) }
        return opened.content
    }

    static func signerProblem(_ peer: ChainLedger.Peer, _ signer: [UInt8]) -> SealError? {
        guard peer.signer != Hex.encode(signer) else { return nil }
        return SealError(
            .signerChanged,
            "it is signed by key \(NodeSigningKey.fingerprint(of: signer)), and this node's earlier objects by \(NodeSigningKey.fingerprint(of: Hex.decode(peer.signer) ?? []))")
    }

    /// The object says it is where the carrier put it: this account, `node`, and the range.
    func checkPlace(_ header: SealedHeader, node: NodeID, first: UInt64, last: UInt64) throws(SealError) {
        guard header.account == account else {
            throw SealError(.misplaced, "it is sealed as account '\(header.account)''s, not '\(account)''s: moved between accounts")
        }
        guard header.node == node, header.first == first, header.last == last else {
            throw SealError(.misplaced, "it is sealed as node \(header.node)'s \(header.first)-\(header.last), not where the carrier put it (\(node)'s \(first)-\(last))")
        }
    }

    public func scan(excluding node: NodeID) throws(TransportError) -> TransportScan { try inner.scan(excluding: node) }

    public func refresh(excluding node: NodeID) throws(TransportError) -> TransportView {
        try awaitApproval()
        try notePlainNodes()
        try readRosterIfDue()
        let dirty = ledger.withLock { held -> ChainLedger? in held.dirty ? held.state : nil }
        if let dirty { try save(dirty) }
        var view = try inner.refresh(excluding: node)
        view.ignored += refusedRecords.withLock { $0 }
        return view
    }

    public func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName] { inner.segments(of: node, after: sequence) }

    public func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName] { try inner.ownSegments(of: node) }

    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> { inner.arrivals(rescanInterval: rescanInterval) }

    public func carrierState() -> CarrierState? { inner.carrierState() }

    public func remove(_ name: SegmentName) throws(TransportError) { try inner.remove(name) }

    public func remove(_ name: BaselineName) throws(TransportError) { try inner.remove(name) }

    // MARK: Progress records

    public func publishProgress(_ bytes: [UInt8]) throws(TransportError) {
        // Sealed, it must still fit where carriers keep progress records.
        guard bytes.count <= ProgressRecord.maximumByteCount - Self.overheadBytes else {
            throw TransportError(.tooLarge, "the progress record is \(bytes.count) bytes: sealed, it would pass the \(ProgressRecord.maximumByteCount)-byte limit")
        }
        let keyring = try keys()
        let record: [UInt8]
        do {
            record = try Sealer.seal(.progressRecord, node: node, content: bytes, keyring: keyring).bytes
        } catch {
            throw TransportError(.io, "cannot seal the progress record: \(error)", cause: error)
        }
        try publishSlot(record: record)
        devicesState.withLock { $0.lastProgress = bytes }
    }

    public func progressRecords() throws(TransportError) -> [NodeID: [UInt8]] {
        var records: [NodeID: [UInt8]] = [:]
        var refused: [IgnoredFile] = []
        var rosters: [(roster: Roster, bytes: [UInt8])] = []
        let read = ContinuousClock.now
        let slots = try inner.progressRecords().mapValues(ProgressSlot.decode)
        devicesState.withLock { $0.slotsReadAt = read }
        // Cards first (a roster may name them), then the records, whose signers the rosters' authors are
        // checked against, then the rosters.
        for (owner, parts) in slots {
            if let card = parts.card, card.node == owner.rawValue { devicesState.withLock { $0.cards[owner.rawValue] = card } }
            if let roster = parts.roster, let bytes = parts.rosterBytes { rosters.append((roster, bytes)) }
        }
        defer { consider(rosters) }
        guard let keyring = self.keyring else { return [:] }
        for (owner, parts) in slots {
            let bytes = parts.record
            if SealedHeader.isPlaceholder(bytes) { continue }
            if !SealedHeader.isSealed(bytes), readsPlainObjects(of: owner) {
                records[owner] = bytes
                continue
            }
            do {
                let opened = try Sealer.open(bytes, kind: .progressRecord, keyring: keyring, maximumBytes: ProgressRecord.maximumByteCount)
                try checkPlace(opened.header, node: owner, first: 0, last: 0)
                if owner != node { try checkSigner(opened.signer, of: owner, through: .max) }
                let record = try? ProgressRecord(decoding: opened.content)
                let outcome: Result<[UInt8], SealError> = ledger.withLock { held in
                    var peer = held.state.peers[owner.rawValue] ?? ChainLedger.Peer(signer: Hex.encode(opened.signer))
                    if owner != node, let problem = Self.signerProblem(peer, opened.signer) { return .failure(problem) }
                    guard owner != node, let record else { return .success(opened.content) }
                    if record.activeAtMilliseconds < peer.progressAt, let newer = newestRecords.withLock({ $0[owner] }) {
                        // An older record than one read before: the carrier serves an old copy (or the
                        // node's clock stepped back). The newer one goes on being used.
                        refused.append(
                            IgnoredFile(
                                path: "\(owner)/\(ProgressRecordName.fileName)",
                                reason: .unsealable("older (written at \(record.activeAtMilliseconds) ms) than the one this node read from \(owner) before (\(peer.progressAt) ms): rolled back, or that node's clock stepped back; the newer one is used")))
                        return .success(newer)
                    }
                    peer.progressAt = max(peer.progressAt, record.activeAtMilliseconds)
                    newestRecords.withLock { $0[owner] = opened.content }
                    if held.state.peers[owner.rawValue] != peer {
                        held.state.peers[owner.rawValue] = peer
                        held.dirty = true
                    }
                    return .success(opened.content)
                }
                records[owner] = try outcome.get()
            } catch {
                refused.append(IgnoredFile(path: "\(owner)/\(ProgressRecordName.fileName)", reason: .unsealable(error.message)))
            }
        }
        refusedRecords.withLock { $0 = refused }
        return records
    }

    // MARK: Baselines

    public func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError) {
        let keyring = try keys()
        var sealer: BaselineSealer
        do {
            sealer = try BaselineSealer(transactionCount: name.transactionCount, frontierDigest: name.frontierDigest, node: node, keyring: keyring)
        } catch {
            throw TransportError(.io, "cannot seal baseline \(name): \(error)", cause: error)
        }
        try replacePlainBaseline(name)
        // One chunk read ahead, to know which is the last.
        var ahead: [UInt8]?
        var started = false
        var done = false
        try inner.publishBaseline(name) {
            guard !done else { return nil }
            if !started {
                ahead = try next()
                started = true
            }
            let chunk = ahead ?? []
            ahead = try next()
            done = ahead == nil
            return try sealer.seal(chunk, last: done)
        }
        try notePublishedBaseline()
    }

    public func baselines() throws(TransportError) -> [BaselineName] { try inner.baselines() }

    public func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError) {
        let keyring = try keys()
        var opener = BaselineOpener(node: name.node, transactionCount: name.transactionCount, frontierDigest: name.frontierDigest, keyring: keyring)
        let what = "baseline \(name):"
        do {
            try inner.readBaseline(name, maximumBytes: maximumBytes + maximumBytes / 64 + Self.overheadBytes) { chunk in
                let opened = try opener.feed(chunk)
                if !opened.isEmpty { try consume(opened) }
            }
            try opener.finish()
        } catch let error as SealError {
            throw Self.refusal(what, error)
        } catch let error as TransportError {
            // The carrier's transport wraps what the opener threw while it fed it.
            if let cause = error.cause as? SealError { throw Self.refusal(what, cause) }
            throw error
        } catch {
            throw TransportError(.io, "\(what) \(error)", cause: nil)
        }
        if name.node != node {
            do {
                try checkSigner(opener.signer, of: name.node, through: .max)
            } catch {
                throw Self.refusal(what, error)
            }
        }
        let problem: SealError? = ledger.withLock { held in
            guard name.node != node else { return nil }
            let peer = held.state.peers[name.node.rawValue] ?? ChainLedger.Peer(signer: Hex.encode(opener.signer))
            if let problem = Self.signerProblem(peer, opener.signer) { return problem }
            if held.state.peers[name.node.rawValue] == nil {
                held.state.peers[name.node.rawValue] = peer
                held.dirty = true
            }
            return nil
        }
        if let problem { throw Self.refusal(what, problem) }
    }
}
