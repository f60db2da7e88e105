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

extension SyncConfiguration {
    /// The same settings for another account's store.
    func `for`(_ account: String) -> SyncConfiguration {
        var settings = self
        settings.account = account
        return settings
    }
}
