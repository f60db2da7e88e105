import LogsyncCore
import LogsyncPlatform

/// A segment from another node that this store refused: it failed verification or does not fit this
/// node's schema. It holds only its own node's stream, and is remembered with the checksum of its bytes
/// so that the same bytes are not decoded again every round, while a file replaced by other bytes is
/// tried again at once. The operator lists, releases (forget and try again) or drops (skip it for good)
/// refusals with `syncctl quarantine` (`docs/operations.md`, "Refused segments").
package struct SegmentRefusal: Sendable, Hashable {
    package var node: NodeID
    package var firstSequence: UInt64
    package var lastSequence: UInt64
    /// FNV-1a of the segment's bytes (the engine's checksum).
    package var checksum: UInt64
    package var reason: String
    package var location: String
    /// When it was refused, in milliseconds since 1970.
    package var at: Int64

    package init(node: NodeID, firstSequence: UInt64, lastSequence: UInt64, checksum: UInt64, reason: String, location: String, at: Int64 = 0) {
        self.node = node
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.checksum = checksum
        self.reason = reason
        self.location = location
        self.at = at
    }
}

/// A refused segment the operator gave up on: its node's stream goes on after it, and its
/// transactions are never applied here.
package struct DroppedSegment: Sendable, Hashable {
    package var node: NodeID
    package var firstSequence: UInt64
    package var lastSequence: UInt64
    package var checksum: UInt64
    /// Why it had been refused.
    package var reason: String
    package var at: Int64
}

extension SyncLedger {
    /// Records a refusal (replacing an earlier one of the same segment, whose bytes may have differed).
    package func refuse(_ refusal: SegmentRefusal) throws {
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute(
                "INSERT OR REPLACE INTO _ls_refused(node, first_seq, last_seq, checksum, reason, location, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [.text(refusal.node.rawValue), try Store.sequenceValue(refusal.firstSequence), try Store.sequenceValue(refusal.lastSequence),
                 .integer(Int64(bitPattern: refusal.checksum)), .text(refusal.reason), .text(refusal.location),
                 .integer(Int64(clamping: WallClock.milliseconds()))])
        }
    }

    /// Every refusal recorded, oldest first.
    package func refusals() throws -> [SegmentRefusal] {
        try store.reading { connection in
            try connection.rows("SELECT node, first_seq, last_seq, checksum, reason, location, at FROM _ls_refused ORDER BY at, node, first_seq").compactMap { row in
                guard case .text(let node) = row[0], case .integer(let first) = row[1], case .integer(let last) = row[2],
                    case .integer(let checksum) = row[3], case .text(let reason) = row[4], case .text(let location) = row[5],
                    case .integer(let at) = row[6], first >= 0, last >= 0
                else { return nil }
                return SegmentRefusal(
                    node: NodeID(node), firstSequence: UInt64(first), lastSequence: UInt64(last), checksum: UInt64(bitPattern: checksum),
                    reason: reason, location: location, at: at)
            }
        }
    }

    /// Segments dropped by the operator, oldest first.
    package func droppedSegments() throws -> [DroppedSegment] {
        try store.reading { connection in
            try connection.rows("SELECT node, first_seq, last_seq, checksum, reason, at FROM _ls_dropped ORDER BY at, node, first_seq").compactMap { row in
                guard case .text(let node) = row[0], case .integer(let first) = row[1], case .integer(let last) = row[2],
                    case .integer(let checksum) = row[3], case .text(let reason) = row[4], case .integer(let at) = row[5], first >= 0, last >= 0
                else { return nil }
                return DroppedSegment(
                    node: NodeID(node), firstSequence: UInt64(first), lastSequence: UInt64(last), checksum: UInt64(bitPattern: checksum),
                    reason: reason, at: at)
            }
        }
    }

    /// Forgets a refusal or a divergence record of the segment `node`, `first`–`last`, so that the next
    /// round reads it again. Returns whether there was one.
    package func release(node: NodeID, firstSequence: UInt64, lastSequence: UInt64) throws -> Bool {
        let arguments: [DatabaseValue] = [.text(node.rawValue), try Store.sequenceValue(firstSequence), try Store.sequenceValue(lastSequence)]
        return try store.perform(marker: Store.Marker()) { tx in
            let refused = try tx.rows("DELETE FROM _ls_refused WHERE node = ? AND first_seq = ? AND last_seq = ? RETURNING 1", arguments).count
            let divergent = try tx.rows("DELETE FROM _ls_quarantine WHERE node = ? AND first_seq = ? AND last_seq = ? RETURNING 1", arguments).count
            return refused + divergent > 0
        }.result
    }

    /// Forgets the refusals of `node`'s segments that end at or below `sequence`: applied since (a good
    /// copy replaced the file) or covered by a baseline.
    package func forgetRefusals(of node: NodeID, through sequence: UInt64) throws {
        let bound = DatabaseValue.integer(Int64(clamping: sequence))
        guard try store.reading({ try $0.int64("SELECT 1 FROM _ls_refused WHERE node = ? AND last_seq <= ? LIMIT 1", [.text(node.rawValue), bound]) }) != nil
        else { return }
        _ = try store.perform(marker: Store.Marker()) { tx in
            try tx.execute("DELETE FROM _ls_refused WHERE node = ? AND last_seq <= ?", [.text(node.rawValue), bound])
        }
    }

    /// Gives up on a refused segment: in one transaction, the node's cursor moves past it, the segment is
    /// recorded as applied with the checksum of the refused bytes (so a copy with other bytes is still
    /// divergence, and re-deliveries of these bytes change nothing), its refusal is forgotten and the drop
    /// recorded. Its transactions are never applied here. Only the segment that is next for its node can be
    /// dropped: the cursor never jumps over sequences that were not refused.
    package func drop(node: NodeID, firstSequence: UInt64, lastSequence: UInt64) throws -> DroppedSegment {
        let nodeValue = DatabaseValue.text(node.rawValue)
        let first = try Store.sequenceValue(firstSequence)
        let last = try Store.sequenceValue(lastSequence)
        return try store.perform(marker: Store.Marker()) { tx in
            guard let row = try tx.rows(
                "SELECT checksum, reason FROM _ls_refused WHERE node = ? AND first_seq = ? AND last_seq = ?", [nodeValue, first, last]).first,
                case .integer(let checksum) = row[0], case .text(let reason) = row[1]
            else {
                throw StoreError(
                    .schema,
                    "no refused segment \(node) \(firstSequence)-\(lastSequence) is recorded in \(store.path); 'syncctl quarantine list' shows what is",
                    path: store.path)
            }
            let cursorRow = try tx.rows("SELECT last_seq, last_hlc FROM _ls_cursor WHERE node = ?", [nodeValue]).first
            var cursor: Int64 = 0
            var lastHLC: Int64 = 0
            if let cursorRow, case .integer(let applied) = cursorRow[0], case .integer(let hlc) = cursorRow[1] {
                (cursor, lastHLC) = (applied, hlc)
            }
            guard firstSequence >= 1, UInt64(max(cursor, 0)) < lastSequence, UInt64(max(cursor, 0)) >= firstSequence - 1 else {
                throw StoreError(
                    .schema,
                    "segment \(node) \(firstSequence)-\(lastSequence) is not the next one of its node (sequence \(cursor) is applied): "
                        + "only the segment the node's stream waits for can be dropped",
                    path: store.path)
            }
            let now = DatabaseValue.integer(Int64(clamping: WallClock.milliseconds()))
            try tx.execute(
                "INSERT OR REPLACE INTO _ls_cursor(node, last_seq, last_hlc, applied_at) VALUES (?, ?, ?, ?)", [nodeValue, last, .integer(lastHLC), now])
            try tx.execute(
                "INSERT OR REPLACE INTO _ls_segment(node, first_seq, last_seq, checksum) VALUES (?, ?, ?, ?)", [nodeValue, first, last, .integer(checksum)])
            try tx.execute("DELETE FROM _ls_refused WHERE node = ? AND first_seq = ? AND last_seq = ?", [nodeValue, first, last])
            try tx.execute(
                "INSERT OR REPLACE INTO _ls_dropped(node, first_seq, last_seq, checksum, reason, at) VALUES (?, ?, ?, ?, ?, ?)",
                [nodeValue, first, last, .integer(checksum), .text(reason), now])
            return DroppedSegment(
                node: node, firstSequence: firstSequence, lastSequence: lastSequence, checksum: UInt64(bitPattern: checksum), reason: reason,
                at: Int64(clamping: WallClock.milliseconds()))
        }.result
    }
}

extension Store {
    /// A sequence as SQLite stores it; the format keeps sequences at or below `Int64.max`, and anything
    /// above is an error here rather than a trap.
    static func sequenceValue(_ sequence: UInt64) throws -> DatabaseValue {
        guard let value = Int64(exactly: sequence) else {
            throw StoreError(.schema, "sequence \(sequence) is above \(Int64.max), the largest a store records")
        }
        return .integer(value)
    }
}
