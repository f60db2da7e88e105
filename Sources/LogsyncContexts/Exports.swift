// An app imports LogsyncContexts alone: the schema, values and history types it works with come along.
@_exported import LogsyncCore
@_exported import LogsyncStore
