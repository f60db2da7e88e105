import Crypto
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncTransport

/// Devices of a sealed account (`docs/security.md`, "Devices"): every node publishes its device card in
/// its progress slot, with the newest roster it holds; a member approves a waiting device by wrapping the
/// epoch keys to it, and revokes one by starting an epoch the revoked device is not given.
extension SealedTransport {
    struct DeviceState {
        /// nil while this device waits for approval.
        var keyring: SealKeyring?
        var roster: Roster?
        var rosterBytes: [UInt8]?
        /// The newest device card of each node, as read from its slot.
        var cards: [String: DeviceCard] = [:]
        /// The progress record last published, sealed again when the slot changes (a new roster).
        var lastProgress: [UInt8]?
        var placeholderPublished = false
        /// When the slots were last read (``SealedTransport/progressRecords()``), for a newer roster.
        var slotsReadAt: ContinuousClock.Instant?
        /// A valid newer roster that grants this device nothing: it was revoked.
        var leftOut: Roster?
        /// Every key a roster held here revoked: no later roster may be made by one or name one as a member.
        var revokedKeys: Set<[UInt8]> = []
    }

    /// This device's signing key's fingerprint: what a member approves it by.
    public var signingKeyFingerprint: String { signingKey.fingerprint }

    /// The keys this node seals and opens with now; nil while it waits for approval.
    public var keyring: SealKeyring? { devicesState.withLock { $0.keyring } }

    /// The keys, or — for a device that waits — a look for the roster that grants them first (an approval
    /// may have come since the last look), then ``TransportError/Code/awaitingApproval``.
    func keys() throws(TransportError) -> SealKeyring {
        if let keyring { return keyring }
        try awaitApproval()
        if let keyring { return keyring }
        throw waiting()
    }

    private func waiting() -> TransportError {
        TransportError(
            .awaitingApproval,
            "this device holds no key of sealed account '\(account)' yet: on a device of the account, run 'syncctl devices approve \(signingKey.fingerprint)' (this device's fingerprint), or give it the recovery phrase ([seal] key_file)")
    }

    /// A device without keys: publishes its card (once per start), looks for a roster that grants it
    /// the keys, and throws ``TransportError/Code/awaitingApproval`` until one does.
    func awaitApproval() throws(TransportError) {
        guard keyring == nil else { return }
        if !devicesState.withLock({ $0.placeholderPublished }) {
            let placeholder: [UInt8]
            do {
                placeholder = try ProgressSlot.placeholder(account: account, node: node, key: signingKey)
            } catch {
                throw TransportError(.io, "cannot sign this device's card: \(error)", cause: error)
            }
            try publishSlot(record: placeholder)
            devicesState.withLock { $0.placeholderPublished = true }
        }
        _ = try progressRecords()
        if keyring == nil { throw waiting() }
    }

    /// Reads the progress slots for a newer roster at most every ``rosterInterval``.
    func readRosterIfDue() throws(TransportError) {
        let now = ContinuousClock.now
        let due = devicesState.withLock { state in state.slotsReadAt.map({ now - $0 >= rosterInterval }) ?? true }
        if due { _ = try progressRecords() }
    }

    /// Publishes this node's slot: `record`, then its card and the roster it holds.
    /// One publish at a time, the roster read inside: a round's progress record and an approval's slot
    /// cannot land in the order that leaves the older roster on the carrier.
    func publishSlot(record: [UInt8]) throws(TransportError) {
        let card: DeviceCard
        do {
            card = try DeviceCard(node: node, key: signingKey)
        } catch {
            throw TransportError(.io, "cannot sign this device's card: \(error)", cause: error)
        }
        try slotPublishing.withLock { _ throws(TransportError) in
            try inner.publishProgress(ProgressSlot.encode(record: record, card: card, roster: devicesState.withLock { $0.rosterBytes }))
        }
    }

    /// Publishes the slot again after the roster changed: the last progress record sealed under the
    /// current epoch, or a placeholder when there is none yet.
    private func republishSlot() throws(TransportError) {
        let (keyring, last) = devicesState.withLock { ($0.keyring, $0.lastProgress) }
        do {
            if let keyring, let last {
                try publishSlot(record: try Sealer.seal(.progressRecord, node: node, content: last, keyring: keyring).bytes)
            } else {
                try publishSlot(record: try ProgressSlot.placeholder(account: account, node: node, key: signingKey))
            }
        } catch let error as TransportError {
            throw error
        } catch {
            throw TransportError(.io, "cannot publish this device's slot: \(error)")
        }
    }

    /// Who may have signed an object of `other`'s that reaches sequence `last` (`.max` for objects that
    /// are not a range of sequences):
    /// - this node's own segments, only its own key (a restore keeps the key beside the store);
    /// - with a roster, only the key it names for `other` (as a member or a revoked device): no
    ///   first-sight pinning for the nodes it knows;
    /// - a revoked device, nothing past what was taken from it at its revocation.
    func checkSigner(_ signer: [UInt8], of other: NodeID, through last: UInt64) throws(SealError) {
        if other == node, signer != signingKey.publicKey {
            throw SealError(.signerChanged, "it is sealed as this node's own, and signed by \(NodeSigningKey.fingerprint(of: signer)), not by this node's key")
        }
        guard let roster = devicesState.withLock({ $0.roster }) else { return }
        let named = roster.members.filter { $0.node == other.rawValue }.map(\.signingKey) + roster.revoked.filter { $0.node == other.rawValue }.map(\.signingKey)
        if !named.isEmpty, !named.contains(signer) {
            throw SealError(
                .signerChanged,
                "it is signed by \(NodeSigningKey.fingerprint(of: signer)), and the account's roster (version \(roster.version)) names \(named.map { NodeSigningKey.fingerprint(of: $0) }.joined(separator: ", ")) for node \(other)")
        }
        if let gone = roster.revocation(of: signer), last > gone.through {
            throw SealError(
                .revoked,
                "it is signed by \(NodeSigningKey.fingerprint(of: signer)) (node \(gone.node)), revoked from the account in roster version \(roster.version) after its sequence \(gone.through)")
        }
    }

    // MARK: Rosters

    func loadRoster() {
        guard let rosterPath, let contents = FileManager.default.contents(atPath: rosterPath) else { return }
        let data = [UInt8](contents)
        guard let roster = try? Roster.decode(data) else { return }
        adopt(roster, bytes: data, trusted: true)
    }

    /// The newest acceptable of the rosters read from the slots.
    func consider(_ candidates: [(roster: Roster, bytes: [UInt8])]) {
        for (roster, bytes) in candidates.sorted(by: { $0.roster.version > $1.roster.version }) where adopt(roster, bytes: bytes) { return }
    }

    /// Takes `roster` when it is newer than the one held, of this account and key, made by a member of the
    /// roster held, and grants this device — or the recovery phrase it holds — the keys of every epoch,
    /// keeping the ones held. Returns whether it is the roster held now.
    ///
    /// - Newer: a higher version, at most ``maximumVersionStep`` above the one held (a member cannot
    ///   jump the version out of reach); of two of one version, the one with the higher epoch, then more
    ///   revocations, then the lower hash of its bytes — so a revocation wins over a concurrent approval,
    ///   and concurrent changes end the same on every node.
    /// - Before any roster is held: made by a device verified here under the account key, or — for a
    ///   device holding the phrase — one whose recovery grant opens to the account's own epoch-0 key (its
    ///   author held the account's keys); a device without keys takes the first that grants it keys.
    /// - Never one made by, or naming as a member, a key a roster held here revoked.
    @discardableResult
    func adopt(_ roster: Roster, bytes: [UInt8], trusted: Bool = false) -> Bool {
        let pinned = Set(ledger.withLock { $0.state.peers.values.map(\.signer) })
        let taken: Bool = devicesState.withLock { state in
            guard roster.account == account else { return false }
            if let ring = state.keyring, roster.keyID != ring.keyID { return false }
            guard !state.revokedKeys.contains(roster.author), !roster.members.contains(where: { state.revokedKeys.contains($0.signingKey) }) else { return false }
            let phraseKeys = state.keyring?.accountKey.flatMap { roster.epochKeys(for: $0.recoveryAgreementKey) }
            if let held = state.roster, let heldBytes = state.rosterBytes {
                if heldBytes == bytes { return true }
                guard roster.version <= held.version &+ Self.maximumVersionStep, roster.version >= held.version else { return false }
                if roster.version == held.version {
                    let mine = (held.epoch, held.revoked.count), theirs = (roster.epoch, roster.revoked.count)
                    guard theirs > mine || (theirs == mine && Array(SHA256.hash(data: bytes)).lexicographicallyPrecedes(Array(SHA256.hash(data: heldBytes)))) else { return false }
                }
                guard trusted || held.member(signedBy: roster.author) != nil else { return false }
            } else if let ring = state.keyring, !trusted {
                let provedByPhrase = ring.accountKey.map { phraseKeys?.first == $0.firstEpochKeyBytes } ?? false
                guard roster.author == signingKey.publicKey || pinned.contains(Hex.encode(roster.author)) || provedByPhrase else { return false }
            }
            guard let keys = roster.epochKeys(for: signingKey.agreementKey) ?? phraseKeys else {
                // A valid newer roster that grants this member nothing: it was revoked.
                if state.keyring != nil, roster.version > (state.roster?.version ?? 0) { state.leftOut = roster }
                return false
            }
            if let ring = state.keyring {
                guard keys.count >= Int(ring.currentEpoch) + 1, ring.allEpochKeys.enumerated().allSatisfy({ keys[$0.offset] == $0.element }) else { return false }
            }
            state.keyring = SealKeyring(account: account, keyID: roster.keyID, keys: keys, signingKey: signingKey, accountKey: state.keyring?.accountKey)
            state.roster = roster
            state.rosterBytes = bytes
            state.revokedKeys.formUnion(roster.revoked.map(\.signingKey))
            state.leftOut = nil
            return true
        }
        if taken, let rosterPath { try? DurableFiles.replace(rosterPath, with: bytes) }
        return taken
    }

    /// How far a roster's version may move past the one held: more than enough for the changes one
    /// device can miss, and far from the end of the numbers.
    static let maximumVersionStep: UInt64 = 1 << 20

    /// The largest segment a revocation reads to verify where the revoked device's history ends.
    static let revocationReadLimit = 64 << 20

    /// The members a first roster starts from: this device, and every device whose card was read and whose
    /// objects were verified here under the account key.
    private func initialMembers(_ state: DeviceState) -> [Roster.Member] {
        let pinned = Set(ledger.withLock { $0.state.peers.values.map(\.signer) })
        let own = Roster.Member(node: node.rawValue, signingKey: signingKey.publicKey, agreementKey: signingKey.agreementPublicKey)
        return [own] + state.cards.values.filter { $0.node != node.rawValue && pinned.contains(Hex.encode($0.signingKey)) }.sorted { $0.node < $1.node }.map(\.member)
    }

    /// Makes the next roster from the one held with `change`, takes it and publishes it in this node's slot.
    private func change(_ what: String, _ change: (inout [Roster.Member], inout [Roster.Revoked], inout [[UInt8]]) throws(TransportError) -> Void) throws(TransportError) -> Roster {
        _ = try progressRecords()
        let state = devicesState.withLock { $0 }
        guard let ring = state.keyring else { throw waiting() }
        var members = state.roster?.members ?? initialMembers(state)
        var revoked = state.roster?.revoked ?? []
        var keys = ring.allEpochKeys
        try change(&members, &revoked, &keys)
        guard let recovery = state.roster?.recovery ?? ring.accountKey.map({ Array($0.recoveryAgreementKey.publicKey.rawRepresentation) }) else {
            throw TransportError(.unsealable, "cannot \(what): this device holds no roster and no recovery phrase to start one with")
        }
        let roster: Roster
        do {
            roster = try Roster.make(
                account: account, keyID: ring.keyID, version: (state.roster?.version ?? 0) &+ 1, epochKeys: keys, members: members, revoked: revoked,
                recovery: recovery, author: signingKey)
        } catch {
            throw TransportError(.io, "cannot \(what): \(error)", cause: error)
        }
        let bytes = roster.encoded()
        guard adopt(roster, bytes: bytes, trusted: true) else { throw TransportError(.io, "cannot \(what): the new roster was not taken") }
        try republishSlot()
        return roster
    }

    /// Approves the waiting device whose card shows `fingerprint`: it joins the roster, and the epoch
    /// keys are wrapped to it. Returns what was done, in words.
    public func approve(fingerprint: String) throws(TransportError) -> String {
        var approved: DeviceCard?
        let roster = try change("approve \(fingerprint)") { (members, revoked, _) throws(TransportError) in
            guard let card = devicesState.withLock({ $0.cards.values.first { $0.fingerprint == fingerprint } }) else {
                throw TransportError(
                    .notFound,
                    "no device with fingerprint \(fingerprint) has published its card in account '\(account)': start syncd on it with [seal] enabled and no key_file, check the fingerprint it shows ('syncctl devices list' there), and try again")
            }
            guard !revoked.contains(where: { $0.signingKey == card.signingKey }) else {
                throw TransportError(.conflict, "device \(fingerprint) (node \(card.node)) was revoked; a revoked key is never taken back: give that device a new installation (a new node id and key)")
            }
            guard !members.contains(where: { $0.signingKey == card.signingKey }) else {
                throw TransportError(.conflict, "device \(fingerprint) (node \(card.node)) is a member already")
            }
            members.append(card.member)
            approved = card
        }
        return "approved device \(fingerprint) (node \(approved?.node ?? "?")): roster version \(roster.version), key epoch \(roster.epoch), \(roster.members.count) members"
    }

    /// Revokes the member named by node id or fingerprint: a new epoch whose key is wrapped to the
    /// remaining members and the recovery phrase only; what it signs from now on is refused.
    public func revoke(_ device: String) throws(TransportError) -> String {
        var gone: Roster.Member?
        let roster = try change("revoke \(device)") { (members, revoked, keys) throws(TransportError) in
            guard let index = members.firstIndex(where: { $0.node == device || NodeSigningKey.fingerprint(of: $0.signingKey) == device }) else {
                throw TransportError(.notFound, "no member of account '\(account)' has node id or fingerprint \(device) ('syncctl devices list' shows them)")
            }
            let member = members[index]
            guard member.signingKey != signingKey.publicKey else {
                throw TransportError(.conflict, "a device does not revoke itself: revoke it from another member")
            }
            // What is taken from it: what was verified here, and what the carrier holds of it now (every
            // node that applied any of its segments read them there) — each of those read and verified
            // here first, in order, so that neither a planted name nor a forgery moves the cutoff. A
            // carrier that cannot be listed stops the revocation.
            var through = ledger.withLock { $0.state.peers[member.node]?.last ?? 0 }
            for name in try inner.ownSegments(of: NodeID(member.node)).sorted() where name.lastSequence > through {
                guard name.firstSequence == through + 1, (try? read(name, maximumBytes: Self.revocationReadLimit)) != nil else { break }
                through = name.lastSequence
            }
            members.remove(at: index)
            revoked.append(Roster.Revoked(node: member.node, signingKey: member.signingKey, through: through))
            keys.append(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
            gone = member
        }
        return "revoked device \(NodeSigningKey.fingerprint(of: gone?.signingKey ?? [])) (node \(gone?.node ?? "?")) after its sequence \(roster.revoked.last?.through ?? 0): key epoch \(roster.epoch), wrapped to \(roster.members.count) members and the recovery phrase"
    }

    /// Who is in: the roster's epoch and version, its members, revoked devices, devices whose cards wait
    /// for approval, and whether this device waits or was left out.
    public func roster() -> (epoch: UInt32, version: UInt64, members: [Roster.Member], revoked: [Roster.Revoked], waiting: [DeviceCard], awaitingApproval: Bool, leftOut: Bool) {
        let state = devicesState.withLock { $0 }
        let members = state.roster?.members ?? (state.keyring == nil ? [] : initialMembers(state))
        let known = Set(members.map(\.signingKey) + (state.roster?.revoked.map(\.signingKey) ?? []))
        // A device that waits itself cannot tell members from newcomers, nor approve anyone: it lists none.
        let waiting = state.keyring == nil ? [] : state.cards.values.filter { !known.contains($0.signingKey) && $0.node != node.rawValue }.sorted { $0.node < $1.node }
        return (state.keyring?.currentEpoch ?? 0, state.roster?.version ?? 0, members, state.roster?.revoked ?? [], waiting, state.keyring == nil, state.leftOut != nil)
    }
}
