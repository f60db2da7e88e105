import LogsyncCore

/// What applying kept changes did (``SyncLedger/applyKeptChanges(limits:)``).
package struct KeptOutcome: Sendable, Hashable {
    /// Kept transactions whose changes this store's schema now declares in full: merged, and forgotten.
    package var applied = 0
    /// Kept transactions that still hold changes this schema does not declare.
    package var stillKept = 0
    /// Of those, the ones written under a schema version this store has reached: the app's declaration
    /// of that version differs from the writer's (`docs/schema-evolution.md`, "Two definitions of one version").
    package var undeclared: [String] = []
}

/// The parts of other nodes' transactions that were written under a newer schema than this store's
/// and that it does not declare yet (``ChangeRules/split(_:)``): kept verbatim in `_ls_kept`, one row
/// per transaction, as a segment of that one transaction (the log format, so that the same decoder reads
/// it back), until the app registers a schema that declares them.
///
/// They are merged with their own clocks, as if they had arrived after the upgrade: the merge is a join of
/// states, so the order does not change the result. A kept part written under version 3 is looked at
/// again when the store reaches 2, and what version 2 declares of it is merged then.
extension SyncLedger {
    /// Kept transactions written under a version this store has reached, which its schema therefore
    /// should declare and does not (another definition of that version), at most `limit`, oldest first.
    package func undeclaredKept(limit: Int = 50) throws -> [String] {
        try store.reading { connection in
            try connection.rows(
                "SELECT node, seq, schema_version FROM _ls_kept WHERE schema_version <= ? ORDER BY rowid LIMIT ?",
                [.integer(Int64(store.schema.version)), .integer(Int64(limit))]
            ).compactMap { row in
                guard case .text(let node) = row[0], case .integer(let sequence) = row[1], case .integer(let version) = row[2] else { return nil }
                return Self.describeKept(sequence, of: node, writtenUnder: version)
            }
        }
    }

    /// How many transactions are kept for a newer schema.
    package func keptTransactionCount() throws -> Int {
        try store.reading { connection in Int(try connection.int64("SELECT count(*) FROM _ls_kept") ?? 0) }
    }

    /// Merges what this store's schema now declares of the kept transactions, oldest first, with their
    /// origins, authors, contexts and timestamps (contexts see each as an imported transaction). Each
    /// batch folds local history into the outbox of `account` first, as every import does, so that a local
    /// write made meanwhile is exported before the merge moves past it. Only rows not looked at under this
    /// schema version are read, so a round with nothing new costs one indexed query. A kept row that cannot
    /// be read or does not fit is left kept and reported (``KeptOutcome/undeclared``): it holds up nothing.
    package func applyKeptChanges(account: String, maximumChanges: Int = 2_000, limits: SegmentLimits = .default) throws -> KeptOutcome {
        let version = Int64(store.schema.version)
        let due = try store.reading { connection in
            try connection.int64("SELECT 1 FROM _ls_kept WHERE looked_at < ? LIMIT 1", [.integer(version)]) != nil
        }
        guard due else { return KeptOutcome() }
        var total = KeptOutcome()
        // A thousand at a time, each batch a transaction of its own: a local writer waits for one batch, not
        // for all. Every row read is deleted or marked looked at, so the loop ends.
        while true {
            let batch = try applyKeptBatch(version: version, account: account, maximumChanges: maximumChanges, limits: limits)
            total.applied += batch.applied
            total.stillKept += batch.stillKept
            total.undeclared += batch.undeclared
            if batch.applied + batch.stillKept < Self.keptBatchSize { return total }
        }
    }

    static let keptBatchSize = 1_000

    /// A kept transaction as status and reports name it.
    static func describeKept(_ sequence: Int64, of node: String, writtenUnder version: Int64) -> String {
        "transaction \(sequence) of node \(node), written under version \(version)"
    }

    private func applyKeptBatch(version: Int64, account: String, maximumChanges: Int, limits: SegmentLimits) throws -> KeptOutcome {
        let rules = store.changeRules
        return try store.syncTransaction { state, _ in
            let connection = state.connection
            _ = try store.foldIntoOutbox(&state, account: account, maximumChanges: maximumChanges, limits: limits)
            var outcome = KeptOutcome()
            let rows = try connection.rows(
                "SELECT rowid, node, seq, schema_version, segment FROM _ls_kept WHERE looked_at < ? ORDER BY rowid LIMIT ?",
                [.integer(version), .integer(Int64(Self.keptBatchSize))])
            for row in rows {
                guard case .integer(let rowid) = row[0], case .text(let node) = row[1], case .integer(let sequence) = row[2],
                    case .integer(let writtenUnder) = row[3], case .blob(let bytes) = row[4]
                else {
                    throw StoreError(.schema, "a row of _ls_kept is not what this build wrote (rowid \(row[0]))", path: store.path)
                }
                let origin = NodeID(node)
                // A row that cannot be merged stays kept, looked at under this version, and is reported.
                func leave(_ why: String) throws {
                    outcome.stillKept += 1
                    outcome.undeclared.append("\(Self.describeKept(sequence, of: node, writtenUnder: writtenUnder)): \(why)")
                    try connection.execute("UPDATE _ls_kept SET looked_at = ? WHERE rowid = ?", [.integer(version), .integer(rowid)])
                }
                let decoded: (header: SegmentHeader, transactions: [LogTransaction])
                do {
                    decoded = try SegmentDecoder.decode(bytes, limits: limits)
                } catch {
                    try leave("cannot be read: \(error)")
                    continue
                }
                let splits = decoded.transactions.map { rules.split($0) }
                if let problem = splits.compactMap(\.problem).first {
                    try leave("does not fit schema version \(version): \(problem)")
                    continue
                }
                var remaining: [LogTransaction] = []
                for (understood, kept, _) in splits {
                    if !understood.changes.isEmpty {
                        try store.publishNodeIndex(&state.nodes, of: origin, connection: connection)
                        _ = try store.applyRemote(rules.names.current(understood), from: origin, state: &state)
                    }
                    if let kept { remaining.append(kept) }
                }
                if remaining.isEmpty {
                    try connection.execute("DELETE FROM _ls_kept WHERE rowid = ?", [.integer(rowid)])
                    outcome.applied += 1
                    continue
                }
                outcome.stillKept += 1
                if writtenUnder <= version {
                    let entities = Set(remaining.flatMap { $0.changes.map(\.entity) }).sorted().joined(separator: ", ")
                    outcome.undeclared.append("\(Self.describeKept(sequence, of: node, writtenUnder: writtenUnder)): \(entities)")
                }
                let segment = try SegmentEncoder.encode(
                    schemaVersion: Int(writtenUnder), account: decoded.header.account, node: origin, transactions: remaining, limits: limits)
                try connection.execute(
                    "UPDATE _ls_kept SET segment = ?, looked_at = ? WHERE rowid = ?", [.blob(segment), .integer(version), .integer(rowid)])
            }
            if outcome.applied + outcome.stillKept > 0 { try store.skipOwnMergeHistory(&state) }
            return outcome
        }
    }
}

extension Store {
    /// Inside an import's sync transaction: keeps `kept`, the part of a transaction this schema does
    /// not declare, from the segment `header` describes. Idempotent: a transaction is kept once.
    func keep(_ kept: SegmentImport.KeptPart, of header: SegmentHeader, state: inout WriterState) throws {
        try state.connection.execute(
            "INSERT OR IGNORE INTO _ls_kept(node, seq, schema_version, looked_at, segment) VALUES (?, ?, ?, ?, ?)",
            [.text(header.node.rawValue), try Self.sequenceValue(kept.sequence), .integer(Int64(header.schemaVersion)),
             .integer(Int64(schema.version)), .blob(kept.segment)])
    }
}
