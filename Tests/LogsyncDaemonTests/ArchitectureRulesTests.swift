import Foundation
import LogsyncTestKit
import Testing

/// The rules `docs/architecture.md` states about the code ("Rules the code keeps"), each checked here so
/// that breaking one fails a test instead of waiting for a reviewer. Symbols are read from the debug
/// build's object files (`nm -u`: what each module calls that it does not define); declarations from the
/// sources, with comments and string literals removed. Each exception names its file and says why.
@Suite("architecture rules")
struct ArchitectureRulesTests {
    /// The package root: this file is Tests/LogsyncDaemonTests/ArchitectureRulesTests.swift.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    // MARK: - a. System calls only in LogsyncPlatform

    /// The system interface: calls into the kernel (and the libc machinery that exists only around them:
    /// signal sets, spawn attributes), which only `LogsyncPlatform` makes. It holds at least everything
    /// `LogsyncPlatform` itself calls (`systemInterfaceCoversPlatform` checks that).
    static let systemCalls: Set<String> = [
        // files and folders
        "open", "open64", "openat", "openat64", "creat", "close", "read", "pread", "pread64", "write", "pwrite", "pwrite64", "lseek", "lseek64",
        "fsync", "fdatasync", "sync_file_range", "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "symlink",
        "symlinkat", "readlink", "readlinkat", "realpath", "mkdir", "mkdirat", "rmdir", "chdir", "fchdir", "chmod", "fchmod", "fchmodat",
        "chown", "fchown", "lchown", "fchownat", "truncate", "ftruncate", "ftruncate64", "stat", "stat64", "fstat", "fstat64", "lstat",
        "lstat64", "fstatat", "fstatat64", "statx", "access", "faccessat", "opendir", "fdopendir", "readdir", "readdir64", "closedir",
        "rewinddir", "fcntl", "fcntl64", "ioctl", "flock", "lockf", "dup", "dup2", "dup3", "pipe", "pipe2", "mmap", "mmap64", "munmap",
        "msync", "umask", "mkfifo", "mknod",
        // watching and waiting
        "poll", "ppoll", "select", "pselect", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "inotify_init", "inotify_init1",
        "inotify_add_watch", "inotify_rm_watch", "eventfd", "timerfd_create", "timerfd_settime", "sleep", "usleep", "nanosleep",
        "clock_nanosleep", "clock_gettime", "gettimeofday", "time",
        // sockets
        "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg", "recv", "recvfrom", "recvmsg",
        "shutdown", "setsockopt", "getsockopt", "getsockname", "getpeername",
        // processes, users, signals, limits
        "fork", "vfork", "execve", "execv", "execvp", "posix_spawn", "posix_spawnp", "posix_spawn_file_actions_init",
        "posix_spawn_file_actions_destroy", "posix_spawn_file_actions_adddup2", "posix_spawn_file_actions_addopen",
        "posix_spawn_file_actions_addclose", "posix_spawn_file_actions_addclosefrom_np", "posix_spawnattr_init", "posix_spawnattr_destroy",
        "posix_spawnattr_setflags", "posix_spawnattr_setpgroup", "posix_spawnattr_setsigdefault", "posix_spawnattr_setsigmask", "wait",
        "waitpid", "waitid", "kill", "raise", "killpg", "pthread_kill", "signal", "sigaction", "sigprocmask", "pthread_sigmask",
        "sigemptyset", "sigfillset", "sigaddset", "sigdelset", "sigwait", "signalfd", "getpid", "getppid", "getuid", "geteuid", "getgid",
        "getegid", "setsid", "setpgid", "getpwnam", "getpwuid", "getrlimit", "setrlimit", "getrusage", "prctl", "_exit",
    ]

    /// What modules call that is not the system interface: the C runtime, the compiler's support, the
    /// math library; and the C libraries each reached through their shim (checked in `cLibrariesStayInTheirModule`).
    static let notSystemCalls: Set<String> = [
        "memcpy", "memmove", "memset", "memcmp", "strlen", "strcmp", "strdup", "strerror", "malloc", "calloc", "realloc", "free",
        "malloc_usable_size", "getenv", "exit", "sysconf", "inet_addr", "inet_pton", "inet_ntop", "ceil", "floor", "pow", "rint", "round",
        "trunc", "log", "exp", "sqrt", "__stack_chk_fail", "__tls_get_addr", "_Block_copy", "_Block_release", "_NSConcreteStackBlock",
        // The raw syscall(2) entry: Synchronization's `Mutex`, inlined into every module that holds one, waits with
        // syscall(SYS_futex). Swift code cannot call it (a variadic C function is unavailable in Swift).
        "syscall",
    ]

    /// C libraries, by symbol prefix, and the one module that calls each (`Package.swift`: one shim per library).
    static let cLibraries: [(prefix: String, library: String, module: String)] = [
        ("sqlite3", "libsqlite3", "LogsyncSQLite"),
        ("curl_", "libcurl", "LogsyncHTTP"),
        ("sd_", "libsystemd", "LogsyncSystemd"),
        ("deflate", "zlib", "LogsyncCore"), ("inflate", "zlib", "LogsyncCore"), ("crc32", "zlib", "LogsyncCore"),
    ]

    /// Files outside `LogsyncPlatform` allowed to make system calls, with the calls and why. Nothing here
    /// ships in a product: these are test fixtures and the benchmark harness, playing the other end of a
    /// protocol at the socket level, where going through the platform module's product-side types would
    /// take away what they are for.
    static let systemCallExceptions: [String: (calls: Set<String>, why: String)] = [
        "LogsyncTestKit/NotifyReceiver.swift": (
            ["socket", "bind", "setsockopt", "recvmsg", "close", "unlink"],
            "plays systemd's side of sd_notify: a datagram socket receiving what syncd and sync-relay send, with the sender's credentials; the product only ever sends"
        ),
        "LogsyncTestKit/RawHTTP.swift": (
            ["socket", "connect", "setsockopt", "send", "recv", "close"],
            "a hostile HTTP client: writes bytes no HTTP library would (malformed, partial, slow) to test the relay's limits"
        ),
        "LogsyncTestKit/StubHTTPServer.swift": (
            ["socket", "bind", "setsockopt", "listen", "accept", "getsockname", "read", "send", "shutdown", "close"],
            "a stand-in for Syncthing's REST API that answers, stalls or hangs up as a test scripts it, to test syncd's client against a misbehaving server"
        ),
        "logsync-bench/RelaySuite.swift": (
            ["socket", "connect", "setsockopt", "send", "recv", "poll", "close"],
            "the relay benchmark's load generator: thousands of keep-alive long-polls on one thread with poll(2) — the load being measured, not product code"
        ),
        "logsync-bench/RelayLoadRun.swift": (
            ["recv", "poll", "close"],
            "the same load generator's long-poll reader (RelaySuite.swift opens the sockets)"
        ),
    ]

    @Test("system calls are made in LogsyncPlatform only (nm -u of every other module's objects), save the listed fixtures")
    func systemCallsOnlyInPlatform() async throws {
        let symbols = try await Self.undefinedSymbols()
        var violations: [String] = [], used: [String: Set<String>] = [:]
        for (file, calls) in symbols.sorted(by: { $0.key < $1.key }) where Self.module(of: file) != "LogsyncPlatform" {
            let system = calls.intersection(Self.systemCalls)
            let allowed = Self.systemCallExceptions[file]?.calls ?? []
            used[file] = system.intersection(allowed)
            let forbidden = system.subtracting(allowed)
            if !forbidden.isEmpty {
                violations.append("Sources/\(file) calls \(forbidden.sorted().joined(separator: ", "))")
            }
        }
        #expect(
            violations.isEmpty,
            "system calls outside LogsyncPlatform: wrap them there (DurableFiles, Pause, CurrentUser, HandledSignals, …) or, for a fixture, list them in systemCallExceptions with why:\n\(violations.joined(separator: "\n"))"
        )
        for (file, exception) in Self.systemCallExceptions {
            let unused = exception.calls.subtracting(used[file] ?? [])
            #expect(unused.isEmpty, "systemCallExceptions lists \(unused.sorted()) for Sources/\(file), which no longer calls them: remove them from the list")
        }
    }

    @Test("the list of system calls covers everything LogsyncPlatform calls, and every C symbol a module calls is classified")
    func systemInterfaceCoversPlatform() async throws {
        let symbols = try await Self.undefinedSymbols()
        let platform = symbols.filter { Self.module(of: $0.key) == "LogsyncPlatform" }.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        #expect(platform.contains("inotify_init1") && platform.contains("posix_spawn"), "nm read LogsyncPlatform's objects: \(platform.sorted())")
        var unclassified: [String: Set<String>] = [:]
        for (file, calls) in symbols {
            for call in calls where !Self.systemCalls.contains(call) && !Self.notSystemCalls.contains(call) && Self.cLibrary(of: call) == nil {
                unclassified[file, default: []].insert(call)
            }
        }
        #expect(
            unclassified.isEmpty,
            "C symbols neither in systemCalls nor in notSystemCalls (add each to the right list):\n\(unclassified.sorted { $0.key < $1.key }.map { "Sources/\($0.key): \($0.value.sorted().joined(separator: ", "))" }.joined(separator: "\n"))"
        )
    }

    // MARK: - b. Each C library from one module

    /// Files outside a library's module allowed to call it, and why.
    static let cLibraryExceptions: [String: (prefix: String, why: String)] = [
        "LogsyncTestKit/ForeignConnection.swift": (
            "sqlite3", "the foreign writer: a program that is not logsync writing the store through plain libsqlite3, as an app or the sqlite3 shell does"
        ),
        "logsync-bench/PlainSQLite.swift": (
            "sqlite3", "the benchmarks' baseline of plain SQLite (no history, no triggers), measured beside logsync in the same run"
        ),
        "logsync-bench/SegmentFixture.swift": (
            "sqlite3", "the benchmarks' baseline of SQLite's session extension (a changeset recorded and applied), which logsync's driver does not wrap"
        ),
    ]

    @Test("libsqlite3, libcurl, libsystemd and zlib are each called from one module only (nm -u), save the listed fixtures")
    func cLibrariesStayInTheirModule() async throws {
        let symbols = try await Self.undefinedSymbols()
        var violations: [String] = [], seen: Set<String> = [], exceptionsUsed: Set<String> = []
        for (file, calls) in symbols.sorted(by: { $0.key < $1.key }) {
            for call in calls.sorted() {
                guard let library = Self.cLibrary(of: call) else { continue }
                seen.insert(library.prefix)
                if Self.module(of: file) == library.module { continue }
                if let exception = Self.cLibraryExceptions[file], exception.prefix == library.prefix {
                    exceptionsUsed.insert(file)
                    continue
                }
                violations.append("Sources/\(file) calls \(library.library) (\(call)), which only \(library.module) may call")
            }
        }
        #expect(Set(Self.cLibraries.map(\.prefix)).isSubset(of: seen), "nm read the objects: every C library is called somewhere, \(seen.sorted())")
        #expect(violations.isEmpty, "C library calls outside their module:\n\(violations.joined(separator: "\n"))")
        let unused = Set(Self.cLibraryExceptions.keys).subtracting(exceptionsUsed)
        #expect(unused.isEmpty, "cLibraryExceptions lists \(unused.sorted()), which no longer call their library: remove them")
    }

    // MARK: - c. Every `@unchecked Sendable` is listed with its reason

    @Test("every @unchecked Sendable in Sources/ is a row of docs/architecture.md's table, and every row is in the code")
    func uncheckedSendableTable() throws {
        var inCode: Set<String> = [], unparsed: [String] = []
        for source in try Self.sources() {
            let occurrences = Self.matches(#"@unchecked\s+Sendable"#, in: source.code).count
            guard occurrences > 0 else { continue }
            let declarations = Self.matches(#"\b(?:class|struct|enum|actor|extension)\s+([A-Za-z_][\w.]*)(?:<[^>{]*>)?\s*:[^{]*?@unchecked\s+Sendable"#, in: source.code)
            if declarations.count != occurrences { unparsed.append("Sources/\(source.path): \(occurrences) uses, \(declarations.count) declarations read") }
            for name in declarations { inCode.insert("\(name) in Sources/\(source.path)") }
        }
        #expect(unparsed.isEmpty, "@unchecked Sendable the test cannot attribute to a declaration: \(unparsed)")
        let rows = try Self.tableRows(under: "### `@unchecked Sendable`", in: "docs/architecture.md")
        var inTable: Set<String> = []
        for row in rows {
            #expect(row.count == 3, "a row of the @unchecked Sendable table has type, file and why: \(row)")
            guard row.count == 3 else { continue }
            let type = row[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), file = row[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            #expect(row[2].count > 20, "the row for \(type) says why no lock type can hold its state: \(row)")
            inTable.insert("\(type) in \(file)")
        }
        #expect(!inCode.isEmpty && !inTable.isEmpty, "both read: \(inCode.count) in the code, \(inTable.count) rows")
        #expect(inCode.subtracting(inTable).isEmpty, "@unchecked Sendable not listed in docs/architecture.md (add a row with why no lock type holds it): \(inCode.subtracting(inTable).sorted())")
        #expect(inTable.subtracting(inCode).isEmpty, "rows of docs/architecture.md's @unchecked Sendable table with no such declaration: \(inTable.subtracting(inCode).sorted())")
    }

    // MARK: - d. Durations as `Duration`

    /// Parameter names that say time is meant.
    static let timeWords = #"(?i)(timeout|wait|interval|deadline|delay|backoff|sleep|pause|linger|period|seconds|millis|micros|nanos|ms$)"#
    /// Types that carry a time as a bare number.
    static let numberTypes = #"^(Double|Float|TimeInterval|DispatchTime|DispatchTimeInterval|DispatchWallTime|U?Int(8|16|32|64)?|CInt|CLong|useconds_t|time_t)\??$"#

    static let cUnit = "passed straight to a C call in that call's own unit; the wrapper is the boundary where a Duration would be converted back"
    static let wireUnit = "a field of the control protocol's JSON (docs/control-protocol.md), integer milliseconds on the wire; the initializer mirrors it"
    static let instant = "a point in time (milliseconds since 1970, as the hybrid logical clock and the persisted formats store it), not a span: Duration measures spans"
    static let configUnit = "a setting read from an integer key of syncd.toml (`_ms`, `_s`) and compared with millisecond timestamps; configuration fields are integers by design"

    /// Public and package parameters that carry a time as a number, and why each stays so.
    static let durationExceptions: [String: String] = [
        "LogsyncSQLite/Connection.swift setBusyTimeout(milliseconds:)": "sqlite3_busy_timeout: " + cUnit,
        "LogsyncTestKit/ForeignConnection.swift init(busyTimeoutMilliseconds:)": "sqlite3_busy_timeout: " + cUnit,
        "LogsyncStore/Store/StoreOptions.swift init(busyTimeoutMilliseconds:)": "sqlite3_busy_timeout: " + cUnit + "; public API of a library product",
        "LogsyncPlatform/WatchThread.swift next(timeoutMilliseconds:)": "poll(2): " + cUnit,
        "LogsyncPlatform/DirectoryWatch.swift waitForEvents(timeoutMilliseconds:)": "poll(2): " + cUnit,
        "LogsyncPlatform/DirectoryWatch.swift wait(timeoutMilliseconds:)": "poll(2): " + cUnit,
        "LogsyncPlatform/UnixSocket.swift setReceiveTimeout(milliseconds:)": "SO_RCVTIMEO: " + cUnit,
        "LogsyncPlatform/UnixSocket.swift setSendTimeout(milliseconds:)": "SO_SNDTIMEO: " + cUnit,
        "LogsyncHTTP/CurlSession.swift perform(timeoutMilliseconds:)": "CURLOPT_TIMEOUT_MS: " + cUnit,
        "LogsyncHTTP/CurlSession.swift perform(connectTimeoutMilliseconds:)": "CURLOPT_CONNECTTIMEOUT_MS: " + cUnit,
        "LogsyncHTTP/CurlSession.swift perform(stallSeconds:)": "CURLOPT_LOW_SPEED_TIME (whole seconds): " + cUnit,
        "LogsyncSyncthing/SyncthingClient.swift init(timeoutMilliseconds:)": "[syncthing] timeout_ms, handed to CURLOPT_TIMEOUT_MS: " + configUnit,
        "LogsyncTestKit/SyncthingPair.swift client(timeoutMilliseconds:)": "builds a SyncthingClient with its timeout_ms: " + configUnit,
        "LogsyncPlatform/FaultInjection.swift delay(milliseconds:)": "a fault point's pause, read from a LOGSYNC_*_MS environment variable by tests",
        "LogsyncPlatform/FaultInjection.swift gate(milliseconds:)": "a fault point's wait, read from a LOGSYNC_*_MS environment variable by tests",
        "LogsyncPlatform/FaultInjection.swift milliseconds(default:)": "reads a LOGSYNC_*_MS environment variable: its default is in the variable's unit",
        "LogsyncTestKit/SyncthingPair.swift init(watcherDelaySeconds:)": "written into Syncthing's config.xml, whose fsWatcherDelayS is whole seconds",
        "LogsyncTestKit/SyncthingPair.swift init(rescanIntervalSeconds:)": "written into Syncthing's config.xml, whose rescanIntervalS is whole seconds",
        "LogsyncTestKit/SyncdCluster.swift addNode(rescanIntervalMilliseconds:)": "written into the node's syncd.toml as an `_ms` key: " + configUnit,
        "LogsyncControl/Control/ControlClient.swift send(timeoutMilliseconds:)": "the request's timeout_ms: " + wireUnit,
        "LogsyncControl/Control/ControlProtocol.swift init(timeoutMilliseconds:)": "timeout_ms: " + wireUnit,
        "LogsyncControl/Control/ControlProtocol.swift init(retryInMilliseconds:)": "retry_in_ms: " + wireUnit,
        "LogsyncControl/Control/ControlProtocol.swift init(elapsedMilliseconds:)": "elapsed_ms of a check: " + wireUnit,
        "LogsyncControl/Control/ControlProtocol.swift init(waitingFor:)": "a segment's sequence number, not a time (the word 'wait' matched)",
        "LogsyncCore/Log/ProgressRecord.swift init(activeAtMilliseconds:)": instant,
        "LogsyncCore/Clock/HybridLogicalClock.swift init(physicalMilliseconds:)": instant,
        "LogsyncCore/Clock/HybridLogicalClock.swift tick(physicalMilliseconds:)": instant,
        "LogsyncCore/Clock/HybridLogicalClock.swift observe(physicalMilliseconds:)": instant,
        "LogsyncCore/Clock/UTCTime.swift iso8601(milliseconds:)": instant,
        "LogsyncCore/Settings/ImportBatching.swift init(maximumMilliseconds:)": "[sync] batch_ms: " + configUnit + "; public API of a library product",
        "LogsyncSync/Retention.swift init(silentNodeAfterMilliseconds:)": "[retention] silent_node_after_s (seconds, kept in milliseconds beside the clock's timestamps): " + configUnit + "; public API of a library product",
        "LogsyncSync/Retention.swift init(progressIntervalMilliseconds:)": "[retention] progress_interval_ms: " + configUnit + "; public API of a library product",
        "LogsyncSync/Retention.swift init(pruneIntervalMilliseconds:)": "[retention] prune_interval_ms: " + configUnit + "; public API of a library product",
    ]

    @Test("public and package functions take a time as Duration, not as a Double, TimeInterval, DispatchTime or bare integer, save the listed ones")
    func durationsAsDuration() throws {
        var found: Set<String> = []
        for source in try Self.sources() {
            for parameter in Self.publicParameters(in: source.code)
            where parameter.type.range(of: Self.numberTypes, options: .regularExpression) != nil
                && parameter.names.contains(where: { $0.range(of: Self.timeWords, options: .regularExpression) != nil })
            {
                found.insert("\(source.path) \(parameter.function)(\(parameter.names[0]):)")
            }
        }
        #expect(found.contains("LogsyncPlatform/UnixSocket.swift setReceiveTimeout(milliseconds:)"), "the scan reads parameters: \(found.sorted())")
        let unlisted = found.subtracting(Self.durationExceptions.keys)
        #expect(unlisted.isEmpty, "times as bare numbers in public or package functions: take a Duration, or list them in durationExceptions with why:\n\(unlisted.sorted().joined(separator: "\n"))")
        let stale = Set(Self.durationExceptions.keys).subtracting(found)
        #expect(stale.isEmpty, "durationExceptions lists parameters that are gone or now Durations: remove them:\n\(stale.sorted().joined(separator: "\n"))")
    }

    // MARK: - e. A pure core

    @Test("LogsyncCore depends on nothing but the zlib shim, imports only Foundation, Synchronization and CZlib, and holds no status or notes types")
    func pureCore() throws {
        let manifest = try String(contentsOfFile: Self.root + "/Package.swift", encoding: .utf8)
        let declaration = try #require(
            manifest.range(of: #"\.target\(\s*name:\s*"LogsyncCore"[^)]*\)"#, options: .regularExpression).map { String(manifest[$0]) },
            "LogsyncCore's target in Package.swift")
        let dependencies = Self.matches(#""([^"]+)""#, in: declaration).filter { $0 != "LogsyncCore" }
        #expect(dependencies == ["CZlib"], "LogsyncCore depends on \(dependencies), not only on the zlib shim: \(declaration)")
        let allowed: Set = ["Foundation", "Synchronization", "CZlib"]
        var imports: [String] = [], foreignTypes: [String] = []
        let statusTypes = Set(try Self.sources().filter { Self.module(of: $0.path) == "LogsyncStatus" }.flatMap { Self.typeNames(in: $0.code, topLevel: true) })
        #expect(statusTypes.contains("RelayContact"), "LogsyncStatus's types read: \(statusTypes.sorted())")
        for source in try Self.sources() where Self.module(of: source.path) == "LogsyncCore" {
            for module in Self.matches(#"(?m)^\s*(?:@\w+\s+)*import\s+(?:(?:struct|class|enum|protocol|typealias|func|let|var)\s+)?(\w+)"#, in: source.code)
            where !allowed.contains(module) {
                imports.append("Sources/\(source.path) imports \(module)")
            }
            for type in Self.typeNames(in: source.code)
            where statusTypes.contains(type) || type.range(of: #"Relay|Syncthing|Notes?Schema"#, options: .regularExpression) != nil {
                foreignTypes.append("Sources/\(source.path) declares \(type)")
            }
        }
        #expect(imports.isEmpty, "LogsyncCore is pure: \(imports)")
        #expect(foreignTypes.isEmpty, "status types belong in LogsyncStatus, the notes schema in LogsyncControl: \(foreignTypes)")
    }

    // MARK: - f. Products re-export named types

    @Test("the library products re-export named declarations, never a whole module")
    func namedReExports() throws {
        let manifest = try String(contentsOfFile: Self.root + "/Package.swift", encoding: .utf8)
        let products = Set(Self.matches(#"\.library\(name:\s*"(\w+)""#, in: manifest))
        #expect(products == ["LogsyncCore", "LogsyncStore", "LogsyncSync", "LogsyncContexts"], "the library products read from Package.swift: \(products)")
        var named = 0, whole: [String] = []
        for source in try Self.sources() where products.contains(Self.module(of: source.path)) {
            for line in source.code.split(separator: "\n") where line.contains("@_exported") {
                if line.range(of: #"^\s*@_exported\s+import\s+(struct|class|enum|protocol|typealias|func|let|var)\s+\w+\.\w+\s*$"#, options: .regularExpression) != nil {
                    named += 1
                } else {
                    whole.append("Sources/\(source.path): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(named >= 20, "Sources/LogsyncContexts/Exports.swift's named re-exports read: \(named)")
        #expect(whole.isEmpty, "a library product re-exports a whole module (name the types instead: @_exported import struct Module.Name):\n\(whole.joined(separator: "\n"))")
    }

    // MARK: - g. The daemon waits on Wakeup

    /// The hand-rolled ways to wait that ``Wakeup`` and ``Poll`` (LogsyncPlatform) replace.
    static let handRolledWaits = #"\b(NSLock|NSRecursiveLock|NSCondition|NSConditionLock|DispatchSemaphore|DispatchGroup|usleep|nanosleep|Thread\.sleep)\b"#

    @Test("syncd, LogsyncDaemon and LogsyncSyncthing wait on Wakeup or Poll: no NSLock, NSCondition, semaphore, group or sleep of their own")
    func daemonWaitsOnWakeup() throws {
        let sources = try Self.sources()
        // The scan reads code: Wakeup itself is built on a semaphore.
        let wakeup = try #require(sources.first { $0.path == "LogsyncPlatform/Wakeup.swift" })
        #expect(wakeup.code.range(of: Self.handRolledWaits, options: .regularExpression) != nil, "the scan finds LogsyncPlatform/Wakeup.swift's semaphore")
        var found: [String] = []
        for source in sources where ["syncd", "LogsyncDaemon", "LogsyncSyncthing"].contains(Self.module(of: source.path)) {
            for (number, line) in source.code.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.range(of: Self.handRolledWaits, options: .regularExpression) != nil {
                found.append("Sources/\(source.path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(found.isEmpty, "the daemon waits on Wakeup (a signal, then look again) or Poll (what no signal announces):\n\(found.joined(separator: "\n"))")
    }

    // MARK: - Counts in the docs are the code's

    @Test("the symbol counts docs/decisions.md gives are docs/api/public-api.txt's")
    func statedCounts() throws {
        let listing = try String(contentsOfFile: Self.root + "/docs/api/public-api.txt", encoding: .utf8).split(separator: "\n")
        var perModule: [String: Int] = [:]
        for line in listing { perModule[String(line.prefix { $0 != " " }), default: 0] += 1 }
        let decisions = try String(contentsOfFile: Self.root + "/docs/decisions.md", encoding: .utf8)
        let stated = try #require(
            decisions.firstMatch(of: #/\((\d+)\s+symbols:\s+(\d+)\s+in\s+the\s+core,\s+(\d+)\s+in\s+the\s+store,\s+(\d+)\s+in\s+sync,\s+(\d+)\s+in\s+contexts\)/#),
            "docs/decisions.md states the public API's size as (N symbols: A in the core, B in the store, C in sync, D in contexts)")
        let actual = "(\(listing.count) symbols: \(perModule["LogsyncCore"] ?? 0) in the core, \(perModule["LogsyncStore"] ?? 0) in the store, \(perModule["LogsyncSync"] ?? 0) in sync, \(perModule["LogsyncContexts"] ?? 0) in contexts)"
        let written = "(\(stated.1) symbols: \(stated.2) in the core, \(stated.3) in the store, \(stated.4) in sync, \(stated.5) in contexts)"
        #expect(written == actual, "docs/decisions.md says \(written); docs/api/public-api.txt holds \(actual)")
    }
}

// MARK: - Reading the build and the sources

extension ArchitectureRulesTests {
    /// A Swift source file under Sources/, by path relative to Sources/, with comments and string
    /// literals removed.
    struct Source {
        var path: String
        var code: String
    }

    static func module(of path: String) -> String { String(path.prefix { $0 != "/" }) }

    static func cLibrary(of symbol: String) -> (prefix: String, library: String, module: String)? {
        cLibraries.first { symbol.hasPrefix($0.prefix) }
    }

    /// Every .swift file of every module in Sources/.
    static func sources() throws -> [Source] {
        let sourcesFolder = root + "/Sources"
        let enumerator = try #require(FileManager.default.enumerator(atPath: sourcesFolder))
        var sources: [Source] = []
        while let path = enumerator.nextObject() as? String {
            guard path.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: sourcesFolder + "/" + path, encoding: .utf8)
            sources.append(Source(path: path, code: SwiftText.code(of: text)))
        }
        #expect(sources.count > 100, "read Sources/: \(sources.count) files")
        return sources.sorted { $0.path < $1.path }
    }

    /// What each Swift module's objects leave undefined (`nm -u`), by source file relative to Sources/,
    /// C symbols only (Swift's mangled names are left out). Only objects whose source exists are read: a
    /// moved file's object lingers in .build. A missing object fails: the test reads the debug build,
    /// which `swift build --build-tests` makes before the tests run.
    static func undefinedSymbols() async throws -> [String: Set<String>] {
        let nm = try #require(Tools.find("nm"), "nm (binutils) is needed to read the build's objects: scripts/install-deps.sh installs it")
        let build = root + "/.build/debug"
        var byObject: [String: String] = [:], missing: [String] = []
        for source in try sources() {
            let module = module(of: source.path), name = (source.path as NSString).lastPathComponent
            let object = "\(build)/\(module.replacingOccurrences(of: "-", with: "_")).build/\(name).o"
            if FileManager.default.fileExists(atPath: object) { byObject[object] = source.path } else { missing.append(object) }
        }
        #expect(
            missing.isEmpty,
            "objects of the debug build missing (run `swift build --build-tests` first; the rules are read from them):\n\(missing.prefix(10).joined(separator: "\n"))")
        try #require(!byObject.isEmpty, "no objects in \(build): run `swift build --build-tests` first")
        var symbols: [String: Set<String>] = [:]
        let objects = byObject.keys.sorted()
        for start in stride(from: 0, to: objects.count, by: 100) {
            let batch = Array(objects[start..<min(start + 100, objects.count)])
            let result = try await Subprocess.run(nm, ["-u", "-A"] + batch, timeout: .seconds(120))
            try #require(result.status == 0, "nm -u failed: \(result.stderr)")
            for line in result.stdout.split(separator: "\n") {
                // "/path/File.swift.o:                 U symbol"
                guard let colon = line.range(of: ".o:") else { continue }
                let object = String(line[..<colon.lowerBound]) + ".o"
                guard let file = byObject[object], let symbol = line.split(separator: " ").last.map(String.init) else { continue }
                if symbol.hasPrefix("$s") || symbol.hasPrefix("swift_") || symbol.hasPrefix("_swift") || symbol.hasPrefix("$") { continue }
                symbols[file, default: []].insert(symbol)
            }
        }
        for file in byObject.values where symbols[file] == nil { symbols[file] = [] }
        return symbols
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        guard let expression = try? NSRegularExpression(pattern: pattern) else { return [] }
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            Range(match.range(at: match.numberOfRanges > 1 ? 1 : 0), in: text).map { String(text[$0]) }
        }
    }

    /// The types `code` declares; with `topLevel`, only those not nested in another.
    static func typeNames(in code: String, topLevel: Bool = false) -> [String] {
        topLevel
            ? matches(#"(?m)^(?:(?:public|package|internal|fileprivate|private|final|indirect)\s+)*(?:struct|class|enum|protocol|actor|typealias)\s+([A-Za-z_]\w*)"#, in: code)
            : matches(#"\b(?:struct|class|enum|protocol|actor|typealias)\s+([A-Za-z_]\w*)"#, in: code)
    }

    /// The rows of the first Markdown table after `heading` in a doc, header and separator left out, each
    /// as its trimmed cells.
    static func tableRows(under heading: String, in doc: String) throws -> [[String]] {
        let text = try String(contentsOfFile: root + "/" + doc, encoding: .utf8)
        let section = try #require(text.range(of: heading).map { text[$0.upperBound...] }, "\(doc) has a section \(heading)")
        let lines = section.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        return lines.dropFirst(2).map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// The parameters of the public, package and open functions, initializers and subscripts in `code`.
    static func publicParameters(in code: String) -> [(function: String, names: [String], type: String)] {
        let declaration = try! NSRegularExpression(pattern: #"\b(?:public|package|open)\b[^{;=\n]*?\b(func\s+([^\s(<]+)|init[?!]?|subscript)\s*(?:<[^>]*>)?\s*\("#)
        var parameters: [(String, [String], String)] = []
        let characters = Array(code.utf16)
        for match in declaration.matches(in: code, range: NSRange(location: 0, length: characters.count)) {
            let name = match.range(at: 2).location != NSNotFound ? (code as NSString).substring(with: match.range(at: 2)) : "init"
            var depth = 1, index = match.range.location + match.range.length
            let start = index
            while depth > 0 && index < characters.count {
                switch characters[index] {
                case 0x28, 0x5B: depth += 1  // ( [
                case 0x29, 0x5D: depth -= 1  // ) ]
                default: break
                }
                index += 1
            }
            let list = (code as NSString).substring(with: NSRange(location: start, length: max(0, index - 1 - start)))
            var parts: [String] = [], current = "", nesting = 0
            for character in list {
                if "([<".contains(character) { nesting += 1 }
                if ")]>".contains(character) { nesting -= 1 }
                if character == "," && nesting == 0 {
                    parts.append(current)
                    current = ""
                } else {
                    current.append(character)
                }
            }
            parts.append(current)
            for part in parts {
                guard let colon = part.firstIndex(of: ":") else { continue }
                let names = part[..<colon].split(whereSeparator: { $0.isWhitespace }).map(String.init).filter { !$0.hasPrefix("@") && $0 != "_" }
                let type = part[part.index(after: colon)...].split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
                if !names.isEmpty { parameters.append((name, names, type)) }
            }
        }
        return parameters
    }
}

/// Swift source with its comments and string literals removed (a literal becomes `""`), so that a rule
/// reads code, not prose about it.
enum SwiftText {
    static func code(of text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = [], index = 0
        output.reserveCapacity(bytes.count)
        scanCode(bytes, &index, &output, untilClosingParenthesis: false)
        return String(decoding: output, as: UTF8.self)
    }

    private static let quote = UInt8(ascii: "\""), slash = UInt8(ascii: "/"), star = UInt8(ascii: "*"), hash = UInt8(ascii: "#")
    private static let backslash = UInt8(ascii: "\\"), newline = UInt8(ascii: "\n")
    private static let open = UInt8(ascii: "("), close = UInt8(ascii: ")")

    private static func starts(_ bytes: [UInt8], _ index: Int, _ prefix: String) -> Bool {
        let prefix = Array(prefix.utf8)
        return index + prefix.count <= bytes.count && Array(bytes[index..<index + prefix.count]) == prefix
    }

    /// Copies code to `output`, dropping comments and literals; with `untilClosingParenthesis`, stops after
    /// the `)` that closes an interpolation.
    private static func scanCode(_ bytes: [UInt8], _ index: inout Int, _ output: inout [UInt8], untilClosingParenthesis: Bool) {
        var depth = 0
        while index < bytes.count {
            let byte = bytes[index]
            if starts(bytes, index, "//") {
                while index < bytes.count && bytes[index] != newline { index += 1 }
            } else if starts(bytes, index, "/*") {
                var nesting = 0
                repeat {
                    if starts(bytes, index, "/*") { nesting += 1; index += 2 }
                    else if starts(bytes, index, "*/") { nesting -= 1; index += 2 }
                    else { if bytes[index] == newline { output.append(newline) }; index += 1 }
                } while nesting > 0 && index < bytes.count
                output.append(UInt8(ascii: " "))
            } else if byte == quote || (byte == hash && (starts(bytes, index, "#\"") || starts(bytes, index, "##\""))) {
                skipString(bytes, &index, &output)
                output.append(contentsOf: [quote, quote])
            } else {
                if untilClosingParenthesis {
                    if byte == open { depth += 1 }
                    if byte == close {
                        if depth == 0 { index += 1; return }
                        depth -= 1
                    }
                }
                output.append(byte)
                index += 1
            }
        }
    }

    /// Skips a string literal (plain, multi-line or raw) with its interpolations; keeps its newlines so
    /// that line numbers hold.
    private static func skipString(_ bytes: [UInt8], _ index: inout Int, _ output: inout [UInt8]) {
        var hashes = 0
        while bytes[index] == hash { hashes += 1; index += 1 }
        let multiline = starts(bytes, index, "\"\"\"")
        index += multiline ? 3 : 1
        let terminator = (multiline ? "\"\"\"" : "\"") + String(repeating: "#", count: hashes)
        var discarded: [UInt8] = []
        while index < bytes.count {
            if starts(bytes, index, terminator) { index += terminator.utf8.count; return }
            if bytes[index] == backslash && starts(bytes, index + 1, String(repeating: "#", count: hashes)) {
                let after = index + 1 + hashes
                if after < bytes.count && bytes[after] == open {
                    index = after + 1
                    scanCode(bytes, &index, &discarded, untilClosingParenthesis: true)
                    continue
                }
                index = after + 1
                continue
            }
            if bytes[index] == newline {
                if !multiline { return }
                output.append(newline)
            }
            index += 1
        }
    }
}
