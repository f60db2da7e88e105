/// A column value with the clock of the write that set it: a last-writer-wins register.
package struct Register: Sendable, Hashable {
    package var value: DatabaseValue
    package var clock: Clock

    package init(_ value: DatabaseValue, _ clock: Clock) {
        self.value = value
        self.clock = clock
    }
}

/// Everything the merge knows about one row, whatever order its changes arrived in.
///
/// The state is a join-semilattice: merging the same changes in any order, any number of times, gives the
/// same state.
package struct RowState: Sendable, Hashable {
    /// Causal length: 0 never seen, odd exists, even deleted. Each insert after a delete and each delete
    /// adds one.
    package var causalLength: UInt64
    /// The column registers written at ``causalLength``; registers of earlier lives are dropped when the
    /// causal length grows.
    package var columns: [String: Register]
    /// The latest delete of this row, at any causal length. Delete rules compare it with the clocks of
    /// references to the row.
    package var deletedAt: Clock?

    package init(causalLength: UInt64 = 0, columns: [String: Register] = [:], deletedAt: Clock? = nil) {
        self.causalLength = causalLength
        self.columns = columns
        self.deletedAt = deletedAt
    }

    package var exists: Bool { causalLength % 2 == 1 }

    /// Merges one change written at `clock`. Returns whether the state changed.
    @discardableResult
    package mutating func merge(_ change: LogChange, at clock: Clock) -> Bool {
        // Every assignment below replaces a part with a different one (a later clock, a greater causal
        // length, a new register), so tracking them says whether the state changed without comparing it.
        var changed = false
        if change.kind == .delete, deletedAt.map({ clock > $0 }) ?? true {
            deletedAt = clock
            changed = true
        }
        if change.causalLength > causalLength {
            // A later life: the registers of earlier lives are dropped, so this change's values (if the
            // row exists in it) are all the registers. `mapValues` keeps the dictionary's layout instead of
            // inserting (and hashing) each column again.
            causalLength = change.causalLength
            columns = change.causalLength % 2 == 1 ? change.values.mapValues { Register($0, clock) } : [:]
            return true
        }
        if change.causalLength == causalLength, change.causalLength % 2 == 1 {
            for (name, value) in change.values where columns[name].map({ clock > $0.clock }) ?? true {
                columns[name] = Register(value, clock)
                changed = true
            }
        }
        return changed
    }

    /// Merges another replica's state of the same row.
    package mutating func merge(_ other: RowState) {
        if let otherDelete = other.deletedAt, deletedAt.map({ otherDelete > $0 }) ?? true {
            deletedAt = otherDelete
        }
        if other.causalLength > causalLength {
            causalLength = other.causalLength
            columns = other.columns
        } else if other.causalLength == causalLength {
            for (name, register) in other.columns where columns[name].map({ register.clock > $0.clock }) ?? true {
                columns[name] = register
            }
        }
    }
}

/// Identifies a row across nodes.
package struct RowKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var entity: String
    package var primaryKey: DatabaseValue

    package init(_ entity: String, _ primaryKey: DatabaseValue) {
        self.entity = entity
        self.primaryKey = primaryKey
    }

    package static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.entity != rhs.entity ? lhs.entity < rhs.entity : lhs.primaryKey.sortsBefore(rhs.primaryKey)
    }

    package var description: String { "\(entity)(\(primaryKey))" }
}

extension DatabaseValue {
    /// A total order used to pick deterministic winners (e.g. of unique-key collisions): SQLite's own
    /// order, as in ``sqliteOrder(comparedTo:)``.
    package func sortsBefore(_ other: DatabaseValue) -> Bool { sqliteOrder(comparedTo: other) < 0 }

    /// Negative, zero or positive as this value sorts before, with, or after `other` in SQLite's order:
    /// NULL first, then numbers (integers and reals by value), then text (byte by byte: the BINARY
    /// collation), then blobs (byte by byte).
    package func sqliteOrder(comparedTo other: DatabaseValue) -> Int {
        func rank(_ value: DatabaseValue) -> Int {
            switch value {
            case .null: return 0
            case .integer, .real: return 1
            case .text, .nonUTF8Text: return 2
            case .blob: return 3
            }
        }
        func compare<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a == b ? 0 : 1) }
        func bytes(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Int {
            for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
            return compare(a.count, b.count)
        }
        switch (self, other) {
        case (.integer(let a), .integer(let b)): return compare(a, b)
        case (.real(let a), .real(let b)): return compare(a, b)
        case (.integer(let a), .real(let b)): return compare(Double(a), b)
        case (.real(let a), .integer(let b)): return compare(a, Double(b))
        case (.text(let a), .text(let b)):
            // Native strings hold their UTF-8 in one piece: compare it there rather than through `UTF8View`
            // (keys are compared once per row of a baseline as it is read).
            if let order = a.utf8.withContiguousStorageIfAvailable({ x in b.utf8.withContiguousStorageIfAvailable { y in bytes(x, y) } }) ?? nil {
                return order
            }
            return bytes(a.utf8, b.utf8)
        case (.text(let a), .nonUTF8Text(let b)): return bytes(a.utf8, b)
        case (.nonUTF8Text(let a), .text(let b)): return bytes(a, b.utf8)
        case (.nonUTF8Text(let a), .nonUTF8Text(let b)): return bytes(a, b)
        case (.blob(let a), .blob(let b)): return bytes(a, b)
        default: return compare(rank(self), rank(other))
        }
    }
}
