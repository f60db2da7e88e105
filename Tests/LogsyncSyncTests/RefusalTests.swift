import Foundation
import LogsyncCore
import LogsyncStore
@testable import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// What becomes of a refused segment (`docs/operations.md`, "Refused segments"): it holds its own node
/// only, is recorded, is not decoded again while its bytes stay the same, and the operator releases it
/// (try again, as after an upgrade) or drops it (its node goes on after it, exactly once).
@Suite("Refused segments")
struct RefusalTests {
    static func uuid() -> String { UUID().uuidString.lowercased() }

    static func publish(_ cluster: SyncCluster, node: NodeID, sequence: UInt64, _ changes: [LogChange], schemaVersion: Int = 1) throws -> SegmentName {
        let stamp = HLCTimestamp(physicalMilliseconds: UInt64(Date().timeIntervalSince1970 * 1000) - 5_000, logical: UInt16(sequence))
        let bytes = try SegmentEncoder.encode(
            schemaVersion: schemaVersion, account: "default", node: node,
            transactions: [LogTransaction(sequence: sequence, timestamp: stamp, author: nil, contextName: nil, changes: changes)])
        let folder = cluster.shared + "/default/" + node.rawValue
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let name = SegmentName(node: node, firstSequence: sequence, lastSequence: sequence)
        try Data(bytes).write(to: URL(fileURLWithPath: folder + "/" + name.fileName))
        return name
    }

    static func note(_ title: String, causalLength: UInt64 = 1, key: String = uuid()) -> LogChange {
        LogChange(entity: "Note", primaryKey: .text(key), kind: .insert, causalLength: causalLength, values: ["title": .text(title), "rank": 1])
    }

    @Test("a refused segment holds only its node; drop moves that node on once, durably; a different copy of it is divergence")
    func dropGoesOnExactlyOnce() throws {
        let cluster = try SyncCluster("refusal")
        let good = try cluster.store("good")
        let receiver = try cluster.store("receiver")
        let engine = try cluster.engine(receiver)
        let c = NodeID(Self.uuid())
        let forged = try Self.publish(cluster, node: c, sequence: 1, [Self.note("forged", causalLength: (1 << 63) + 5)])
        let laterKey = Self.uuid()
        _ = try Self.publish(cluster, node: c, sequence: 2, [Self.note("later", key: laterKey)])
        try good.write { try $0.insert("Note", ["id": .text(Self.uuid()), "title": "good", "rank": 1]) }
        _ = try cluster.engine(good).sync()

        let first = try engine.sync()
        #expect(first.rejected.map(\.name) == [forged])
        #expect(first.refused.map(\.name) == [forged], "new this round")
        #expect(first.rejected[0].reason.contains("causal length 9223372036854775813"), "\(first.rejected)")
        #expect(first.waiting[c] == 1)
        #expect(try receiver.sync.appliedSequence(from: NodeID(good.nodeID)) == 1, "the other node is applied")
        let refusals = try receiver.sync.refusals()
        #expect(refusals.count == 1 && refusals[0].lastSequence == 1 && refusals[0].location.hasSuffix(forged.fileName))

        // The next round refuses the same bytes again, and says so only once.
        let second = try engine.sync()
        #expect(second.rejected.map(\.name) == [forged] && second.refused.isEmpty)

        // Only what is refused can be dropped.
        #expect(throws: StoreError.self) { try engine.drop(SegmentName(node: c, firstSequence: 2, lastSequence: 2)) }
        let dropped = try engine.drop(forged)
        #expect(dropped.reason == refusals[0].reason)
        #expect(try receiver.sync.appliedSequence(from: c) == 1)
        #expect(try receiver.sync.refusals().isEmpty && (try receiver.sync.droppedSegments()).count == 1)
        let third = try engine.sync()
        #expect(third.applied.map(\.firstSequence) == [2], "C goes on after the dropped segment")
        #expect(try receiver.read("SELECT title FROM Note WHERE id = ?", [.text(laterKey)]) == [[.text("later")]])
        #expect(try receiver.read("SELECT count(*) FROM Note WHERE title = 'forged'") == [[.integer(0)]])
        // Exactly once: nothing is applied again, and the dropped file checks as what was recorded.
        let fourth = try SyncEngine(store: receiver, transport: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(receiver.nodeID))).sync()
        #expect(fourth.applied.isEmpty && fourth.quarantined.isEmpty && fourth.rejected.isEmpty, "\(fourth)")
        // Other bytes under the dropped name are divergence, as for any applied segment.
        _ = try Self.publish(cluster, node: c, sequence: 1, [Self.note("another forgery")])
        let restarted = SyncEngine(store: receiver, transport: try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(receiver.nodeID)))
        let fifth = try restarted.sync()
        #expect(fifth.quarantined == [forged], "\(fifth)")
    }

    @Test("an unknown entity is refused; after the app upgrades, release lets it in; a newer schema's segment is kept instead")
    func releaseAfterUpgrade() throws {
        let v2 = Schema(version: 2, entities: SyncCluster.schema.entities + [Entity("Tag", attributes: [Attribute("name", .text)])])
        let cluster = try SyncCluster("release")
        var receiver: Store? = try cluster.store("receiver")
        let c = NodeID(Self.uuid())
        let d = NodeID(Self.uuid())
        let tag = LogChange(entity: "Tag", primaryKey: .text(Self.uuid()), kind: .insert, causalLength: 1, values: ["name": "t"])
        // C writes under version 1 (a bug or a forgery): refused. D writes under version 2: kept, not refused.
        let refused = try Self.publish(cluster, node: c, sequence: 1, [tag])
        _ = try Self.publish(cluster, node: d, sequence: 1, [tag], schemaVersion: 2)
        let report = try cluster.engine(receiver!).sync()
        #expect(report.rejected.map(\.name) == [refused])
        #expect(report.rejected.first?.reason.contains("entity 'Tag' is not declared by this node's schema (version 1)") == true)
        #expect(report.keptForSchema.map(\.node) == [d] && report.applied.map(\.node) == [d], "\(report)")

        receiver = nil
        let upgraded = try Store(path: cluster.storePath("receiver"), schema: v2)
        let engine = try cluster.engine(upgraded)
        // D's kept change merges now; C's bytes stay refused until the operator releases them.
        let upgradedRound = try engine.sync()
        #expect(upgradedRound.rejected.map(\.name) == [refused] && upgradedRound.appliedKept == 1, "\(upgradedRound)")
        #expect(try engine.release(refused))
        #expect(try engine.release(refused) == false)
        let after = try engine.sync()
        #expect(after.applied.map(\.node) == [c], "\(after)")
        #expect(try upgraded.read("SELECT count(*) FROM Tag") == [[.integer(1)]], "C and D inserted the same row")
    }

    @Test("a segment replaced by good bytes is tried again at once and its refusal forgotten")
    func replacedFileIsTriedAgain() throws {
        let cluster = try SyncCluster("replaced")
        let receiver = try cluster.store("receiver")
        let engine = try cluster.engine(receiver)
        let c = NodeID(Self.uuid())
        let key = Self.uuid()
        _ = try Self.publish(cluster, node: c, sequence: 1, [LogChange(entity: "Note", primaryKey: .text(key), kind: .insert, causalLength: 1, values: ["rank": .text("yes")])])
        #expect(try engine.sync().rejected.first?.reason.contains("'Note.rank' of row \(key) is 3 bytes of text, not an integer") == true)
        _ = try Self.publish(cluster, node: c, sequence: 1, [Self.note("fixed", key: key)])
        #expect(try engine.sync().applied.map(\.node) == [c])
        #expect(try receiver.sync.refusals().isEmpty)
    }

    @Test("a file named as a baseline with the largest count, in this node's own folder, traps nothing")
    func forgedBaselineName() throws {
        let cluster = try SyncCluster("basename")
        let store = try cluster.store("a")
        let clock = TestWallClock()
        let engine = try cluster.retainingEngine(store, clock: clock, baselineEvery: 2)
        try store.write { try $0.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) }
        _ = try engine.sync()
        let folder = cluster.shared + "/default/" + store.nodeID
        let forged = "18446744073709551615-0000000000000000." + BaselineName.fileExtension
        try Data("not a baseline".utf8).write(to: URL(fileURLWithPath: folder + "/" + forged))
        for _ in 0..<3 {
            try store.write { try $0.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) }
            _ = try cluster.retainingEngine(store, clock: clock, baselineEvery: 2).sync()
        }
        #expect(try store.sync.exportedSequence() == 4, "every round ran")
    }

    @Test("hostile segments against a converted and a contracted attribute: the old name with another type is refused, not converted to NULL; a huge value under a contracted name is dropped")
    func hostileConvertedAndContracted() throws {
        var release = SchemaFleet.version3
        release.version = 5
        let cluster = try SyncCluster("hostile-evolution")
        let receiver = try Store(path: cluster.storePath("receiver"), schema: release)
        let engine = try cluster.engine(receiver)
        let liar = NodeID(Self.uuid()), bulky = NodeID(Self.uuid())
        // `pinned` converts into `priority` from bool: text under it is no bool.
        _ = try Self.publish(cluster, node: liar, sequence: 1, [
            LogChange(entity: "Note", primaryKey: .text(Self.uuid()), kind: .insert, causalLength: 1, values: ["title": "x", "pinned": .text("yes")]),
        ])
        // `rank` is contracted: a 1 MiB value under it never reaches the store.
        let kept = Self.uuid()
        _ = try Self.publish(cluster, node: bulky, sequence: 1, [
            LogChange(
                entity: "Note", primaryKey: .text(kept), kind: .insert, causalLength: 1,
                values: ["title": "big", "rank": .text(String(repeating: "r", count: 1 << 20))]),
        ])
        let round = try engine.sync()
        #expect(round.refused.map(\.name.node) == [liar], "\(round)")
        #expect(round.refused.first?.reason.contains("pinned") == true, "\(round.refused)")
        #expect(round.applied.map(\.node) == [bulky], "\(round)")
        #expect(try receiver.read("SELECT id, subject, priority FROM Note") == [[.text(kept), .text("big"), .null]])
    }
}
