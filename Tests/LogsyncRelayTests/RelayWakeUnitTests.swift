import Foundation
@testable import LogsyncRelay
@testable import LogsyncRelayPostgres
import LogsyncTestKit
import Testing

/// Wake-ups across relays without a process: the board wakes only waiters behind an arrival, and the
/// notification payloads stay under PostgreSQL's limit and read back as written.
@Suite struct RelayWakeUnitTests {
    @Test func aRecheckWakesOnlyWaitersBehindTheArrival() async throws {
        let board = ArrivalBoard(maximumWaiters: 10)
        let behind = Task { try await board.wait(account: "a", after: 3, timeout: .seconds(30)) }
        let current = Task { try await board.wait(account: "a", after: 7, timeout: .seconds(30)) }
        try await eventually(within: .seconds(30), "both waiters register") { board.waiting == 2 }
        #expect(Set(board.waitingAccounts) == ["a"])
        // The re-check announces the account's latest arrival, 7: the waiter after 3 wakes, the one
        // after 7 (it has it) keeps waiting.
        board.announce(account: "a", arrival: 7)
        #expect(try await behind.value)
        #expect(board.waiting == 1)
        board.announce(account: "a", arrival: 8)
        #expect(try await current.value)
        #expect(board.waiting == 0 && board.waitingAccounts.isEmpty)
        let deletions = board.deletions
        board.noteDeletion()
        #expect(board.deletions == deletions + 1)
    }

    @Test func notificationPayloadsStayUnderTheLimitAndReadBack() {
        var arrivals: [String: UInt64] = [:]
        for index in 0..<2_000 { arrivals["account-\(String(repeating: "x", count: 40))-\(index)"] = UInt64(index + 1) }
        let payloads = ArrivalChannel.payloads(arrivals: arrivals, deleted: true)
        #expect(payloads.count > 1, "2,000 accounts need several payloads")
        #expect(payloads.allSatisfy { $0.utf8.count <= 8_000 }, "PostgreSQL refuses payloads of 8,000 bytes and more")
        var heard: [String: UInt64] = [:]
        var deleted = false
        for payload in payloads {
            let parsed = ArrivalChannel.parse(payload)
            #expect(parsed.sentMicroseconds != nil)
            for (account, arrival) in parsed.arrivals { heard[account] = arrival }
            deleted = deleted || parsed.deleted
        }
        #expect(heard == arrivals && deleted, "every account's arrival, and the deletion, read back")
        let odd = ArrivalChannel.parse("a 12\nc\nfuture-line with three fields\n../etc 5\nacct 9\n")
        #expect(odd.credentials && odd.arrivals.map(\.account) == ["acct"], "unknown lines and invalid account names are skipped")
    }
}
