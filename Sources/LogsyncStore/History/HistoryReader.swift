import Foundation
import LogsyncCore
import LogsyncSQLite

/// Reads sealed history transactions from the log, one streaming pass over `_ls_log`.
struct HistoryReader {
    let connection: Connection
    let catalog: Catalog

    func transactions(after token: HistoryToken, filter: HistoryFilter, limit: Int) throws -> [HistoryTransaction] {
        // Start after the marker at or before `token`, so a token that is not a marker never yields half a
        // transaction.
        let start =
            try connection.int64(
                "SELECT ifnull(max(seq), 0) FROM _ls_log WHERE kind = 0 AND seq <= ?", [.integer(token.rawValue)]) ?? 0
        let statement = try connection.cached(
            "SELECT seq, kind, entity, pk, cols, tomb, hlc, author, context, origin FROM _ls_log WHERE seq > ? ORDER BY seq")
        defer { statement.reset() }
        try statement.bind([.integer(start)])
        var result: [HistoryTransaction] = []
        var changes: [HistoryChange] = []
        while result.count < limit, try statement.step() {
            let kind = statement.int64(at: 1)
            if kind == SchemaSQL.packedInsertsKind {
                try appendPackedInserts(from: statement, to: &changes)
                continue
            }
            if kind != 0 {
                if let change = change(from: statement, kind: kind) { changes.append(change) }
                continue
            }
            var transaction = HistoryTransaction(
                token: HistoryToken(statement.int64(at: 0)),
                timestamp: HLCTimestamp(storageValue: statement.int64(at: 6)),
                author: statement.text(at: 7), contextName: statement.text(at: 8),
                origin: Origin(storageValue: statement.text(at: 9)),
                changes: changes)
            changes = []
            if filter.admits(&transaction) { result.append(transaction) }
        }
        return result
    }

    private func change(from statement: Statement, kind: Int64) -> HistoryChange? {
        guard let changeKind = ChangeKind(rawValue: Int(kind)), let info = catalog.byID[statement.int64(at: 2)] else {
            return nil
        }
        let mask = statement.int64(at: 4)
        var tombstone: [String: DatabaseValue]?
        if changeKind == .delete {
            tombstone = statement.text(at: 5).map { decodeTombstone($0, info: info) } ?? [:]
        }
        return HistoryChange(
            entity: info.entity.name, primaryKey: statement.value(at: 3), kind: changeKind,
            changedColumns: changeKind == .delete ? [] : info.columnNames(inMask: mask), tombstone: tombstone)
    }

    /// A row of kind ``SchemaSQL/packedInsertsKind``: inserts of one entity the merge packed into one row (`MergeCapture.swift`), its
    /// keys one after another in `pk`.
    private func appendPackedInserts(from statement: Statement, to changes: inout [HistoryChange]) throws {
        guard let info = catalog.byID[statement.int64(at: 2)], statement.isBlob(at: 3) else { return }
        let columns = info.columnNames(inMask: statement.int64(at: 4))
        try statement.withBytes(at: 3) { bytes in
            var reader = RowStateCoding.ByteReader(bytes)
            while !reader.isAtEnd {
                changes.append(
                    HistoryChange(entity: info.entity.name, primaryKey: try reader.value(), kind: .insert, changedColumns: columns))
            }
        }
    }

    /// Tombstones are JSON objects written by the delete trigger (`SchemaSQL.tombstone(of:row:)`): each
    /// value a pair of its storage class and an exact text form. Stores written before that kept text as
    /// JSON strings, numbers as JSON numbers and blobs as hex strings, read here by the attribute's type.
    private func decodeTombstone(_ json: String, info: Catalog.EntityInfo) -> [String: DatabaseValue] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        var values: [String: DatabaseValue] = [:]
        for (name, raw) in object {
            if let pair = raw as? [Any], pair.count == 2, let storage = pair[0] as? String, let text = pair[1] as? String,
                let value = Self.tombstoneValue(storage: storage, text: text)
            {
                values[name] = value
                continue
            }
            let type = info.columnTypes[name] ?? .text
            switch (raw, type) {
            case (is NSNull, _): values[name] = .null
            case (let text as String, .blob), (let text as String, .uuidBlob): values[name] = .blob(LogsyncCore.bytes(hex: text) ?? [])
            case (let text as String, _): values[name] = .text(text)
            case (let number as NSNumber, .real), (let number as NSNumber, .date): values[name] = .real(number.doubleValue)
            case (let number as NSNumber, _): values[name] = .integer(number.int64Value)
            default: values[name] = .text(String(describing: raw))
            }
        }
        return values
    }

    static func tombstoneValue(storage: String, text: String) -> DatabaseValue? {
        switch storage {
        case "i": return Int64(text).map(DatabaseValue.integer)
        case "r": return Self.real(text).map(DatabaseValue.real)
        case "t": return LogsyncCore.bytes(hex: text).map { DatabaseValue(textBytes: $0) }
        case "b": return LogsyncCore.bytes(hex: text).map(DatabaseValue.blob)
        default: return nil
        }
    }

    /// A real as SQLite's `printf('%!.17g')` writes it: digits, or `Inf` and `-Inf`.
    private static func real(_ text: String) -> Double? {
        switch text {
        case "Inf", "+Inf": return .infinity
        case "-Inf": return -.infinity
        default: return Double(text)
        }
    }
}
