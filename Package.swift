// swift-tools-version: 6.1
//
// logsync — multi-device sync for SQLite stores on Linux.
// Modules are layered; each depends only on the ones above it in this list:
//
//   CSQLite       the one place that crosses into libsqlite3 (system library + shim)
//   CZlib         the one place that crosses into zlib (segment compression and checksums)
//   LogsyncCore   pure types: values, schema, hybrid logical clock, history types, merge rules, segment codec
//   LogsyncStore  the SQLite store: schema registration, history capture, history API, change monitor
//
import PackageDescription

let package = Package(
    name: "logsync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LogsyncCore", targets: ["LogsyncCore"]),
        .library(name: "LogsyncStore", targets: ["LogsyncStore"]),
        .executable(name: "logsync", targets: ["logsync"]),
        .executable(name: "logsync-bench", targets: ["logsync-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
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
        .target(name: "LogsyncStore", dependencies: ["CSQLite", "LogsyncCore"]),
        .executableTarget(
            name: "logsync",
            dependencies: [
                "LogsyncStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "logsync-bench",
            dependencies: [
                "CSQLite",
                "LogsyncStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "LogsyncCoreTests", dependencies: ["LogsyncCore"]),
        .testTarget(name: "LogsyncStoreTests", dependencies: ["LogsyncStore", "CSQLite"]),
    ],
    swiftLanguageModes: [.v6]
)
