import LogsyncControl
import LogsyncCore
import LogsyncSync

extension DaemonConfiguration {
    /// The engine settings these keys describe.
    public var syncConfiguration: SyncConfiguration {
        SyncConfiguration(
            account: account, maximumChangesPerSegment: segmentChanges,
            batching: ImportBatching(maximumChanges: batchChanges, maximumMilliseconds: batchMilliseconds))
    }
}
