import Foundation
import LogsyncPlatform

/// Where a node keeps a store per account, its local store, and the persisted state of an account
/// switch (`docs/accounts.md`).
///
/// Next to the configured store path `P` (syncd's `[store] path`) is the folder `P.accounts/`:
///
/// - `state.json` — which store is active, the switch in progress with its step, the stores retired
///   with unshipped changes; replaced atomically (``DurableFiles/replace(_:with:)``);
/// - `a-<account>.<n>.sqlite` — the store of an account, `local.<n>.sqlite` — the local store (no
///   account); `n` is a generation number never used twice, so a path, once retired, never names
///   another store: a process that still holds an old file can never meet a new store's `-wal` by name;
/// - `….sqlite.building` — a store being built, swapped in by renaming it when it is complete.
///
/// Until the first switch there is no state file, and `P` itself is the store of `[sync] account`.
public struct AccountStores: Sendable {
    /// The configured store path.
    public let storePath: String
    /// The account `[sync] account` names, whose store `P` is until the first switch.
    public let configuredAccount: String

    public init(storePath: String, configuredAccount: String) {
        self.storePath = storePath
        self.configuredAccount = configuredAccount
    }

    public var folder: String { storePath + ".accounts" }
    public var stateFile: String { folder + "/state.json" }
    /// The schema of the stores, kept when a switch starts: after a crash, neither the old store (maybe
    /// deleted) nor the new one (maybe not created yet) may be there to tell it.
    public var schemaFile: String { folder + "/schema.json" }

    /// The path of a new store for `account` (nil: the local store) with generation `generation`.
    public func storePath(for account: String?, generation: Int) -> String {
        folder + "/" + (account.map { "a-\($0)" } ?? "local") + ".\(generation).sqlite"
    }

    /// The persisted state, or the state before any switch when there is no state file.
    public func load() throws(StoreError) -> AccountState {
        guard DurableFiles.exists(stateFile) else {
            return AccountState(active: AccountState.Store(account: configuredAccount, path: storePath))
        }
        let bytes: [UInt8]
        switch try? Directory.readFile(atPath: stateFile, maximumBytes: 1 << 20) {
        case .bytes(let read)?: bytes = read
        default: throw StoreError(.system, "cannot read the account state \(stateFile) (missing, not a regular file, or over 1 MiB)", path: stateFile)
        }
        do {
            return try JSONDecoder().decode(AccountState.self, from: Data(bytes))
        } catch {
            throw StoreError(
                .incompatibleFormat,
                "the account state \(stateFile) is not valid JSON of this logsync version: \(error); restore it, or remove it to return to the configured store",
                path: stateFile)
        }
    }

    /// The active store once no switch is in progress, waiting up to `timeout` for one that is: while a
    /// switch runs, the old store is being closed to writes (or is gone) and the new one is not there
    /// yet, so an app that wrote now would meet a refusal. Fails with ``StoreError/Code/busy`` when the
    /// switch goes on past `timeout`.
    public func activeStore(waitingUpTo timeout: Duration) throws(StoreError) -> AccountState.Store {
        let deadline = ContinuousClock.now + timeout
        while true {
            let state = try load()
            guard let pending = state.pending else { return state.active }
            guard ContinuousClock.now < deadline else {
                throw StoreError(
                    .busy,
                    "syncd is switching from \(pending.from.account.map { "account \($0)" } ?? "the local store") to \(pending.to.account.map { "account \($0)" } ?? "the local store") "
                        + "(step \(pending.step.rawValue)) and did not finish within \(timeout); try again when 'syncctl account status' shows it done",
                    path: stateFile)
            }
            Pause.microseconds(20_000)
        }
    }

    /// Writes the state durably (the folder is created if needed).
    public func save(_ state: AccountState) throws(StoreError) {
        do {
            try DurableFiles.makeDirectories(folder)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            let data = (try? encoder.encode(state)) ?? Data()
            try DurableFiles.replace(stateFile, with: Array(data))
        } catch {
            throw StoreError(.system, "cannot write the account state \(stateFile)", path: stateFile, cause: error)
        }
    }

    /// The files of a store: the database and SQLite's and logsync's companions.
    public static func files(of path: String) -> [String] {
        ["", "-wal", "-shm", "-journal", "-writers"].map { path + $0 }
    }

    /// Whether `path` holds a store: a file that is not empty. Another program that opens a missing path
    /// with SQLite (a script still using a retired store's path) leaves an empty file there, which holds
    /// nothing of any account and is no store (`Store` treats it the same way).
    public static func holdsStore(_ path: String) -> Bool {
        (DurableFiles.size(of: path) ?? 0) > 0
    }
}

/// Which store is active, the switch in progress and the stores kept after a switch.
public struct AccountState: Codable, Sendable, Equatable {
    public struct Store: Codable, Sendable, Equatable {
        /// nil: the local store (logged out).
        public var account: String?
        public var path: String

        public init(account: String?, path: String) {
            self.account = account
            self.path = path
        }
    }

    /// The steps of a switch, in order; each is persisted before it starts and redone in full after a
    /// crash (every step is idempotent).
    public enum Step: String, Codable, Sendable, CaseIterable {
        /// Tell apps the stores will change; wait for them (and the daemon) to let go of the old store.
        case willChange = "will_change"
        /// Export and publish every pending local transaction of the old account.
        case exporting
        /// Delete the old account's store if everything was shipped and nobody holds it; else keep it.
        case retiring
        /// Build the new store from the new account's logs under its `.building` path.
        case building
        /// Rename the built store to its final path and make it the active store.
        case swapping
        /// Tell apps the stores did change; then syncing resumes on the new store.
        case didChange = "did_change"
    }

    /// What to do with the data on logout.
    public enum LogoutData: String, Codable, Sendable, CaseIterable {
        /// The local store becomes a copy of the account's store.
        case keep
        /// The local store starts empty.
        case remove
    }

    public struct Switch: Codable, Sendable, Equatable {
        public var from: Store
        /// The store being made active: its final path (built under `path + ".building"`).
        public var to: Store
        public var step: Step
        /// For a switch to the local store: keep the account's data or start empty.
        public var logout: LogoutData?
        public var startedAt: Int64

        public init(from: Store, to: Store, step: Step, logout: LogoutData?, startedAt: Int64) {
            self.from = from
            self.to = to
            self.step = step
            self.logout = logout
            self.startedAt = startedAt
        }

        public var buildPath: String { to.path + ".building" }

        enum CodingKeys: String, CodingKey { case from, to, step, logout, startedAt = "started_at" }
    }

    /// A store retired with local changes not yet shipped, or held open by another process: kept, and
    /// shipped (then deleted) as soon as that is possible. A store found damaged before the switch is
    /// kept and never shipped nor deleted: nothing read from it may reach other nodes (`docs/accounts.md`).
    public struct Retained: Codable, Sendable, Equatable {
        public var account: String?
        public var path: String
        public var reason: String
        /// Why the store is damaged; set when syncing had stopped on it (absent from older state files).
        public var damaged: String?

        public init(account: String?, path: String, reason: String, damaged: String? = nil) {
            self.account = account
            self.path = path
            self.reason = reason
            self.damaged = damaged
        }
    }

    public var active: Store
    /// The local store, once there is one (kept while an account is active).
    public var local: Store?
    public var pending: Switch?
    public var retained: [Retained] = []
    /// The next generation number for a store path.
    public var generation = 1

    public init(active: Store) {
        self.active = active
    }
}


extension StoreOptions {
    /// How syncd opens the stores it syncs: without a memory map. An import or a baseline load reads the
    /// pages it changes; through a map they stay resident and count in the daemon's memory, up to the whole
    /// map (256 MiB by default): a new node loading a 1M-row baseline peaked at 472 MB with the map and
    /// 105 MB without, in the same time (`docs/BENCHMARKS-history.md`, bootstrap). The page cache stays bounded
    /// by ``cacheKibibytes``. Apps keep the map (the default options): it speeds their reads.
    /// syncd creates the active store when it is missing (the first start, or a store moved aside to be
    /// rebuilt from the logs): the one place besides a build where a store is made on a path an account
    /// state manages.
    public static let syncing = StoreOptions(mmapBytes: 0, creation: .always)

    /// How syncd opens a store it retires or keeps after a switch: only if it is there, never creating one
    /// on a retired path.
    public static let retiring = StoreOptions(mmapBytes: 0, creation: .never)

    /// How a store being built from its account's logs is opened (an account switch, `docs/accounts.md`):
    /// without a memory map, as syncd opens every store (``syncing``), and with a rollback journal
    /// (``Journal/rollback``): no one else opens it until it is swapped in, so nothing needs a WAL's
    /// concurrent readers, and each page is written once instead of twice. A 1M-change rebuild used
    /// about a tenth less CPU (`docs/BENCHMARKS-history.md`, rebuild). ``Store/finishBuilding()`` switches it to
    /// WAL at the end.
    ///
    /// Its page cache is 64 MiB instead of 32: a build inserts rows with random keys, and the key index
    /// of 1M rows (48 MiB) then fits. With 32 MiB, a 1M-change rebuild wrote 311,700 pages and read
    /// 138,800 back (pages evicted, then changed again); with 64 MiB, 157,700 and 13,300, half the
    /// system CPU, and the peak memory 115 MB instead of 77. The store is closed once built, and its
    /// cache with it.
    public static let rebuilding = StoreOptions(journal: .rollback, cacheKibibytes: 65_536, mmapBytes: 0, creation: .always)
}
