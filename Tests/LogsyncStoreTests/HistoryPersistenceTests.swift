import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

@Suite("Tokens, purge and reopening")
struct HistoryPersistenceTests {
    @Test("the token and history survive closing and reopening the store, and keep increasing")
    func tokenSurvivesReopen() throws {
        let directory = try TemporaryDirectory("tok")
        var token = HistoryToken.zero
        do {
            let (store, _) = try Fixtures.store(in: directory)
            for i in 0..<3 {
                try store.write(author: "w") { tx in try tx.insert("Note", ["id": Fixtures.id(), "rank": .integer(Int64(i))]) }
            }
            token = try store.currentToken()
            #expect(token > .zero)
        }
        let (reopened, _) = try Fixtures.store(in: directory)
        #expect(try reopened.currentToken() == token)
        #expect(try reopened.history().count == 3)
        let lastTimestamp = try #require(try reopened.history().last?.timestamp)
        try reopened.write(author: "w") { tx in try tx.insert("Note", ["id": Fixtures.id()]) }
        let newest = try #require(try reopened.history().last)
        #expect(newest.token > token)
        #expect(newest.timestamp > lastTimestamp)
    }

    @Test("purge removes transactions before a token and keeps the rest intact")
    func purgeBeforeToken() throws {
        let directory = try TemporaryDirectory("purge")
        let (store, _) = try Fixtures.store(in: directory)
        var tokens: [HistoryToken] = []
        for i in 0..<5 {
            try store.write(author: "w\(i)") { tx in try tx.insert("Note", ["id": Fixtures.id()]) }
            tokens.append(try store.currentToken())
        }
        #expect(try store.purgeHistory(before: tokens[2]) == 2)
        let remaining = try store.history()
        #expect(remaining.map(\.token) == Array(tokens[2...]))
        #expect(remaining.map(\.author) == ["w2", "w3", "w4"])
        #expect(remaining.allSatisfy { $0.changes.count == 1 })
        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(5)]])
    }

    @Test("purging everything keeps the newest transaction, so tokens never go back, even after reopening")
    func purgeAllKeepsTokensMonotonic() throws {
        let directory = try TemporaryDirectory("purge")
        var newest = HistoryToken.zero
        do {
            let (store, _) = try Fixtures.store(in: directory)
            for _ in 0..<3 { try store.write { tx in try tx.insert("Note", ["id": Fixtures.id()]) } }
            newest = try store.currentToken()
            #expect(try store.purgeHistory(before: HistoryToken(newest.rawValue + 100)) == 2)
            #expect(try store.history().map(\.token) == [newest])
        }
        let (store, _) = try Fixtures.store(in: directory)
        try store.write { tx in try tx.insert("Note", ["id": Fixtures.id()]) }
        #expect(try store.currentToken() > newest)
    }

    @Test("history after an arbitrary token never returns half a transaction")
    func arbitraryTokenNeverSplitsTransactions() throws {
        let directory = try TemporaryDirectory("tok")
        let (store, _) = try Fixtures.store(in: directory)
        try store.write { tx in for _ in 0..<4 { try tx.insert("Note", ["id": Fixtures.id()]) } }
        let first = try store.currentToken()
        try store.write { tx in for _ in 0..<4 { try tx.insert("Note", ["id": Fixtures.id()]) } }
        for raw in (first.rawValue - 3)...(first.rawValue + 3) {
            let after = try store.history(after: HistoryToken(raw))
            #expect(after.allSatisfy { $0.changes.count == 4 }, "after \(raw)")
        }
    }
}
