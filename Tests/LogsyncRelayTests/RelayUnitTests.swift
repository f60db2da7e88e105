import Foundation
import LogsyncCore
@testable import LogsyncRelay
import LogsyncTestKit
import Testing

/// The relay's parts without a process: ids, tokens, the long-poll board, the storage.
@Suite struct RelayUnitTests {
    @Test func rangesAreStrictDecimal() {
        #expect(RelayNames.parseRange("1-1")! == (1, 1))
        #expect(RelayNames.parseRange("7-18446744073709551615")! == (7, UInt64.max))
        for bad in ["", "-", "1-", "-1", "0-1", "2-1", "01-2", "1-02", "+1-2", "1-2-3", "1 -2", "a-b", "18446744073709551616-18446744073709551616", "1-2\u{0}"] {
            #expect(RelayNames.parseRange(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func pushPathsAreMatchedOnlyInTheirPlainForm() throws {
        let node = "0b3a6f0e-8a5e-4a4c-9d7b-1d2e3f4a5b6c"
        let path = try #require(PushRoute.path("/v1/accounts/acct/nodes/\(node)/segments/3-7"))
        #expect(path.account == "acct" && path.node == node && path.range == "3-7")
        #expect(PushRoute.path("/v1/accounts/a/nodes/b/segments/c").map { [$0.account, $0.node, $0.range] } == ["a", "b", "c"])
        // Left to the router, which answers these as it always did.
        for path in [
            "/v1/accounts/acct/nodes/\(node)/segments/3-7/", "/v1/accounts//acct/nodes/\(node)/segments/3-7", "/v1/accounts/acct/nodes/\(node)/segments/",
            "/v1/accounts/acct/nodes/\(node)/segments/3-7/x", "/v1/accounts/acct/nodes/\(node)/baselines/3-7", "/v1/accounts/acct/segments",
            "/V1/accounts/acct/nodes/\(node)/segments/3-7", "/v1/accounts/acct/nodes//segments/3-7", "/v1/accounts/", "/v1/accounts",
            "/v1/accounts/acct/nodex/\(node)/segments/3-7", "/v1/accounts/acct/nodes/\(node)/segment/3-7",
        ] {
            #expect(PushRoute.path(path) == nil, "\(path)")
        }
    }

    @Test func idsAreChecked() {
        #expect(RelayNames.accountProblem("alice-1.work_2") == nil)
        for bad in ["", ".", "..", ".hidden", "a/b", "a%2Fb", "a\u{0}b", "é", String(repeating: "a", count: 129)] {
            #expect(RelayNames.accountProblem(bad) != nil, "\(bad.debugDescription)")
        }
        #expect(RelayNames.nodeProblem(UUID().uuidString.lowercased()) == nil)
        #expect(RelayNames.nodeProblem(UUID().uuidString) != nil, "upper case is not a node id")
        #expect(RelayNames.quoted("a\u{0}b\n") == "\"a\\u{0}b\\u{a}\"", "control characters never reach a log line raw")
    }

    @Test func tokensRoundTripAndAreUnique() {
        let (id, token, digest) = Tokens.generate()
        let parsed = try! #require(Tokens.parse(token))
        #expect(parsed.id == id)
        #expect(Tokens.digest(parsed.secret) == digest)
        #expect(token.hasPrefix("lsr1_") && token.utf8.count == 5 + 12 + 1 + 43)
        #expect(Tokens.parse(token + "x") == nil && Tokens.parse("lsr1_" + id) == nil && Tokens.parse("Bearer " + token) == nil)
        #expect(Set((0..<200).map { _ in Tokens.generate().token }).count == 200)
        #expect(Tokens.constantTimeEqual([1, 2, 3], [1, 2, 3]) && !Tokens.constantTimeEqual([1, 2, 3], [1, 2, 4]) && !Tokens.constantTimeEqual([1], [1, 2]))
    }

    @Test func boardWakesTimesOutAndIsBounded() async throws {
        let board = ArrivalBoard(maximumWaiters: 2)
        // Already announced past the cursor: no wait at all.
        board.announce(account: "a", arrival: 5)
        #expect(try await board.wait(account: "a", after: 4, timeout: .seconds(30)))
        // Woken by a later announcement.
        let waiting = Task { try await board.wait(account: "a", after: 5, timeout: .seconds(30)) }
        try await eventually(within: .seconds(30), "the waiter registers") { board.waiting == 1 }
        board.announce(account: "b", arrival: 9)
        #expect(board.waiting == 1, "another account's arrival wakes nobody here")
        board.announce(account: "a", arrival: 6)
        #expect(try await waiting.value)
        #expect(board.waiting == 0)
        // Times out with false: well before anything else here would end it (a saturated machine took 6 s
        // to run a 50 ms wait to its end; how fast belongs in the relay benchmark).
        let started = ContinuousClock.now
        #expect(try await !board.wait(account: "a", after: 6, timeout: .milliseconds(50)))
        #expect(ContinuousClock.now - started < .seconds(25))
        // Bounded: a third waiter is refused with busy.
        let first = Task { try await board.wait(account: "c", after: 0, timeout: .seconds(30)) }
        let second = Task { try await board.wait(account: "c", after: 0, timeout: .seconds(30)) }
        try await eventually(within: .seconds(30), "two waiters register") { board.waiting == 2 }
        await #expect(throws: RelayError.self) { try await board.wait(account: "c", after: 0, timeout: .seconds(1)) }
        // Cancelled waiters leave.
        first.cancel()
        second.cancel()
        #expect(try await !first.value)
        #expect(try await !second.value)
        #expect(board.waiting == 0)
        // Timeouts are kept by one sweeping task while anyone waits: it stops, and starts again for the next.
        try await eventually(within: .seconds(30), "the sweeping task stops once nobody waits") { !board.isSweeping }
        #expect(try await !board.wait(account: "d", after: 0, timeout: .milliseconds(50)))
        try await eventually(within: .seconds(30), "and stops again") { !board.isSweeping }
    }

    /// The epoch changes when the database may hold less than its relays acknowledged (a restored backup,
    /// a database without the note of what was served), and only then; a new database has a new id.
    @Test func epochChangesWhenTheDatabaseWentBack() async throws {
        let directory = try TemporaryDirectory("relayepoch")
        let path = directory.file("relay.sqlite")
        let backup = directory.file("backup.sqlite")
        let node = SegmentFixtures.nodeID()
        func push(_ storage: SQLiteRelayStorage, _ sequence: UInt64) async throws {
            let bytes = try SegmentFixtures.segment(account: "acct", node: node, first: sequence, last: sequence)
            _ = try await storage.push(
                SegmentPush(account: "acct", node: .init(node), firstSequence: sequence, lastSequence: sequence, bytes: bytes, defaultQuotaBytes: 1 << 30))
        }
        func restore() throws {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try FileManager.default.copyItem(atPath: backup, toPath: path)
        }
        func reopen(_ storage: SQLiteRelayStorage, _ change: () throws -> Void = {}) throws -> SQLiteRelayStorage {
            storage.close()
            try change()
            return try SQLiteRelayStorage(path: path)
        }

        var storage = try SQLiteRelayStorage(path: path)
        let created = storage.identity
        #expect(created.epoch == 1 && storage.epochChange == nil && created.id.count == 32, "\(created)")
        try storage.createAccount("acct", quotaBytes: nil)
        try await push(storage, 1)
        storage = try reopen(storage)
        #expect(storage.identity == created && storage.epochChange == nil, "a restart keeps the epoch")

        let copied = try await runSQLiteShell(on: path, ".backup '\(backup)'")
        #expect(copied.status == 0, "\(copied.stderr)")
        try await push(storage, 2)
        storage = try reopen(storage, restore)
        let restored = storage.identity
        #expect(restored.id == created.id && restored.epoch > created.epoch, "a restored backup: a new epoch (\(restored))")
        #expect(storage.epochChange?.contains("committed") == true, "\(storage.epochChange ?? "no change")")
        storage = try reopen(storage)
        #expect(storage.identity == restored && storage.epochChange == nil, "once changed, the epoch stays")

        // The same backup restored again: it holds every commit the note counts since, but an older epoch.
        storage = try reopen(storage, restore)
        #expect(storage.identity.id == created.id && storage.identity.epoch > restored.epoch, "restored again: yet another epoch")
        let again = storage.identity

        // The database alone, without the note (moved to another machine): nothing vouches for it.
        storage = try reopen(storage) { try FileManager.default.removeItem(atPath: path + "-served") }
        #expect(storage.identity.id == created.id && storage.identity.epoch > again.epoch)
        #expect(storage.epochChange?.contains("relay.sqlite-served beside it") == true, "\(storage.epochChange ?? "no change")")

        // A new database: a new id at epoch 1; it holds nothing anyone could have a cursor into.
        storage = try reopen(storage) {
            for suffix in ["", "-wal", "-shm"] { try FileManager.default.removeItem(atPath: path + suffix) }
        }
        #expect(storage.identity.id != created.id && storage.identity.epoch == 1 && storage.epochChange == nil, "\(storage.identity)")
        // The administration commands never change the epoch.
        let administration = try SQLiteRelayStorage(path: path, serving: false)
        #expect(administration.identity == storage.identity && administration.epochChange == nil)
        storage.close()
    }

    @Test func storageGroupsCommitsAndRefusesConflicts() async throws {
        let directory = try TemporaryDirectory("relaystore")
        let storage = try SQLiteRelayStorage(path: directory.file("relay.sqlite"))
        defer { storage.close() }
        try storage.createAccount("acct", quotaBytes: nil)
        #expect(throws: RelayError.self) { try storage.createAccount("acct", quotaBytes: nil) }
        let node = SegmentFixtures.nodeID()
        // 200 concurrent pushes of distinct segments: all stored, in fewer commits than pushes.
        try await withThrowingTaskGroup(of: PushOutcome.self) { group in
            for sequence in UInt64(1)...200 {
                let bytes = try SegmentFixtures.segment(account: "acct", node: node, first: sequence, last: sequence)
                group.addTask {
                    try await storage.push(
                        SegmentPush(account: "acct", node: .init(node), firstSequence: sequence, lastSequence: sequence, bytes: bytes, defaultQuotaBytes: 1 << 30))
                }
            }
            var stored = 0
            for try await outcome in group { if case .stored = outcome { stored += 1 } }
            #expect(stored == 200)
        }
        let statistics = try #require(storage.writerStatistics)
        print("200 concurrent pushes in \(statistics.commits) commits")
        #expect(statistics.pushes == 200 && statistics.commits < 200, "pushes share commits")
        #expect(try storage.latestArrival(account: "acct") == 200)
        let page = try storage.pull(account: "acct", after: 0, limit: 1_000, maximumBytes: 1 << 30)
        #expect(page.segments.count == 200 && page.cursor == 200 && !page.more)
        #expect(Set(page.segments.map(\.arrival)) == Set(1...200), "arrivals are dense and unique")
        // Same bytes: duplicate; other bytes: conflict.
        let again = page.segments.first { $0.firstSequence == 7 }!
        #expect(try await storage.push(SegmentPush(account: "acct", node: .init(node), firstSequence: 7, lastSequence: 7, bytes: again.bytes, defaultQuotaBytes: 1 << 30)) == .duplicate(arrival: again.arrival))
        await #expect(throws: RelayError.self) {
            try await storage.push(SegmentPush(account: "acct", node: .init(node), firstSequence: 7, lastSequence: 7, bytes: again.bytes + [0], defaultQuotaBytes: 1 << 30))
        }
        // Deleted and created again: the arrivals go on from where they were, so a node holding a cursor of
        // the old account still sees the new account's first segment.
        try storage.deleteAccount("acct")
        try storage.createAccount("acct", quotaBytes: nil)
        let fresh = try SegmentFixtures.segment(account: "acct", node: node, first: 1, last: 1)
        #expect(try await storage.push(SegmentPush(account: "acct", node: .init(node), firstSequence: 1, lastSequence: 1, bytes: fresh, defaultQuotaBytes: 1 << 30)) == .stored(arrival: 201))
        #expect(try storage.pull(account: "acct", after: 200, limit: 10, maximumBytes: 1 << 20).segments.count == 1)
        // Tokens: issued, authenticated, revoked.
        let (info, token) = try storage.issueToken(account: "acct", node: nil)
        #expect(try storage.authenticate(token)?.account == "acct")
        #expect(try storage.authenticate(token)?.account == "acct", "found again (in memory)")
        try storage.revokeToken(id: info.id)
        #expect(try storage.authenticate(token) == nil)
        // Changed by another storage on the same file (as `sync-relay token|account` do from another
        // process): the serving storage's next lookup already sees it.
        let administration = try SQLiteRelayStorage(path: directory.file("relay.sqlite"), serving: false)
        let (other, otherToken) = try administration.issueToken(account: "acct", node: nil)
        #expect(try storage.authenticate(otherToken)?.tokenID == other.id)
        try administration.revokeToken(id: other.id)
        #expect(try storage.authenticate(otherToken) == nil, "revoked elsewhere: refused at once")
        let (_, third) = try administration.issueToken(account: "acct", node: nil)
        #expect(try storage.authenticate(third)?.account == "acct")
        let wrongSecret = String(third.dropLast()) + (third.hasSuffix("A") ? "B" : "A")
        #expect(try storage.authenticate(wrongSecret) == nil, "a wrong secret is never taken for a known token")
        try administration.deleteAccount("acct")
        #expect(try storage.authenticate(third) == nil, "its account deleted elsewhere: refused at once")
    }

    /// Pushes in one batch read and change their account's row in memory and write it once; progress
    /// records among them read and charge the row themselves. Whatever the batches, the usage, the
    /// cursor and the quota agree with what was stored.
    @Test func batchedPushesKeepTheAccountRowExact() async throws {
        let directory = try TemporaryDirectory("relaytally")
        let storage = try SQLiteRelayStorage(path: directory.file("relay.sqlite"))
        defer { storage.close() }
        let node = SegmentFixtures.nodeID()
        let segments = try (UInt64(1)...200).map { try SegmentFixtures.segment(account: "acct", node: node, first: $0, last: $0) }
        let quota = Int64(segments.prefix(120).map(\.count).reduce(0, +))
        try storage.createAccount("acct", quotaBytes: quota)
        enum Outcome: Sendable { case segment(Int), progress(Int), refused(Int) }
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for (index, bytes) in segments.enumerated() {
                group.addTask {
                    do {
                        let sequence = UInt64(index + 1)
                        _ = try await storage.push(
                            SegmentPush(account: "acct", node: .init(node), firstSequence: sequence, lastSequence: sequence, bytes: bytes, defaultQuotaBytes: 1 << 30))
                        return .segment(bytes.count)
                    } catch let error as RelayError where error.code == .quotaExceeded {
                        return .refused(bytes.count)
                    }
                }
                if index % 10 == 0 {
                    group.addTask {
                        let put = ProgressPut(account: "acct", node: NodeID(SegmentFixtures.nodeID()), bytes: [UInt8](repeating: 7, count: 50), defaultQuotaBytes: 1 << 30)
                        do {
                            try await storage.putProgress(put)
                            return .progress(50)
                        } catch let error as RelayError where error.code == .quotaExceeded {
                            return .refused(50)
                        }
                    }
                }
            }
            var outcomes: [Outcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        var stored = 0, storedBytes: Int64 = 0, smallestRefused = Int64.max
        for outcome in outcomes {
            switch outcome {
            case .segment(let size): stored += 1; storedBytes += Int64(size)
            case .progress(let size): storedBytes += Int64(size)
            case .refused(let size): smallestRefused = min(smallestRefused, Int64(size))
            }
        }
        let usage = try #require(try storage.usage(account: "acct"))
        #expect(usage.used == storedBytes && usage.used <= quota)
        #expect(usage.used + smallestRefused > quota, "a push is refused only when it would not fit")
        #expect(stored >= 100 && stored < 200)
        #expect(try storage.latestArrival(account: "acct") == UInt64(stored))
        #expect(try storage.nodes(account: "acct").map(\.segments) == [stored])
        let page = try storage.pull(account: "acct", after: 0, limit: 1_000, maximumBytes: 1 << 30)
        #expect(page.segments.map(\.arrival) == Array(1...UInt64(stored)), "arrivals are dense, in order")
    }

    @Test func retentionStorageCountsQuotaAndAccountDeletionClearsIt() async throws {
        let directory = try TemporaryDirectory("relayretain")
        let storage = try SQLiteRelayStorage(path: directory.file("relay.sqlite"))
        defer { storage.close() }
        try storage.createAccount("acct", quotaBytes: 10_000)
        let node = NodeID(SegmentFixtures.nodeID())
        try await storage.putProgress(ProgressPut(account: "acct", node: node, bytes: [UInt8](repeating: 1, count: 100), defaultQuotaBytes: 1 << 30))
        try await storage.putProgress(ProgressPut(account: "acct", node: node, bytes: [UInt8](repeating: 2, count: 40), defaultQuotaBytes: 1 << 30))
        #expect(try storage.usage(account: "acct")?.used == 40, "a replaced record counts once, at its new size")
        func upload(_ name: String, _ chunks: [[UInt8]]) async throws(RelayError) -> Bool {
            let id = try await storage.beginBaseline(account: "acct", node: node, name: name)
            for (index, chunk) in chunks.enumerated() { try await storage.appendBaselineChunk(upload: id, index: index, bytes: chunk) }
            // The storage compares digests as given: the bytes themselves serve here.
            let all = chunks.flatMap { $0 }
            do {
                return try await storage.finishBaseline(
                    BaselineFinish(
                        account: "acct", node: node, name: name, upload: id, chunks: chunks.count, size: Int64(all.count),
                        digest: all, defaultQuotaBytes: 1 << 30))
            } catch {
                await storage.abandonBaseline(upload: id)
                throw error
            }
        }
        #expect(try await upload("b1", [[1, 2], [3]]))
        #expect(try await !upload("b1", [[1, 2], [3]]), "the same bytes again: stored before")
        await #expect(throws: RelayError.self) { try await upload("b1", [[1, 2], [4]]) }
        let stored = try #require(try storage.baseline(account: "acct", node: node, name: "b1"))
        #expect(stored.chunks == 2 && stored.size == 3)
        #expect(try storage.baselineChunk(blob: stored.blob, index: 1) == [3])
        #expect(try storage.usage(account: "acct")?.used == 43)
        let refused = await #expect(throws: RelayError.self) { try await upload("b2", [[UInt8](repeating: 0, count: 9_999)]) }
        #expect(refused?.code == .quotaExceeded)
        #expect(try storage.baselines(account: "acct").map(\.name) == ["b1"], "a refused upload leaves nothing")
        #expect(try await storage.deleteBaseline(account: "acct", node: node, name: "b1"))
        #expect(try await !storage.deleteBaseline(account: "acct", node: node, name: "b1"))
        #expect(try storage.baselineChunk(blob: stored.blob, index: 0) == nil, "its chunks go with it")
        #expect(try storage.usage(account: "acct")?.used == 40)
        // Deleting the account takes its records and baselines; created again, it starts empty.
        #expect(try await upload("b3", [[9]]))
        try storage.deleteAccount("acct")
        try storage.createAccount("acct", quotaBytes: nil)
        #expect(try storage.progressRecords(account: "acct").isEmpty && storage.baselines(account: "acct").isEmpty)
        #expect(try storage.usage(account: "acct")?.used == 0)
    }
}
