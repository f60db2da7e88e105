// swift-tools-version: 6.1
//
// logsync — multi-device sync for SQLite stores on Linux.
// Modules are layered; each depends only on the ones above it in this list:
//
//   CSQLite           the one place that crosses into libsqlite3 (system library + shim)
//   CZlib             the one place that crosses into zlib (segment compression and checksums)
//   CSpawn            the one place that crosses into glibc's GNU extensions for children (closefrom, pipe2)
//   LogsyncPlatform   the one place for Linux system calls: inotify, fsync, errno, posix_spawn
//   LogsyncCore       pure: values, schema, hybrid logical clock, history types, merge rules, segment codec
//   LogsyncStatus     plain values that say how sync goes (retention, the relay, Syncthing), for the engine,
//                     the transports and the control protocol alike
//   LogsyncSQLite     the SQLite driver: a connection, its statements, its errors (the store and the relay use it)
//   LogsyncStore      the SQLite store: schema, history capture and API, change monitor, merge engine
//   LogsyncContexts   the app-facing API: container, contexts, Codable records, fetch, merge, observation
//   LogsyncTransport  moving segments between nodes: the Transport protocol, the shared directory
//   LogsyncSync       sync(): export, publish, scan, verify, import, quarantine
//   CSystemd          the one place that crosses into libsystemd (sd_notify, the journal)
//   LogsyncSystemd    readiness, status and watchdog notifications; a journald log handler
//   CCurl             the one place that crosses into libcurl (system library + typed setopt wrappers)
//   LogsyncHTTP       CurlSession: the one Swift type holding a libcurl handle, for every HTTP client
//   LogsyncRelayProtocol   the relay's wire protocol: routes, headers, answer types, error codes, for the relay and its client
//   LogsyncRelayTransport  the relay client: a Transport over HTTP to a sync-relay, through libcurl
//   LogsyncSyncthing  Syncthing's REST API: asks it to scan this node's folder after each publish
//   LogsyncControl    what clients of syncd need: its configuration, the control protocol and client
//   LogsyncDaemon     syncd's parts: the sync loop and the control server
//   LogsyncRelay      sync-relay's parts: accounts and tokens, mailbox storage, limits, the HTTP routes
//   LogsyncRelayPostgres  sync-relay's PostgreSQL backend: storage, arrival numbers, wake-ups across relays
//
import PackageDescription

let package = Package(
    name: "logsync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LogsyncCore", targets: ["LogsyncCore"]),
        .library(name: "LogsyncStore", targets: ["LogsyncStore"]),
        .library(name: "LogsyncSync", targets: ["LogsyncSync"]),
        .library(name: "LogsyncContexts", targets: ["LogsyncContexts"]),
        .executable(name: "syncd", targets: ["syncd"]),
        .executable(name: "syncctl", targets: ["syncctl"]),
        .executable(name: "logsync", targets: ["logsync"]),
        .executable(name: "logsync-bench", targets: ["logsync-bench"]),
        .executable(name: "notes", targets: ["notes"]),
        .executable(name: "sync-relay", targets: ["sync-relay"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(name: "LogsyncCore", dependencies: ["CZlib"]),
        .systemLibrary(name: "CSpawn", path: "Sources/CSpawn"),
        .target(name: "LogsyncPlatform", dependencies: ["CSpawn"]),
        .target(name: "LogsyncStatus"),
        .target(name: "LogsyncSQLite", dependencies: ["CSQLite", "LogsyncCore", "LogsyncPlatform"]),
        .target(name: "LogsyncStore", dependencies: ["LogsyncCore", "LogsyncPlatform", "LogsyncSQLite"]),
        .target(name: "LogsyncContexts", dependencies: ["LogsyncCore", "LogsyncPlatform", "LogsyncStore"]),
        .target(name: "LogsyncTransport", dependencies: ["LogsyncCore", "LogsyncPlatform"]),
        // Sealed accounts: the one place that crosses into swift-crypto for the logs (docs/security.md).
        .target(
            name: "LogsyncSeal",
            dependencies: [
                "LogsyncCore", "LogsyncPlatform", "LogsyncTransport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]),
        .target(name: "LogsyncSync", dependencies: ["LogsyncCore", "LogsyncPlatform", "LogsyncStatus", "LogsyncStore", "LogsyncTransport"]),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "LogsyncSystemd", dependencies: ["CSystemd", "LogsyncPlatform", .product(name: "Logging", package: "swift-log")]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "LogsyncHTTP", dependencies: ["CCurl", "LogsyncTransport"]),
        // The relay's wire protocol, shared by the relay and its client: no HTTP library, no storage.
        .target(name: "LogsyncRelayProtocol"),
        .target(
            name: "LogsyncRelayTransport",
            dependencies: ["LogsyncCore", "LogsyncHTTP", "LogsyncPlatform", "LogsyncRelayProtocol", "LogsyncStatus", "LogsyncTransport"]),
        .target(name: "LogsyncSyncthing", dependencies: ["LogsyncCore", "LogsyncHTTP", "LogsyncPlatform", "LogsyncStatus", "LogsyncTransport"]),
        .target(
            name: "LogsyncRelay",
            dependencies: [
                "LogsyncCore", "LogsyncPlatform", "LogsyncRelayProtocol", "LogsyncSQLite", "LogsyncTransport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "LogsyncRelayPostgres",
            dependencies: [
                "LogsyncCore", "LogsyncPlatform", "LogsyncRelay", "LogsyncRelayProtocol", "LogsyncSQLite",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "sync-relay",
            dependencies: [
                "LogsyncRelay", "LogsyncRelayPostgres", "LogsyncRelayProtocol", "LogsyncControl", "LogsyncCore", "LogsyncPlatform", "LogsyncSystemd",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // syncctl, notes and other clients depend on this, never on the daemon: no engine, no libsystemd.
        .target(name: "LogsyncControl", dependencies: ["LogsyncCore", "LogsyncPlatform", "LogsyncStatus"]),
        .target(
            name: "LogsyncDaemon",
            dependencies: [
                "LogsyncControl", "LogsyncCore", "LogsyncPlatform", "LogsyncStore", "LogsyncSync", "LogsyncTransport", "LogsyncSystemd",
                "LogsyncRelayTransport", "LogsyncSeal", "LogsyncSyncthing",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "syncd",
            dependencies: [
                "LogsyncCore", "LogsyncDaemon", "LogsyncPlatform", "LogsyncSystemd", .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        // The decoders of everything a carrier hands over, for libFuzzer (scripts/decoder-fuzz.sh); built
        // without -sanitize=fuzzer it replays the files it is given (a crash's reproducer).
        .executableTarget(name: "logsync-fuzz", dependencies: ["LogsyncCore", "LogsyncSeal"]),
        .executableTarget(
            name: "syncctl",
            dependencies: ["LogsyncControl", "LogsyncCore", "LogsyncPlatform", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(
            name: "logsync",
            dependencies: [
                "LogsyncControl",
                "LogsyncPlatform",
                "LogsyncSeal",
                "LogsyncStore",
                "LogsyncSync",
                "LogsyncTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The example app of the contexts API.
        .executableTarget(
            name: "notes",
            dependencies: [
                "LogsyncContexts", "LogsyncControl", "LogsyncCore", "LogsyncPlatform", "LogsyncStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(
            name: "logsync-bench",
            dependencies: [
                "CSQLite", "LogsyncSQLite",
                "LogsyncContexts",
                "LogsyncCore",
                "LogsyncPlatform",
                "LogsyncSeal",
                "LogsyncStore",
                "LogsyncSync",
                "LogsyncTestKit",
                "LogsyncTransport",
                "LogsyncRelayTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // For tests and benchmarks alike: temp directories, real child processes, deadline-bounded waits,
        // SyncdCluster.
        .target(
            name: "LogsyncTestKit",
            dependencies: ["CSQLite", "LogsyncControl", "LogsyncCore", "LogsyncPlatform", "LogsyncStore", "LogsyncSyncthing", "LogsyncTransport"]),
        .testTarget(name: "LogsyncCoreTests", dependencies: ["LogsyncControl", "LogsyncCore", "LogsyncTestKit"]),
        .testTarget(name: "LogsyncStoreTests", dependencies: ["LogsyncControl", "LogsyncStore", "LogsyncSQLite", "CSQLite", "LogsyncTestKit"]),
        .testTarget(name: "LogsyncContextsTests", dependencies: ["LogsyncContexts", "LogsyncControl", "LogsyncPlatform", "LogsyncStore", "LogsyncTestKit"]),
        .testTarget(name: "LogsyncSyncTests", dependencies: ["LogsyncContexts", "LogsyncSeal", "LogsyncSync", "LogsyncTransport", "LogsyncStore", "LogsyncSQLite", "LogsyncPlatform", "LogsyncTestKit"]),
        .testTarget(
            name: "LogsyncDaemonTests",
            dependencies: [
                "LogsyncControl", "LogsyncDaemon", "LogsyncContexts", "LogsyncPlatform", "LogsyncStore", "LogsyncSyncthing", "LogsyncSystemd", "LogsyncTestKit",
                "LogsyncTransport", .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "LogsyncRelayTests",
            dependencies: [
                "LogsyncRelay", "LogsyncRelayPostgres", "LogsyncRelayProtocol", "LogsyncRelayTransport", "LogsyncCore", "LogsyncContexts", "LogsyncPlatform", "LogsyncSeal", "LogsyncStore", "LogsyncSync",
                "LogsyncTestKit", "LogsyncTransport", .product(name: "Logging", package: "swift-log"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
