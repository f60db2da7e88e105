import Foundation
import LogsyncCore
@testable import LogsyncSeal
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Devices of a sealed account (`docs/security.md`, "Devices"): a device without the recovery phrase
/// waits until a member approves it, then reads and writes everything; a revoked device reads nothing
/// written after its revocation, and what it signs after is refused; the roster's bytes are checked.
@Suite("Sealed devices")
struct SealedDevicesTests {
    static let account = "default"

    /// A node of the test: its store, its sealed transport and its engine.
    struct Device {
        let store: Store
        let transport: SealedTransport
        let engine: SyncEngine
    }

    static func device(_ cluster: SyncCluster, _ name: String, phrase key: AccountKey?) throws -> Device {
        let store = try cluster.store(name)
        let folder = try DirectoryTransport(root: cluster.shared, account: account, node: NodeID(store.nodeID))
        let (ledger, roster) = (cluster.directory.file("\(name).chain"), cluster.directory.file("\(name).roster"))
        let transport =
            if let key {
                SealedTransport(
                    wrapping: folder, keyring: SealKeyring(account: account, accountKey: key, signingKey: NodeSigningKey()), node: NodeID(store.nodeID),
                    ledgerPath: ledger, rosterPath: roster, rosterInterval: .zero)
            } else {
                SealedTransport(
                    waitingForApprovalOf: account, wrapping: folder, signingKey: NodeSigningKey(), node: NodeID(store.nodeID), ledgerPath: ledger,
                    rosterPath: roster, rosterInterval: .zero)
            }
        return Device(store: store, transport: transport, engine: SyncEngine(store: store, transport: transport))
    }

    /// `a`, holding the phrase, and `c`, which waited and `a` approved.
    static func memberAndApproved(_ cluster: SyncCluster, key: AccountKey) throws -> (Device, Device) {
        let a = try device(cluster, "a", phrase: key), c = try device(cluster, "c", phrase: nil)
        _ = try a.engine.sync()
        _ = try? c.engine.sync()
        _ = try a.transport.approve(fingerprint: c.transport.signingKeyFingerprint)
        return (a, c)
    }

    static func add(_ title: String, to device: Device) throws {
        try device.store.write { tx in try tx.insert("Note", ["id": SyncCluster.id(), "title": .text(title), "rank": .integer(0)]) }
    }

    static func titles(_ device: Device) throws -> Set<String> {
        Set(try device.store.read("SELECT title FROM Note").compactMap { row -> String? in
            if case .text(let title) = row[0] { return title }
            return nil
        })
    }

    @Test("a device without the phrase waits, is approved by fingerprint, then syncs; a revoked one reads nothing written after and is refused")
    func approveAndRevoke() throws {
        let cluster = try SyncCluster("devices")
        let key = AccountKey.random()
        let a = try Self.device(cluster, "a", phrase: key), b = try Self.device(cluster, "b", phrase: key)
        let c = try Self.device(cluster, "c", phrase: nil), d = try Self.device(cluster, "d", phrase: nil)
        try Self.add("a before", to: a)
        try Self.add("b before", to: b)
        for device in [a, b, a] { _ = try device.engine.sync() }
        // c and d wait, saying how to let them in, and have published their cards.
        for device in [c, d] {
            let waiting = #expect(throws: TransportError.self) { try device.engine.sync() }
            #expect(waiting?.code == .awaitingApproval && waiting?.message.contains(device.transport.signingKeyFingerprint) == true, "\(String(describing: waiting))")
        }
        #expect(c.transport.roster().awaitingApproval && c.transport.roster().waiting.isEmpty, "a waiting device lists nobody as waiting")
        #expect(throws: TransportError.self) { try c.transport.approve(fingerprint: d.transport.signingKeyFingerprint) }
        #expect(throws: TransportError.self) { try a.transport.approve(fingerprint: "0000-0000-0000-0000") }
        let message = try a.transport.approve(fingerprint: c.transport.signingKeyFingerprint)
        #expect(message.contains("approved"), "\(message)")
        #expect(a.transport.roster().members.count == 3, "a, b (verified under the key) and c")
        #expect(a.transport.roster().waiting.map(\.node) == [d.store.nodeID])
        _ = try? d.engine.sync()
        #expect(d.transport.roster().awaitingApproval && !d.transport.roster().leftOut, "a device that waits was not revoked")
        for _ in 0..<2 { for device in [c, a, b] { _ = try device.engine.sync() } }
        #expect(try Self.titles(c) == ["a before", "b before"], "c reads the history once approved")
        try Self.add("c approved", to: c)
        _ = try a.transport.approve(fingerprint: d.transport.signingKeyFingerprint)
        for _ in 0..<2 { for device in [c, d, a, b] { _ = try device.engine.sync() } }
        let approved: Set<String> = ["a before", "b before", "c approved"]
        for device in [a, b, c, d] { #expect(try Self.titles(device) == approved) }

        // c is revoked; every member learns of it at its next refresh and seals under the new epoch.
        func segments(of device: Device) throws -> Set<SegmentName> { Set(try a.transport.inner.ownSegments(of: NodeID(device.store.nodeID))) }
        let before = try [a, b, d].map(segments)
        // A name planted past c's head does not move where c's history is cut: only what opens counts.
        let cFolder = cluster.shared + "/\(Self.account)/\(c.store.nodeID)"
        let cHead = try a.transport.inner.ownSegments(of: NodeID(c.store.nodeID)).map(\.lastSequence).max() ?? 0
        FileManager.default.createFile(atPath: cFolder + "/" + SegmentName(node: NodeID(c.store.nodeID), firstSequence: cHead + 1, lastSequence: 999_999).fileName, contents: Data())
        let revoked = try a.transport.revoke(c.store.nodeID)
        #expect(a.transport.roster().revoked.first?.through == cHead, "\(a.transport.roster().revoked)")
        #expect(revoked.contains("epoch 1"), "\(revoked)")
        for device in [b, d] { _ = try device.engine.sync() }
        for device in [a, b, d] { #expect(device.transport.keyring?.currentEpoch == 1) }
        try Self.add("a after", to: a)
        try Self.add("b after", to: b)
        try Self.add("d after", to: d)
        try Self.add("c after its revocation", to: c)
        _ = try? c.engine.sync()
        for _ in 0..<2 { for device in [a, b, d] { _ = try device.engine.sync() } }
        // What the others wrote after the revocation: c opens none of it.
        let written = try zip([a, b, d], before).flatMap { try segments(of: $0).subtracting($1) }
        var opened = 0
        for name in written where (try? c.transport.read(name, maximumBytes: 1 << 20)) != nil { opened += 1 }
        #expect(written.count >= 3 && opened == 0, "c opened \(opened) of the \(written.count) segments written after its revocation")
        // The members read them all.
        #expect(written.allSatisfy { (try? b.transport.read($0, maximumBytes: 1 << 20)) != nil || $0.node.rawValue == b.store.nodeID })
        #expect(c.transport.roster().leftOut, "c knows it was left out")
        // What c signed after its revocation is refused, with why; the others converge without it.
        let expected = approved.union(["a after", "b after", "d after"])
        for device in [a, b, d] {
            #expect(try Self.titles(device) == expected)
            let refusals = try device.store.sync.refusals()
            #expect(refusals.contains { $0.node.rawValue == c.store.nodeID && $0.reason.contains("revoked") }, "\(refusals)")
        }
        // A device that joins with the phrase after the revocation (it can open nothing sealed since, so it
        // has verified nobody) takes the roster, whose recovery grant proves its author held the account's
        // keys, and reads everything.
        let f = try Self.device(cluster, "f", phrase: key)
        for _ in 0..<3 { _ = try? f.engine.sync() }
        #expect(f.transport.keyring?.currentEpoch == 1)
        #expect(try Self.titles(f) == expected)
        // c's revocation is final, and a device does not revoke itself.
        #expect(throws: TransportError.self) { try a.transport.approve(fingerprint: c.transport.signingKeyFingerprint) }
        #expect(throws: TransportError.self) { try a.transport.revoke(a.store.nodeID) }
    }

    @Test("with a roster, an object in a member's place signed by another key is refused, even by a node that never saw that member")
    func rosterNamesTheSigners() throws {
        let cluster = try SyncCluster("devices-signers")
        let key = AccountKey.random()
        let (a, c) = try Self.memberAndApproved(cluster, key: key)
        try Self.add("c approved", to: c)
        _ = try c.engine.sync()
        // A carrier working with someone who holds the phrase but not c's key: c's progress slot withheld,
        // and c's first segment swapped for one signed by another key, so that the forgery is the first
        // object of c's a newcomer sees.
        let cNode = NodeID(c.store.nodeID)
        let real = try #require(try a.transport.inner.ownSegments(of: cNode).first)
        let forged = try Sealer.seal(
            .segment, first: real.firstSequence, last: real.lastSequence, node: cNode,
            content: try SegmentEncoder.encode(
                schemaVersion: a.store.schema.version, account: Self.account, node: cNode,
                transactions: [LogTransaction(
                    sequence: real.firstSequence, timestamp: HLCTimestamp(physicalMilliseconds: UInt64(Date().timeIntervalSince1970 * 1000), logical: 0), author: "mallory", contextName: nil,
                    changes: [LogChange(entity: "Note", primaryKey: SyncCluster.id(), kind: .insert, causalLength: 1, values: ["title": .text("forged"), "rank": .integer(0)])])]),
            keyring: SealKeyring(account: Self.account, accountKey: key, signingKey: NodeSigningKey()))
        let folder = cluster.shared + "/\(Self.account)/\(cNode)"
        try Data(forged.bytes).write(to: URL(fileURLWithPath: folder + "/" + real.fileName))
        try FileManager.default.removeItem(atPath: folder + "/" + ProgressRecordName.fileName)
        // e holds the phrase and has never opened anything of c's: the roster, not first sight, says who c is.
        let e = try Self.device(cluster, "e", phrase: key)
        for _ in 0..<2 { _ = try e.engine.sync() }
        let seen = try Self.titles(e)
        #expect(!seen.contains("forged"), "the forged note is not applied: \(seen)")
        let refusals = try e.store.sync.refusals()
        #expect(refusals.contains { $0.node == cNode && $0.reason.contains("roster") }, "\(refusals)")
    }

    @Test("a member cannot put the roster's version out of reach: a jump past the bound is not taken, and a revocation still goes through")
    func versionJumpRefused() throws {
        let cluster = try SyncCluster("devices-version")
        let key = AccountKey.random()
        let (a, c) = try Self.memberAndApproved(cluster, key: key)
        _ = try c.engine.sync()
        // c (a stolen device, say) makes a roster of its own with the version near the end of the numbers.
        let held = try #require(c.transport.devicesState.withLock { $0.roster })
        let ring = try #require(c.transport.keyring)
        let jump = try Roster.make(
            account: Self.account, keyID: ring.keyID, version: UInt64.max, epochKeys: ring.allEpochKeys, members: held.members, revoked: [],
            recovery: held.recovery, author: c.transport.signingKey)
        #expect(!a.transport.adopt(jump, bytes: jump.encoded()), "a version jump past the bound is not taken")
        #expect(a.transport.roster().version == held.version)
        let revoked = try a.transport.revoke(c.store.nodeID)
        #expect(revoked.contains("epoch 1"), "\(revoked)")
        // And once revoked, c can never author a roster a member takes, even a well-formed next one.
        let next = try Roster.make(
            account: Self.account, keyID: ring.keyID, version: a.transport.roster().version + 1, epochKeys: ring.allEpochKeys, members: held.members,
            revoked: [], recovery: held.recovery, author: c.transport.signingKey)
        #expect(!a.transport.adopt(next, bytes: next.encoded()))
    }

    @Test("the roster: its bytes round-trip, every changed byte is refused, and a grant opens only for its recipient")
    func rosterBytes() throws {
        let key = AccountKey.random()
        let author = NodeSigningKey(), member = NodeSigningKey(), stranger = NodeSigningKey()
        let roster = try Roster.make(
            account: "a", keyID: key.keyID, version: 1, epochKeys: [key.firstEpochKeyBytes, [UInt8](repeating: 7, count: 32)],
            members: [Roster.Member(node: "n1", signingKey: member.publicKey, agreementKey: member.agreementPublicKey)], revoked: [],
            recovery: Array(key.recoveryAgreementKey.publicKey.rawRepresentation), author: author)
        let bytes = roster.encoded()
        #expect(try Roster.decode(bytes) == roster)
        #expect(roster.epochKeys(for: member.agreementKey)?.last == [UInt8](repeating: 7, count: 32))
        #expect(roster.epochKeys(for: key.recoveryAgreementKey)?.count == 2, "the recovery phrase is a recipient")
        #expect(roster.epochKeys(for: stranger.agreementKey) == nil)
        var rng = SeededRandom(seed: 37)
        for _ in 0..<300 {
            var changed = bytes
            let at = Int.random(in: 0..<changed.count, using: &rng)
            changed[at] ^= UInt8.random(in: 1...255, using: &rng)
            #expect(throws: SealError.self) { try Roster.decode(changed) }
        }
        for cut in stride(from: 0, to: bytes.count, by: 7) { #expect(throws: SealError.self) { try Roster.decode(Array(bytes[0..<cut])) } }
    }
}
