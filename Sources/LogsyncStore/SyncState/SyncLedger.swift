/// What a store keeps and does for sync, apart from what apps use: the outbox of this node's segments,
/// the cursors and checksums of what was applied from other nodes, segment imports, refused and
/// divergent segments, baselines and retention, the carrier identity, and the figures syncd reports.
///
/// The sync engine, syncd and the benchmarks reach it as ``Store/sync``; ``Store``'s own methods are the
/// ones an app uses (writing, reading history, checkpoints). The ledger holds nothing but its store: its
/// state is in the store file (`_ls_outbox`, `_ls_cursor`, `_ls_segment`, `_ls_refused`, `_ls_quarantine`,
/// `_ls_dropped`, and keys of `_ls_meta`), written through the store's connections.
///
/// One file per concern: `Outbox.swift`, `Cursors.swift`, `SegmentImport.swift`, `Refusals.swift`,
/// `Quarantine.swift`, `CarrierReset.swift`, `SyncStatus.swift`, and for baselines `BaselineWriter.swift`,
/// `BaselineLoader.swift` and `BaselinePruning.swift`.
package struct SyncLedger: Sendable {
    let store: Store
}

extension Store {
    /// What this store keeps for sync (``SyncLedger``).
    package var sync: SyncLedger { SyncLedger(store: self) }
}
