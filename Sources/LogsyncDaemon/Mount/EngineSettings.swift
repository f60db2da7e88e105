import LogsyncControl
import LogsyncCore
import LogsyncRelayTransport
import LogsyncSync

extension DaemonConfiguration {
    /// The engine settings these keys describe.
    public var syncConfiguration: SyncConfiguration {
        SyncConfiguration(
            account: account, maximumChangesPerSegment: segmentChanges,
            batching: ImportBatching(maximumChanges: batchChanges, maximumMilliseconds: batchMilliseconds),
            retention: RetentionConfiguration(
                enabled: retentionEnabled, silentNodeAfterMilliseconds: UInt64(silentNodeAfterSeconds) * 1_000,
                baselineAfterTransactions: UInt64(baselineAfterTransactions), progressIntervalMilliseconds: UInt64(progressIntervalMilliseconds),
                pruneIntervalMilliseconds: UInt64(pruneIntervalMilliseconds)))
    }
}

extension RelayConnection {
    /// The client settings, with the token read from its file now.
    public func clientSettings(account: String) throws(ConfigError) -> RelayClientSettings {
        let token = try self.token(for: account)
        var settings = RelayClientSettings(url: url, account: account, token: token, caFile: caFile)
        settings.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        settings.requestTimeoutMilliseconds = requestTimeoutMilliseconds
        settings.longPollSeconds = longPollSeconds
        return settings
    }
}

extension SyncEngine {
    /// The same engine under `configuration`'s settings, for the account it syncs (a reload).
    func reconfigured(to configuration: DaemonConfiguration) -> SyncEngine {
        reconfigured(configuration.syncConfiguration.for(self.configuration.account))
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
