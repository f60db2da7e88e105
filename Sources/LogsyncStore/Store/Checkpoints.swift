import Foundation
import LogsyncSQLite

/// Copies a store's WAL into its database file after write transactions, outside the store's writer
/// lock, from a connection of its own.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the WAL past 1,000 pages, on the
/// committing connection, so the store's writer lock stays held while it runs: during a large import
/// that is 10–30 ms after every batch, as long again as the batch itself, and every local writer waits
/// through it. SQLite's advice for applications that cannot afford that is to turn the automatic
/// checkpoint off and checkpoint elsewhere. Here the writer connection only reports the WAL's size
/// (`Connection.trackWALFrames`), and passive checkpoints, which neither wait for nor block writers, run
/// once the writer lock is released:
///
/// - on the thread that committed (``claim(walFrames:)``, then ``run(walFrames:restart:)``). Whose turn
///   it is is settled before the writer lock is released, so another writer that commits meanwhile finds
///   it taken and goes on: a local writer does not pay for an import's pages;
/// - or on a thread of its own (``checkpointInBackground(walFrames:)``): after an import batch that no
///   local writer competes with, so that the import goes on with its next batch while the pages of the
///   last one are copied, and after a sync transaction that found the turn taken. Not while writers are
///   busy: on two cores a checkpoint running alongside a batch makes the batch, and their wait, longer.
///
/// A passive checkpoint cannot copy what writers append while it runs, and the WAL only starts over once
/// everything in it has been copied: under steady writes it keeps growing. Once it is past
/// ``Store/restartFrames``, a sync transaction's checkpoint ends with a second pass under the writer
/// lock, which copies what was appended meanwhile, so that the next transaction starts the WAL over. Not
/// after every transaction: that pass syncs the WAL and the database file, which takes 5–15 ms even for a
/// few pages, and writers wait for it.
///
/// The thread starts with the first checkpoint handed to it and ends in ``stop()``, which the store
/// calls when it goes away: no connection of the store's outlives it.
///
/// `@unchecked`: the turn is taken in ``claim(walFrames:)`` and given back in ``run(walFrames:restart:)``,
/// a hand-over across calls that a scoped `Mutex` cannot express; the thread's state waits on a condition.
final class Checkpoints: @unchecked Sendable {
    /// Held by whoever is checkpointing; guards `connection`.
    private let turn = NSLock()
    private var connection: Connection?
    private let open: @Sendable () throws -> Connection
    /// Runs its argument holding the store's writer lock.
    private let holdingWriterLock: @Sendable (() throws -> Void) throws -> Void

    /// Guards the thread's state below.
    private let condition = NSCondition()
    /// The largest WAL size handed to the thread and not yet checkpointed; nil when there is nothing to do.
    private var requestedFrames: Int?
    /// Checkpoints handed to the thread so far, and how many of them it has done.
    private var requests: UInt64 = 0
    private var served: UInt64 = 0
    private var started = false
    private var stopping = false
    private var finished = false

    init(
        open: @escaping @Sendable () throws -> Connection,
        holdingWriterLock: @escaping @Sendable (() throws -> Void) throws -> Void
    ) {
        self.open = open
        self.holdingWriterLock = holdingWriterLock
    }

    // MARK: - On the committing thread

    /// Inside a write transaction's lock, after its commit: whether a checkpoint of a WAL of `walFrames`
    /// frames is due and the turn was free; it is then this thread's, and ``run(walFrames:restart:)`` must
    /// follow once the writer lock is released. Not due while the checkpoint thread has work waiting: it
    /// will copy these pages too.
    func claim(walFrames: Int) -> Bool {
        guard walFrames >= Store.checkpointFrames, !hasBackgroundWork else { return false }
        return turn.try()
    }

    private var hasBackgroundWork: Bool {
        condition.lock()
        defer { condition.unlock() }
        return requestedFrames != nil
    }

    /// Checkpoints and gives the turn back. `restart`: after a sync transaction, also make sure the WAL
    /// starts over once it is large.
    func run(walFrames: Int, restart: Bool) {
        defer { turn.unlock() }
        checkpoint(walFrames: walFrames, restart: restart)
    }

    /// Holding the turn: a passive checkpoint, and when `restart` and the WAL is large, a second pass
    /// under the writer lock.
    private func checkpoint(walFrames: Int, restart: Bool) {
        do {
            let connection = try self.connection ?? open()
            self.connection = connection
            try connection.checkpointPassively()
            if restart, walFrames >= Store.restartFrames {
                try holdingWriterLock { try connection.checkpointPassively() }
            }
        } catch {
            // Not fatal, as for SQLite's automatic checkpoint: the next transaction tries again (with a new
            // connection), and a writer whose WAL grows far past the threshold checkpoints by itself.
            connection = nil
        }
    }

    // MARK: - In the background

    /// After a sync transaction, once the writer lock is released: hands the checkpoint of a WAL of
    /// `walFrames` frames, when one is due, to the checkpoint thread, and returns at once.
    func checkpointInBackground(walFrames: Int) {
        guard walFrames >= Store.checkpointFrames else { return }
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return }
        requestedFrames = max(requestedFrames ?? 0, walFrames)
        requests += 1
        if !started {
            started = true
            let thread = Thread { [self] in runThread() }
            thread.name = "logsync checkpoints"
            thread.start()
        }
        condition.signal()
    }

    /// Waits until the checkpoint thread has done what was handed to it so far.
    func waitForBackground() {
        condition.lock()
        defer { condition.unlock() }
        let target = requests
        while served < target && !finished { condition.wait() }
    }

    /// Ends the checkpoint thread after the checkpoint it is running, if any, and closes the checkpoint
    /// connection: when this returns, the store's writer and reader are its only connections left.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while started && !finished { condition.wait() }
        condition.unlock()
        turn.lock()
        connection = nil
        turn.unlock()
    }

    private func runThread() {
        var covered: UInt64 = 0
        while let (walFrames, requests) = nextRequest(covered: covered) {
            covered = requests
            turn.lock()
            checkpoint(walFrames: walFrames, restart: true)
            turn.unlock()
        }
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// Reports that the requests up to `covered` are done, and waits for the next: the largest WAL size
    /// handed over, and the number of requests so far. Nil once the store is going away.
    private func nextRequest(covered: UInt64) -> (walFrames: Int, requests: UInt64)? {
        condition.lock()
        defer { condition.unlock() }
        served = covered
        condition.broadcast()
        while requestedFrames == nil && !stopping { condition.wait() }
        guard !stopping, let frames = requestedFrames else { return nil }
        requestedFrames = nil
        return (frames, requests)
    }
}
