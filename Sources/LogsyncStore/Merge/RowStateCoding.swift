import LogsyncCore
import LogsyncSQLite

/// The byte form of a ``RowState`` in `_ls_row.state` and `_ls_live.state`. Node ids are stored as small
/// indexes into `_ls_node`.
///
/// - a flags byte: ``Flags/deleted``, ``Flags/sharedClock``, ``Flags/everyColumn``;
/// - the latest delete's clock (timestamp, node), if `deleted`;
/// - the number of registers (varint);
/// - their one clock, if `sharedClock`;
/// - each register in column-bit order: its column bit (unless `everyColumn`: the registers are the
///   columns 0, 1, … in order), its clock (unless `sharedClock`), its value.
///
/// Most states are a row written once: every column set by one insert, at one clock. Written out per
/// register, the clock and bit took 10 of a Note register's 20–50 bytes, and `_ls_live` was the store's
/// largest table (store format 5; states of format 4, flags 0 or 1, read the same).
enum RowStateCoding {
    /// The bits of a state's first byte.
    enum Flags {
        static let deleted: UInt8 = 0x01
        static let sharedClock: UInt8 = 0x02
        static let everyColumn: UInt8 = 0x04
        static let all: UInt8 = deleted | sharedClock | everyColumn
    }

    /// Encodes `state` into `out`, replacing its contents (its capacity is kept, so one buffer serves
    /// every row of a merge).
    static func encode(
        _ state: RowState, info: Catalog.EntityInfo, nodes: inout NodeTable, connection: Connection, into out: inout [UInt8]
    ) throws {
        try encode(state, info: info, into: &out) { try nodes.index(of: $0, connection: connection) }
    }

    /// Encodes `state` with node indexes from `index`: ``NodeTable``'s on the writer's connection, or ones
    /// known beforehand where rows are prepared off the writer's thread (``FreshRow``).
    static func encode(
        _ state: RowState, info: Catalog.EntityInfo, into out: inout [UInt8], index: (NodeID) throws -> Int64
    ) rethrows {
        let shared = sharedClock(of: state.columns.values)
        // Registers in bit order; a register for a column this store does not know is not stored. Their
        // count comes first: a one-byte varint while there are fewer than 128 columns, patched afterwards.
        // A state with a register per column is taken for every column until a column has none.
        if encodesInColumnOrder(info) {
            let everyColumn = state.columns.count == info.columns.count && !state.columns.isEmpty
            let head = Head(deletedAt: state.deletedAt, registers: state.columns.count, shared: shared)
            let register = { (bit: Int) in state.columns[info.columns[bit]] }
            if try encodeInColumnOrder(head, info: info, everyColumn: everyColumn, into: &out, index: index, register: register) { return }
            _ = try encodeInColumnOrder(head, info: info, everyColumn: false, into: &out, index: index, register: register)
            return
        }
        // Too many columns for a one-byte count, or a column name listed twice (never registered so: it has
        // the bit of its first place).
        var registers: [(bit: Int, register: Register)] = []
        for (name, register) in state.columns {
            if let bit = info.bit(of: name) { registers.append((bit, register)) }
        }
        registers.sort { $0.bit < $1.bit }
        let stored = registers.isEmpty ? nil : shared
        try appendHead(Head(deletedAt: state.deletedAt, registers: registers.count, shared: stored), everyColumn: false, into: &out, index: index)
        appendVarint(UInt64(registers.count), to: &out)
        try appendSharedClock(stored, to: &out, index: index)
        for (bit, register) in registers {
            try appendRegister(register, bit: bit, shared: stored != nil, everyColumn: false, to: &out, index: index)
        }
    }

    /// Whether states of `info` are encoded walking its columns in bit order: fewer than 128 columns
    /// (a one-byte count), each name once.
    static func encodesInColumnOrder(_ info: Catalog.EntityInfo) -> Bool {
        info.columns.count < 0x80 && info.bits.count == info.columns.count
    }

    /// Encodes, as ``encode(_:info:into:index:)`` does, a state that was never deleted whose registers are
    /// given by column bit (nil where a column has none; `count` of them are not), for an entity that
    /// ``encodesInColumnOrder(_:)``: the registers of a prepared row, which has looked each up once.
    static func encode(
        byBit registers: UnsafeBufferPointer<Register?>, count: Int, info: Catalog.EntityInfo, into out: inout [UInt8],
        index: (NodeID) throws -> Int64
    ) rethrows {
        precondition(encodesInColumnOrder(info) && registers.count == info.columns.count)
        let head = Head(deletedAt: nil, registers: count, shared: sharedClock(of: registers.lazy.compactMap { $0 }))
        let everyColumn = count == info.columns.count && count > 0
        let register = { (bit: Int) in registers[bit] }
        if try encodeInColumnOrder(head, info: info, everyColumn: everyColumn, into: &out, index: index, register: register) { return }
        _ = try encodeInColumnOrder(head, info: info, everyColumn: false, into: &out, index: index, register: register)
    }

    /// What a state's first bytes say: its delete, how many registers it has, and their one clock.
    private struct Head {
        var deletedAt: Clock?
        var registers: Int
        var shared: Clock?
    }

    /// Encodes a state walking the entity's columns in bit order, `register` giving each column's; false
    /// when `everyColumn` was assumed and a column has no register. The shared clock is written with the
    /// first register stored: a state whose registers are all for columns this store does not know stores
    /// none, and no flag for it.
    private static func encodeInColumnOrder(
        _ head: Head, info: Catalog.EntityInfo, everyColumn: Bool, into out: inout [UInt8], index: (NodeID) throws -> Int64,
        register: (_ bit: Int) -> Register?
    ) rethrows -> Bool {
        try appendHead(head, everyColumn: everyColumn, into: &out, index: index)
        let countOffset = out.count
        out.append(0)
        var count: UInt8 = 0
        for bit in info.columns.indices {
            guard let register = register(bit) else {
                if everyColumn { return false }
                continue
            }
            if count == 0 { try appendSharedClock(head.shared, to: &out, index: index) }
            try appendRegister(register, bit: bit, shared: head.shared != nil, everyColumn: everyColumn, to: &out, index: index)
            count += 1
        }
        out[countOffset] = count
        if count == 0 { out[0] &= ~Flags.sharedClock }
        return true
    }

    /// The one clock of every register of `registers`, if they share one (and there is any).
    private static func sharedClock(of registers: some Sequence<Register>) -> Clock? {
        var shared: Clock?
        for register in registers {
            guard let clock = shared else {
                shared = register.clock
                continue
            }
            if clock != register.clock { return nil }
        }
        return shared
    }

    /// Clears `out` and writes the flags byte and the delete's clock.
    private static func appendHead(
        _ head: Head, everyColumn: Bool, into out: inout [UInt8], index: (NodeID) throws -> Int64
    ) rethrows {
        out.removeAll(keepingCapacity: true)
        out.reserveCapacity(16 + head.registers * 24)
        var flags: UInt8 = 0
        if head.deletedAt != nil { flags |= Flags.deleted }
        if head.shared != nil { flags |= Flags.sharedClock }
        if everyColumn { flags |= Flags.everyColumn }
        out.append(flags)
        if let deleted = head.deletedAt { try appendClock(deleted, to: &out, index: index) }
    }

    private static func appendSharedClock(_ shared: Clock?, to out: inout [UInt8], index: (NodeID) throws -> Int64) rethrows {
        if let shared { try appendClock(shared, to: &out, index: index) }
    }

    private static func appendRegister(
        _ register: Register, bit: Int, shared: Bool, everyColumn: Bool, to out: inout [UInt8], index: (NodeID) throws -> Int64
    ) rethrows {
        if !everyColumn { appendVarint(UInt64(bit), to: &out) }
        if !shared { try appendClock(register.clock, to: &out, index: index) }
        appendValue(register.value, to: &out)
    }

    private static func appendClock(_ clock: Clock, to out: inout [UInt8], index: (NodeID) throws -> Int64) rethrows {
        appendFixed(clock.timestamp.rawValue, to: &out)
        appendVarint(UInt64(try index(clock.node)), to: &out)
    }

    static func decode(_ bytes: [UInt8], causalLength: UInt64, info: Catalog.EntityInfo, nodes: NodeTable) throws -> RowState {
        try bytes.withUnsafeBytes { try decode($0, causalLength: causalLength, info: info, nodes: nodes) }
    }

    /// Decodes a state from bytes that are only valid during the call (a column of a stepped statement).
    static func decode(
        _ bytes: UnsafeRawBufferPointer, causalLength: UInt64, info: Catalog.EntityInfo, nodes: NodeTable
    ) throws -> RowState {
        var reader = ByteReader(bytes)
        let flags = try reader.byte()
        guard flags & ~Flags.all == 0 else { throw corrupt("unknown flags \(flags)") }
        let deletedAt = flags & Flags.deleted != 0 ? try reader.clock(nodes) : nil
        let count = try reader.varint()
        let shared = flags & Flags.sharedClock != 0 ? try reader.clock(nodes) : nil
        let everyColumn = flags & Flags.everyColumn != 0
        // Bounded by the entity's columns (every key is one of them), not by a damaged count.
        var columns: [String: Register] = Dictionary(minimumCapacity: Int(min(count, UInt64(info.columns.count))))
        for position in 0..<count {
            let bit = everyColumn ? Int(position) : Int(try reader.index())
            let clock = try shared ?? reader.clock(nodes)
            let value = try reader.value()
            guard bit < info.columns.count else { throw corrupt("column bit \(bit) out of range") }
            columns[info.columns[bit]] = Register(value, clock)
        }
        return RowState(causalLength: causalLength, columns: columns, deletedAt: deletedAt)
    }

    /// Decodes the state in a stepped statement's columns `column` (cl) and `column + 1` (state), or nil
    /// when they do not hold an integer and a blob.
    static func decode(_ statement: Statement, at column: Int, info: Catalog.EntityInfo, nodes: NodeTable) throws -> RowState? {
        guard statement.isInteger(at: column), statement.isBlob(at: column + 1) else { return nil }
        guard let causalLength = UInt64(exactly: statement.int64(at: column)) else {
            throw corrupt("negative causal length")
        }
        return try statement.withBytes(at: column + 1) { bytes in
            try decode(bytes, causalLength: causalLength, info: info, nodes: nodes)
        }
    }

    static func corrupt(_ message: String) -> StoreError {
        StoreError(.notADatabase, "a row state in _ls_row or _ls_live is damaged: \(message)")
    }

    static func appendFixed(_ value: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    static func appendValue(_ value: DatabaseValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(0)
        case .integer(let v):
            out.append(1)
            appendFixed(UInt64(bitPattern: v), to: &out)
        case .real(let v):
            out.append(2)
            appendFixed(v.bitPattern, to: &out)
        case .text(let v):
            out.append(3)
            appendVarint(UInt64(v.utf8.count), to: &out)
            out.append(contentsOf: v.utf8)
        case .nonUTF8Text(let v):
            // The same tag as any text: the bytes say which case they are (``DatabaseValue/init(textBytes:)``).
            out.append(3)
            appendVarint(UInt64(v.count), to: &out)
            out.append(contentsOf: v)
        case .blob(let v):
            out.append(4)
            appendVarint(UInt64(v.count), to: &out)
            out.append(contentsOf: v)
        }
    }

    struct ByteReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var isAtEnd: Bool { offset >= bytes.count }

        mutating func byte() throws -> UInt8 {
            guard offset < bytes.count else { throw corrupt("truncated") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func fixed() throws -> UInt64 {
            guard offset + 8 <= bytes.count else { throw corrupt("truncated") }
            let value = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
            return UInt64(littleEndian: value)
        }

        mutating func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 64 else { throw corrupt("varint too long") }
                result |= UInt64(b & 0x7f) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
            }
        }

        /// A clock: its timestamp, then its node's index.
        mutating func clock(_ nodes: NodeTable) throws -> Clock {
            let timestamp = HLCTimestamp(rawValue: try fixed())
            return Clock(timestamp, try nodes.node(at: try index()))
        }

        /// A varint that must fit a (non-negative) Int64: a column bit or a node index.
        mutating func index() throws -> Int64 {
            guard let value = Int64(exactly: try varint()) else { throw corrupt("index out of range") }
            return value
        }

        mutating func bytes(_ count: UInt64) throws -> UnsafeRawBufferPointer {
            guard count <= UInt64(bytes.count - offset) else { throw corrupt("truncated") }
            defer { offset += Int(count) }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(count)])
        }

        /// Binds the next value to `statement`'s parameter `index` as ``value()`` would read it, without
        /// making a ``DatabaseValue`` (or a `String`) of it.
        mutating func bindValue(to statement: Statement, at index: Int32) throws {
            switch try byte() {
            case 0: try statement.bindNull(at: index)
            case 1: try statement.bind(Int64(bitPattern: try fixed()), at: index)
            case 2: try statement.bind(Double(bitPattern: try fixed()), at: index)
            case 3: try statement.bind(textBytes: try bytes(try varint()), at: index)
            case 4: try statement.bind(bytes: try bytes(try varint()), at: index)
            case let tag: throw corrupt("unknown value tag \(tag)")
            }
        }

        mutating func value() throws -> DatabaseValue {
            switch try byte() {
            case 0: return .null
            case 1: return .integer(Int64(bitPattern: try fixed()))
            case 2: return .real(Double(bitPattern: try fixed()))
            case 3: return DatabaseValue(textBytes: try bytes(try varint()).assumingMemoryBound(to: UInt8.self))
            case 4: return .blob(Array(try bytes(try varint())))
            case let tag: throw corrupt("unknown value tag \(tag)")
            }
        }
    }
}

/// Node ids ↔ the small integers that row states store. Loaded once, extended as new nodes appear.
struct NodeTable {
    private var byIndex: [Int64: NodeID] = [:]
    private var byNode: [NodeID: Int64] = [:]

    /// A table of the given indexes only: for reading states encoded with them off the writer's thread.
    init(indexes: [NodeID: Int64]) {
        byNode = indexes
        for (node, index) in indexes { byIndex[index] = node }
    }

    init(connection: Connection) throws {
        for row in try connection.rows("SELECT idx, node FROM _ls_node") {
            guard case .integer(let index) = row[0], case .text(let node) = row[1] else { continue }
            byIndex[index] = NodeID(node)
            byNode[NodeID(node)] = index
        }
    }

    /// The last node looked up: a state's registers usually share one writer, so most lookups hit it
    /// without hashing the node id.
    private var last: (node: NodeID, index: Int64)?

    mutating func index(of node: NodeID, connection: Connection) throws -> Int64 {
        if let last, last.node == node { return last.index }
        if let index = byNode[node] {
            last = (node, index)
            return index
        }
        try connection.execute("INSERT INTO _ls_node(node) VALUES (?)", [.text(node.rawValue)])
        let index = connection.lastInsertedRowID
        byIndex[index] = node
        byNode[node] = index
        return index
    }

    /// The index of `node`, if it has one already.
    func knownIndex(of node: NodeID) -> Int64? { byNode[node] }

    func node(at index: Int64) throws -> NodeID {
        guard let node = byIndex[index] else { throw RowStateCoding.corrupt("unknown node index \(index)") }
        return node
    }

    /// Forgets indexes added by a transaction that rolled back.
    mutating func reload(connection: Connection) throws {
        self = try NodeTable(connection: connection)
    }
}
