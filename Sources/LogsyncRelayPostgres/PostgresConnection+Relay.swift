import Logging
import PostgresNIO

extension PostgresConnection {
    /// The first row of `query`, decoded, or nil when it has none.
    func first<each Column: PostgresDecodable>(
        _ query: PostgresQuery, as types: (repeat each Column).Type, logger: Logger
    ) async throws -> (repeat each Column)? {
        for try await row in try await self.query(query, logger: logger).decode((repeat each Column).self) { return row }
        return nil
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back when it throws. What it wrote is committed when it
    /// returns: COMMIT's answer comes once the commit is durable, whereas a statement sent on its own is
    /// answered at its CommandComplete and committed only at the protocol's Sync after it.
    func inTransaction<T>(logger: Logger, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await query("BEGIN", logger: logger)
        do {
            let result = try await body(self)
            try await query("COMMIT", logger: logger)
            return result
        } catch {
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
    }
}
