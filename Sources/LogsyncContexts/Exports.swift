// An app imports LogsyncContexts alone: the types it declares its schema with, the values and history it
// meets, and the store a container opens come along — by name, not whole modules, so that the sync
// plumbing of LogsyncCore and LogsyncStore (segments, row states, outboxes) stays out of its view.
@_exported import struct LogsyncCore.Attribute
@_exported import enum LogsyncCore.AttributeType
@_exported import enum LogsyncCore.ChangeKind
@_exported import enum LogsyncCore.DatabaseValue
@_exported import enum LogsyncCore.DefaultValue
@_exported import enum LogsyncCore.DeleteRule
@_exported import struct LogsyncCore.Entity
@_exported import struct LogsyncCore.HistoryChange
@_exported import struct LogsyncCore.HistoryToken
@_exported import struct LogsyncCore.HistoryTransaction
@_exported import struct LogsyncCore.HLCTimestamp
@_exported import struct LogsyncCore.NodeID
@_exported import enum LogsyncCore.Origin
@_exported import struct LogsyncCore.PrimaryKey
@_exported import struct LogsyncCore.Relationship
@_exported import struct LogsyncCore.Schema
@_exported import struct LogsyncCore.SchemaError
@_exported import struct LogsyncStore.AccountState
@_exported import struct LogsyncStore.AccountStores
@_exported import struct LogsyncStore.HistoryFilter
@_exported import class LogsyncStore.Store
@_exported import struct LogsyncStore.StoreError
@_exported import struct LogsyncStore.StoreOptions
