import Foundation
import Logging
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncSystemd
import Synchronization

/// The account switch: a persisted state machine (``AccountState/Step``) run on a thread of its own,
/// resumed at start-up after a crash at any step; and the shipping of retained stores on another
/// (`docs/accounts.md`). Its state — the account state as persisted and what a running switch has done —
/// is behind one lock, under which the state file is also written, so the file and memory never disagree.
final class AccountSwitcher: Sendable {
    /// What a running switch has done so far (not persisted: a restart rebuilds from the store's cursors).
    struct Run: Sendable {
        var running = false
        var appliedTransactions = 0
        var appliedSegments = 0
        /// While building: how many transactions the new account's folder holds.
        var availableTransactions: Int?
        /// Why the switch waits or retries.
        var waiting: String?
        /// Failures of the step at hand in a row: the retry backs off.
        var failures = 0
    }

    private struct State {
        var accounts: AccountState
        var run = Run()
    }

    /// How long a switch waits for apps to let go of the old store before it goes on without them (the
    /// old store is then kept, not deleted, until they do).
    static let releaseDeadline = Duration.seconds(5)
    /// How long this process's own connections to a store may take to close.
    static let ownCloseDeadline = Duration.seconds(10)

    let accounts: AccountStores
    let schema: Schema
    private let state: Mutex<State>
    let settings: SettingsInForce
    let mount: StoreMount
    let loop: SyncLoop
    let board: StatusBoard
    let events: EventHub
    let carriers: Carriers
    let notifier: SystemdNotifier
    let logger: Logger
    /// Stops a switch or a rebuild at its next safe point when the daemon stops.
    let cancellation = Cancellation()
    /// Wakes the thread that ships and deletes retained stores, and a step's retry waiting out its backoff.
    let retainedWakeup = Wakeup()
    let retryWakeup = Wakeup()
    /// Signalled whenever the persisted state changes: a request waits on it for its switch to end.
    private let changed = Wakeup()

    init(
        accounts: AccountStores, state: AccountState, schema: Schema, settings: SettingsInForce, mount: StoreMount, loop: SyncLoop,
        board: StatusBoard, events: EventHub, carriers: Carriers, notifier: SystemdNotifier, logger: Logger
    ) {
        self.accounts = accounts
        self.state = Mutex(State(accounts: state))
        self.schema = schema
        self.settings = settings
        self.mount = mount
        self.loop = loop
        self.board = board
        self.events = events
        self.carriers = carriers
        self.notifier = notifier
        self.logger = logger
    }

    /// The account state as last persisted.
    var accountState: AccountState { state.withLock { $0.accounts } }

    /// What the running switch has done so far.
    var run: Run { state.withLock { $0.run } }

    func updateRun(_ update: (inout Run) -> Void) { state.withLock { update(&$0.run) } }

    static func name(_ account: String?) -> String { account.map { "account \($0)" } ?? "the local store" }

    /// Why a round cannot run now, if it cannot.
    func notSyncing() -> String? {
        if let pending = accountState.pending {
            return "syncd is switching accounts (\(Self.name(pending.from.account)) to \(Self.name(pending.to.account)), step \(pending.step.rawValue)); "
                + "syncing resumes when the switch is done (syncctl account status)"
        }
        if mount.engine == nil {
            return "no account is active (logged out: the local store does not sync); log in with 'syncctl account switch ID'"
        }
        return nil
    }

    /// The mounted store, or an error saying why there is none.
    func mountedStore() throws -> Store { try mount.store(orExplain: notSyncing) }

    func report() -> AccountReport {
        let (accountState, run) = state.withLock { ($0.accounts, $0.run) }
        var stores = [AccountStore(account: accountState.active.account, path: accountState.active.path, role: "active")]
        if let local = accountState.local, local.path != accountState.active.path {
            stores.append(AccountStore(account: nil, path: local.path, role: "local"))
        }
        let retained = accountState.retained.map { AccountStore(account: $0.account, path: $0.path, role: "retained", reason: $0.reason) }
        return AccountReport(
            active: accountState.active.account, store: accountState.active.path,
            switching: accountState.pending.map {
                SwitchProgress(
                    from: $0.from.account, to: $0.to.account, step: $0.step.rawValue, startedAt: $0.startedAt,
                    appliedTransactions: run.appliedTransactions, appliedSegments: run.appliedSegments,
                    availableTransactions: run.availableTransactions, waiting: run.waiting)
            },
            retained: retained, stores: stores + retained)
    }

    /// Starts (or joins) the switch a request asks for and waits up to its `timeout_ms` for it to end;
    /// nil when it ended, else the failure to answer with.
    func request(_ request: ControlRequest) -> (ControlFailure.Code, String)? {
        let target: String?
        var logout: AccountState.LogoutData?
        if request.command == .accountSwitch {
            guard let account = request.account else { return (.badRequest, "account_switch needs 'account': the account to switch to") }
            if let problem = AccountName.problem(account) { return (.badRequest, "the account name \(problem): \"\(account.prefix(64))\"") }
            target = account
        } else {
            guard let choice = AccountState.LogoutData(rawValue: request.logout ?? "keep") else {
                return (.badRequest, "'logout' is 'keep' or 'remove', not '\((request.logout ?? "").prefix(32))'")
            }
            target = nil
            logout = choice
        }
        let refused: (ControlFailure.Code, String)? = state.withLock { state in
            if let pending = state.accounts.pending {
                guard pending.to.account == target else {
                    return (.badRequest, "a switch from \(Self.name(pending.from.account)) to \(Self.name(pending.to.account)) is in progress (step \(pending.step.rawValue)); wait for it to end (syncctl account status), then ask again")
                }
                return nil
            }
            if state.accounts.active.account == target { return nil }
            var next = state.accounts
            next.pending = AccountState.Switch(
                from: next.active, to: AccountState.Store(account: target, path: accounts.storePath(for: target, generation: next.generation)),
                step: .willChange, logout: logout, startedAt: Int64(WallClock.milliseconds()))
            next.generation += 1
            do {
                try DurableFiles.makeDirectories(accounts.folder)
                try DurableFiles.replace(accounts.schemaFile, with: Array(schema.json.utf8))
                try save(next, into: &state)
            } catch {
                return (.internalError, "cannot start the switch: \(error)")
            }
            logger.notice(
                "account switch from \(Self.name(next.active.account)) to \(Self.name(target)) requested",
                metadata: ["message_id": "\(MessageID.accountSwitch)"])
            return nil
        }
        if let refused { return refused }
        runIfPending()
        let timeout = Duration.milliseconds(min(max(request.timeoutMilliseconds ?? 600_000, 0), 3_600_000))
        let ended = changed.wait(timeout: timeout) {
            guard let pending = accountState.pending else { return true }
            return pending.to.account != target
        }
        if !ended, let pending = accountState.pending {
            return (.timeout, "the switch to \(Self.name(target)) goes on (step \(pending.step.rawValue)); follow it with 'syncctl account status'")
        }
        let active = accountState.active.account
        return active == target ? nil : (.internalError, "the switch ended on \(Self.name(active)), not \(Self.name(target))")
    }

    /// Changes the account state with `change` if it still has the switch `pending` (nothing otherwise),
    /// persisting it before it counts.
    func update(ifStill pending: AccountState.Switch?, _ change: (inout AccountState) -> Void) throws {
        try state.withLock { state in
            guard state.accounts.pending == pending else { return }
            try update(&state, change)
        }
    }

    /// Changes the account state with `change`, whatever switch runs, persisting it before it counts.
    func update(_ change: (inout AccountState) -> Void) throws {
        try state.withLock { state in try update(&state, change) }
    }

    private func update(_ state: inout State, _ change: (inout AccountState) -> Void) throws {
        var next = state.accounts
        change(&next)
        if next != state.accounts { try save(next, into: &state) }
    }

    /// Persists `next`, then makes it the state in memory, and wakes whoever waits for a change.
    private func save(_ next: AccountState, into state: inout State) throws {
        try accounts.save(next)
        state.accounts = next
        changed.signal()
    }

    /// At start: resumes a switch a crash interrupted, and starts shipping retained stores.
    func start() {
        runIfPending()
        let thread = Thread { [self] in shipRetainedStores() }
        thread.name = "syncd.retained"
        thread.start()
    }

    /// Ends the switch at its next safe point, and the shipping of retained stores.
    func stop() {
        cancellation.cancel()
        retainedWakeup.signal()
        retryWakeup.signal()
    }

    /// Starts the switch thread unless it runs already.
    func runIfPending() {
        let start = state.withLock { state in
            guard !state.run.running else { return false }
            state.run = Run(running: true)
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            while true {
                let pending: AccountState.Switch? = state.withLock { state in
                    if state.accounts.pending == nil || cancellation.isCancelled { state.run.running = false }
                    return state.accounts.pending
                }
                guard let pending, !cancellation.isCancelled else { return }
                perform(pending)
            }
        }
        thread.name = "syncd.account-switch"
        thread.start()
    }

    /// Runs one step of the switch; on failure says why in status and the journal and retries after a
    /// pause (the step is redone in full: every step is idempotent).
    private func perform(_ pending: AccountState.Switch) {
        logger.info(
            "account switch \(Self.name(pending.from.account)) → \(Self.name(pending.to.account)): \(pending.step.rawValue)",
            metadata: ["message_id": "\(MessageID.accountSwitch)"])
        notifier.status("switching accounts: \(Self.name(pending.from.account)) → \(Self.name(pending.to.account)), \(pending.step.rawValue)")
        do {
            switch pending.step {
            case .willChange: try letGo(pending)
            case .exporting: try exportOld(pending)
            case .retiring: try retireOld(pending)
            case .building: try build(pending)
            case .swapping: try swap(pending)
            case .didChange: try announce(pending)
            }
            updateRun { run in
                run.waiting = nil
                run.failures = 0
            }
        } catch {
            // Backs off like the sync loop: 0.5 s, doubling, at most [sync] max_backoff_ms.
            var failures = 0
            updateRun { run in
                run.failures += 1
                failures = run.failures
            }
            board.count { $0.errors[.switchStepFailed, default: 0] += 1 }
            let delay = min(Duration.milliseconds(settings.current.maximumBackoffMilliseconds), .milliseconds(500) * (1 << min(failures - 1, 16)))
            let reason = "step \(pending.step.rawValue) failed: \(error); retrying in \(delay)"
            updateRun { $0.waiting = reason }
            logger.error("account switch: \(reason)", metadata: ["message_id": "\(MessageID.accountSwitch)"])
            retryWakeup.wait(timeout: delay)  // Woken early by a stop.
        }
    }

    func event(_ kind: DaemonEvent.Kind, _ message: String) { events.publish(kind, message) }
}
