import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Sealed accounts against a carrier that lies (`AdversarialTransport`): three nodes write and sync at
/// random while the carrier drops, duplicates, reorders, moves between nodes and accounts, cuts, changes
/// and forges the segments each of them reads, and withholds nodes' tails. Every attack must be noticed
/// where the node reaches it (refused with a reason, or waited for), none applied, and nothing refused
/// that was not attacked; once the carrier tells the truth again, every node converges with a witness
/// that read the honest carrier all along.
///
/// `LOGSYNC_SEALED_SEEDS=1000` runs a thousand seeds; `@N` runs seed N alone.
@Suite("Sealed logs against a lying carrier")
struct SealedCarrierPropertyTests {
    static let account = "sealed"
    static let tallyLock = NSLock()

    /// One node of the run: its store, its engine, and the carrier's lies to it.
    struct Member {
        let store: Store
        let engine: SyncEngine
        let adversary: AdversarialTransport
        /// Attacks in force, with the cursor of the attacked node's stream when each was made.
        var attacks: [SegmentName: (kind: String, cursor: UInt64)] = [:]
        /// Every name ever attacked (a refusal of anything else is a false alarm).
        var everAttacked: Set<SegmentName> = []
        var node: NodeID { engine.node }
    }

    static let attackKinds = ["drop", "duplicate", "reorder", "another node's", "another account's", "cut", "changed", "forged plain", "withheld tail"]

    @Test("every attack is noticed where it is reached, none is applied, nothing else is refused, and all converge once it stops", arguments: propertySeeds("LOGSYNC_SEALED_SEEDS", default: 6, from: 1))
    func lyingCarrier(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let cluster = try SyncCluster("seal\(seed)")
        let carrier = MemoryCarrier()
        let key = AccountKey.random()
        func sealed(_ inner: any Transport, _ store: Store) -> SealedTransport {
            SealedTransport(
                wrapping: inner, keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey()),
                node: NodeID(store.nodeID), ledgerPath: cluster.directory.file("\(store.nodeID).chain"))
        }
        let configuration = SyncConfiguration(account: Self.account, maximumChangesPerSegment: 3, retention: RetentionConfiguration(progressIntervalMilliseconds: 0))
        var members: [Member] = []
        for name in ["a", "b", "c"] {
            let store = try cluster.store(name)
            let adversary = AdversarialTransport(wrapping: carrier.transport(account: Self.account, node: NodeID(store.nodeID)))
            members.append(Member(store: store, engine: SyncEngine(store: store, transport: sealed(adversary, store), configuration: configuration), adversary: adversary))
        }
        let witness = try cluster.store("witness")
        let witnessEngine = SyncEngine(store: witness, transport: sealed(carrier.transport(account: Self.account, node: NodeID(witness.nodeID)), witness), configuration: configuration)
        // Another account's node, for segments moved between accounts: its own key.
        let stranger = try cluster.store("stranger")
        let strangerEngine = SyncEngine(
            store: stranger,
            transport: SealedTransport(
                wrapping: carrier.transport(account: "elsewhere", node: NodeID(stranger.nodeID)),
                keyring: SealKeyring(account: "elsewhere", accountKey: AccountKey.random(), signingKey: NodeSigningKey()), node: NodeID(stranger.nodeID),
                ledgerPath: nil),
            configuration: SyncConfiguration(account: "elsewhere", maximumChangesPerSegment: 3))
        for _ in 0..<3 { try SyncCluster.randomWrite(stranger, using: &rng) }
        _ = try strangerEngine.sync()
        let honest = carrier.transport(account: Self.account, node: NodeID("honest-reader"))
        let attacking = seed % 5 != 0  // every fifth seed: no attack at all, and so no alarm may be raised
        var attacksMade: [String: Int] = [:]

        let steps = Int.random(in: 30...60, using: &rng)
        for step in 0..<steps {
            let writer = Int.random(in: 0..<members.count, using: &rng)
            try SyncCluster.randomWrite(members[writer].store, using: &rng)
            if Int.random(in: 0..<3, using: &rng) == 0 { _ = try members[writer].engine.sync() }
            if attacking, Int.random(in: 0..<3, using: &rng) == 0 {
                let victim = Int.random(in: 0..<members.count, using: &rng)
                if let made = try attack(&members[victim], carrier: carrier, honest: honest, using: &rng) { attacksMade[made, default: 0] += 1 }
            }
            if Int.random(in: 0..<8, using: &rng) == 0 {
                let healed = Int.random(in: 0..<members.count, using: &rng)
                members[healed].adversary.heal()
                members[healed].attacks = [:]
            }
            let syncing = Int.random(in: 0..<members.count, using: &rng)
            let report = try members[syncing].engine.sync()
            try check(members[syncing], report: report, seed: seed, step: step)
            _ = try witnessEngine.sync()
        }
        for index in members.indices {
            members[index].adversary.heal()
            members[index].attacks = [:]
        }
        for _ in 0..<4 {
            for member in members { _ = try member.engine.sync() }
            _ = try witnessEngine.sync()
        }
        let expected = try witness.syncedTables()
        for member in members {
            #expect(try member.store.syncedTables() == expected, "seed \(seed): \(member.node) differs from the witness once the carrier is honest")
            let left = try member.store.sync.refusals().map(\.reason)
            #expect(left.isEmpty, "seed \(seed): refusals left once the carrier is honest: \(left)")
            #expect(try member.store.sync.quarantined().isEmpty, "seed \(seed)")
        }
        #expect(try witness.sync.refusals().isEmpty && witness.sync.quarantined().isEmpty, "seed \(seed): the witness read the honest carrier")
        if !attacking { #expect(attacksMade.isEmpty) }
        // For long runs: what this seed carried and attacked, one line per seed (docs/security.md).
        if let tally = ProcessInfo.processInfo.environment["LOGSYNC_SEALED_TALLY"] {
            Self.tallyLock.lock()
            defer { Self.tallyLock.unlock() }
            guard let handle = FileHandle(forWritingAtPath: tally) else { return }
            handle.seekToEndOfFile()
            let attacks = attacksMade.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            handle.write(Data("seed \(seed) segments \(carrier.segments(of: Self.account).count) attacks \(attacksMade.values.reduce(0, +)) \(attacks)\n".utf8))
            try? handle.close()
        }
    }

    /// Makes the carrier lie to `member` about a segment it still needs; returns the attack's kind, nil when
    /// there is nothing to attack.
    func attack(_ member: inout Member, carrier: MemoryCarrier, honest: any Transport, using rng: inout SeededRandom) throws -> String? {
        let cursors = try member.store.sync.appliedSequences()
        let all = carrier.segments(of: Self.account)
        let needed = all.filter { $0.node != member.node && $0.firstSequence > cursors[$0.node] ?? 0 && member.attacks[$0] == nil }
        guard let target = needed.randomElement(using: &rng) else { return nil }
        let kind = Self.attackKinds.randomElement(using: &rng)!
        let genuine = try honest.read(target, maximumBytes: 1 << 24)
        let sameNode = all.filter { $0.node == target.node && $0 != target }
        let otherNode = all.filter { $0.node != target.node }
        var attack: AdversarialTransport.Attack
        switch kind {
        case "drop": attack = .drop
        case "duplicate", "reorder":
            guard let other = sameNode.randomElement(using: &rng) else { return nil }
            attack = .serve(try honest.read(other, maximumBytes: 1 << 24), kind: kind)
            if kind == "reorder", member.attacks[other] == nil, other.firstSequence > cursors[other.node] ?? 0 {
                // Both served in each other's place.
                member.adversary.attack(other, .serve(genuine, kind: kind))
                member.attacks[other] = (kind, cursors[other.node] ?? 0)
                member.everAttacked.insert(other)
            }
        case "another node's":
            guard let other = otherNode.randomElement(using: &rng) else { return nil }
            attack = .serve(try honest.read(other, maximumBytes: 1 << 24), kind: kind)
        case "another account's":
            guard let other = carrier.segments(of: "elsewhere").randomElement(using: &rng) else { return nil }
            attack = .serve(try carrier.transport(account: "elsewhere", node: NodeID("x")).read(other, maximumBytes: 1 << 24), kind: kind)
        case "cut": attack = .serve(Array(genuine.prefix(Int.random(in: 0..<genuine.count, using: &rng))), kind: kind)
        case "changed":
            var changed = genuine
            changed[Int.random(in: 0..<changed.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            attack = .serve(changed, kind: kind)
        case "forged plain": attack = .serve(try Self.forged(target), kind: kind)
        default:
            // The node's tail from the target on.
            member.adversary.withhold(target.node, after: target.firstSequence - 1)
            attack = .drop
        }
        member.adversary.attack(target, attack)
        member.attacks[target] = (kind, cursors[target.node] ?? 0)
        member.everAttacked.insert(target)
        return kind
    }

    /// After `member` synced: nothing attacked was applied, the first attack of each stream it reached
    /// was noticed, nothing else was refused, and no forged value is in its tables.
    func check(_ member: Member, report: SyncReport, seed: UInt64, step: Int) throws {
        let cursors = try member.store.sync.appliedSequences()
        let refusals = try member.store.sync.refusals()
        for refusal in refusals {
            let name = SegmentName(node: refusal.node, firstSequence: refusal.firstSequence, lastSequence: refusal.lastSequence)
            #expect(member.everAttacked.contains(name), "seed \(seed) step \(step): \(name) refused but never attacked: \(refusal.reason)")
        }
        for (node, attacks) in Dictionary(grouping: member.attacks, by: { $0.key.node }) {
            let cursor = cursors[node] ?? 0
            for (name, attack) in attacks where name.firstSequence > attack.cursor {
                #expect(cursor < name.firstSequence, "seed \(seed) step \(step): \(name), attacked (\(attack.kind)), was applied")
            }
            // The first attacked segment of this stream, if the node has reached it.
            guard let first = attacks.map(\.key).min(), first.firstSequence == cursor + 1 else { continue }
            let kind = attacks.first { $0.key == first }!.value.kind
            if kind == "drop" || kind == "withheld tail" {
                #expect(report.waiting[node] == cursor + 1, "seed \(seed) step \(step): \(first) (\(kind)) not waited for")
            } else {
                let refusal = refusals.first { $0.node == node && $0.firstSequence == first.firstSequence && $0.lastSequence == first.lastSequence }
                #expect(refusal != nil, "seed \(seed) step \(step): \(first) (\(kind)) reached but not refused")
            }
        }
        #expect(try member.store.read("SELECT count(*) FROM Note WHERE title LIKE 'EVIL%'")[0][0] == .integer(0), "seed \(seed): a forged value was applied")
        #expect(!report.ignored.contains { if case .unsealable = $0.reason { return true } else { return false } }, "seed \(seed): a progress record was refused: \(report.ignored)")
    }

    /// A plain segment of the target's node and range, well formed and fitting the schema: what a carrier
    /// that holds no key can still write.
    static func forged(_ target: SegmentName) throws -> [UInt8] {
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        let transactions = (target.firstSequence...target.lastSequence).map { sequence in
            LogTransaction(
                sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: now, logical: 0), author: "carrier", contextName: nil,
                changes: [
                    LogChange(entity: "Note", primaryKey: SyncCluster.id(), kind: .insert, causalLength: 1, values: ["title": .text("EVIL \(sequence)"), "rank": .integer(1)])
                ])
        }
        return try SegmentEncoder.encode(schemaVersion: 1, account: account, node: target.node, transactions: transactions)
    }
}
