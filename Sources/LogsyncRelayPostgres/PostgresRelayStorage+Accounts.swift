import Crypto
import Foundation
import LogsyncCore
import LogsyncRelay
import NIOCore
import PostgresNIO

/// Accounts and token digests. A revocation or an account deletion is followed, after its commit, by a
/// `c` notification: every relay forgets the tokens it found valid (and, should the notification be lost,
/// at its next re-check).
extension PostgresRelayStorage: CredentialStorage {
    public func createAccount(_ name: String, quotaBytes: Int64?) async throws(RelayError) {
        try StorageRefusals.checkAccountName(name)
        let (logger, now) = (self.logger, Self.now())
        try await transaction("creating the account") { connection in
            // A name used before continues its arrival numbers: a node still holding a cursor from the
            // deleted account must not skip the new account's first segments.
            let inserted = try await connection.first(
                """
                INSERT INTO accounts(name, created_ms, quota_bytes, cursor)
                VALUES (\(name), \(now), \(quotaBytes), coalesce((SELECT cursor FROM retired_accounts WHERE name = \(name)), 0))
                ON CONFLICT (name) DO NOTHING RETURNING name
                """, as: String.self, logger: logger)
            guard inserted != nil else { throw StorageRefusals.accountExists(name) }
        }
    }

    public func accounts() async throws(RelayError) -> [AccountInfo] {
        try await rows(
            "listing the accounts", "SELECT name, created_ms, segments, used_bytes, quota_bytes FROM accounts ORDER BY name",
            as: (String, Int64, Int64, Int64, Int64?).self
        ).map {
            AccountInfo(name: $0.0, createdAt: UTCTime.iso8601(milliseconds: $0.1), segments: Int($0.2), usedBytes: $0.3, quotaBytes: $0.4)
        }
    }

    public func deleteAccount(_ name: String) async throws(RelayError) {
        let logger = self.logger
        try await transaction("deleting the account") { connection in
            guard try await connection.first("SELECT name FROM accounts WHERE name = \(name) FOR UPDATE", as: String.self, logger: logger) != nil else {
                throw StorageRefusals.noAccount(name)
            }
            try await connection.query(
                """
                INSERT INTO retired_accounts(name, cursor) SELECT name, cursor FROM accounts WHERE name = \(name)
                ON CONFLICT (name) DO UPDATE SET cursor = excluded.cursor
                """, logger: logger)
            try await connection.query("DELETE FROM tokens WHERE account = \(name)", logger: logger)
            try await connection.query("DELETE FROM segments WHERE account = \(name)", logger: logger)
            try await connection.query("DELETE FROM progress WHERE account = \(name)", logger: logger)
            try await connection.query(
                """
                DELETE FROM baseline_chunks WHERE blob IN (
                    SELECT blob FROM baselines WHERE account = \(name) UNION SELECT id FROM baseline_uploads WHERE account = \(name))
                """, logger: logger)
            try await connection.query("DELETE FROM baselines WHERE account = \(name)", logger: logger)
            try await connection.query("DELETE FROM baseline_uploads WHERE account = \(name)", logger: logger)
            try await connection.query("DELETE FROM accounts WHERE name = \(name)", logger: logger)
        }
        try await credentialsChanged("deleted the account \(RelayNames.quoted(name))")
    }

    public func issueToken(account: String, node: NodeID?) async throws(RelayError) -> (info: TokenInfo, token: String) {
        try StorageRefusals.checkTokenNode(node)
        let (id, token, digest) = Tokens.generate()
        let (logger, now) = (self.logger, Self.now())
        try await transaction("issuing a token") { connection in
            guard try await connection.first("SELECT name FROM accounts WHERE name = \(account) FOR SHARE", as: String.self, logger: logger) != nil else {
                throw StorageRefusals.noAccountForToken(account)
            }
            try await connection.query(
                "INSERT INTO tokens(id, account, node, digest, created_ms) VALUES (\(id), \(account), \(node?.rawValue), \(ByteBuffer(bytes: digest)), \(now))",
                logger: logger)
        }
        return (TokenInfo(id: id, account: account, node: node?.rawValue, createdAt: UTCTime.iso8601(milliseconds: now)), token)
    }

    public func revokeToken(id: String) async throws(RelayError) {
        let logger = self.logger
        let deleted = try await transaction("revoking the token") { connection in
            try await connection.first("DELETE FROM tokens WHERE id = \(id) RETURNING id", as: String.self, logger: logger)
        }
        guard deleted != nil else { throw StorageRefusals.noToken(id) }
        try await credentialsChanged("revoked the token \(id)")
    }

    public func tokens(account: String?) async throws(RelayError) -> [TokenInfo] {
        let query: PostgresQuery =
            account.map { "SELECT id, account, node, created_ms FROM tokens WHERE account = \($0) ORDER BY created_ms, id" }
            ?? "SELECT id, account, node, created_ms FROM tokens ORDER BY account, created_ms, id"
        return try await rows("listing the tokens", query, as: (String, String, String?, Int64).self).map {
            TokenInfo(id: $0.0, account: $0.1, node: $0.2, createdAt: UTCTime.iso8601(milliseconds: $0.3))
        }
    }

    public func authenticate(_ bearer: String) async throws(RelayError) -> Credential? {
        let key = Array(SHA256.hash(data: Array(bearer.utf8)))
        if let known = knownTokens.withLock({ $0[key] }) { return known }
        guard let (id, secret) = Tokens.parse(bearer) else { return nil }
        guard
            let row = try await rows(
                "checking a token", "SELECT account, node, digest FROM tokens WHERE id = \(id)", as: (String, String?, ByteBuffer).self
            ).first,
            Tokens.constantTimeEqual(Array(buffer: row.2), Tokens.digest(secret))
        else { return nil }
        let credential = Credential(tokenID: id, account: row.0, node: row.1.map(NodeID.init))
        knownTokens.withLock { known in
            if known.count >= Self.knownTokensLimit { known = [:] }
            known[key] = credential
        }
        return credential
    }

    /// Tells every relay, after the change committed, to look tokens up again.
    private func credentialsChanged(_ what: String) async throws(RelayError) {
        let logger = self.logger
        do {
            try await using("notifying the relays") { connection in
                try await connection.query("SELECT pg_notify(\(ArrivalChannel.name), 'c')", logger: logger)
                return ()
            }
        } catch {
            throw RelayError(
                .storage,
                "\(what), but the running relays could not be told: they stop accepting its tokens within [postgres] recheck_ms (\(settings.recheckMilliseconds) ms)",
                cause: error)
        }
    }
}
