import Logging
import LogsyncRelay
import PostgresNIO

/// The relay's tables in PostgreSQL, as numbered migrations applied in order at start. Every relay (and
/// every administration command) applies what is missing inside one transaction that first takes a
/// transaction-scoped advisory lock: relays starting at once wait for each other, and each either finds
/// a migration applied or applies it whole (PostgreSQL's DDL is transactional). A database migrated by a
/// newer relay than this one is refused rather than written with an older idea of its tables.
enum PostgresSchema {
    /// `pg_advisory_xact_lock`'s key for migrations: "lsrelay1" as a big-endian integer.
    static let migrationLock: Int64 = 0x6C73_7265_6C61_7931

    struct Migration {
        var version: Int32
        var description: String
        var statements: [String]
    }

    static var latestVersion: Int32 { migrations.last?.version ?? 0 }

    static let migrations: [Migration] = [
        Migration(
            version: 1, description: "accounts, tokens, segments, progress records, baselines, the relay's identity, logsync_push",
            statements: [
                """
                CREATE TABLE accounts(
                    name text PRIMARY KEY, created_ms bigint NOT NULL, quota_bytes bigint,
                    used_bytes bigint NOT NULL DEFAULT 0, segments bigint NOT NULL DEFAULT 0, cursor bigint NOT NULL DEFAULT 0)
                """,
                "CREATE TABLE retired_accounts(name text PRIMARY KEY, cursor bigint NOT NULL)",
                "CREATE TABLE tokens(id text PRIMARY KEY, account text NOT NULL, node text, digest bytea NOT NULL, created_ms bigint NOT NULL)",
                "CREATE INDEX tokens_by_account ON tokens(account)",
                """
                CREATE TABLE segments(
                    account text NOT NULL, arrival bigint NOT NULL, node text NOT NULL, first bigint NOT NULL, last bigint NOT NULL,
                    digest bytea NOT NULL, size bigint NOT NULL, bytes bytea NOT NULL, PRIMARY KEY(account, arrival))
                """,
                // Segments are compressed already: kept out of line without another compression attempt.
                "ALTER TABLE segments ALTER COLUMN bytes SET STORAGE EXTERNAL",
                "CREATE UNIQUE INDEX segments_by_node ON segments(account, node, first)",
                """
                CREATE TABLE progress(
                    account text NOT NULL, node text NOT NULL, size bigint NOT NULL, bytes bytea NOT NULL, updated_ms bigint NOT NULL,
                    PRIMARY KEY(account, node))
                """,
                "CREATE TABLE baseline_uploads(id bigserial PRIMARY KEY, account text NOT NULL, node text NOT NULL, name text NOT NULL, started_ms bigint NOT NULL)",
                "CREATE TABLE baseline_chunks(blob bigint NOT NULL, seq integer NOT NULL, bytes bytea NOT NULL, PRIMARY KEY(blob, seq))",
                "ALTER TABLE baseline_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL",
                """
                CREATE TABLE baselines(
                    account text NOT NULL, node text NOT NULL, name text NOT NULL, blob bigint NOT NULL, chunks integer NOT NULL,
                    digest bytea NOT NULL, size bigint NOT NULL, created_ms bigint NOT NULL, PRIMARY KEY(account, node, name))
                """,
                "CREATE TABLE relay_meta(key text PRIMARY KEY, value text NOT NULL)",
                pushFunction,
            ]),
    ]

    /// One statement stores a batch of pushes (``PushBatches``): one round trip and one commit for all
    /// of them. It first locks every account of the batch in name order — so batches of several relays
    /// never deadlock — then gives each push its account's next arrival number under that lock. An
    /// account's arrival numbers are therefore taken in the order their transactions commit: a puller
    /// that saw arrival N committed has seen every arrival below it, on whichever relay it asks. The
    /// accounts' rows are written once per batch, not once per push.
    ///
    /// Outcomes, one row per push in order: 0 stored at `o_arrival`, 1 the same bytes stored before at
    /// `o_arrival`, 2 other bytes under the same name, 3 overlaps the stored range `o_detail`, 4 over the
    /// quota (`o_detail`: the total it would make and the quota), 5 no such account.
    static let pushFunction = """
        CREATE OR REPLACE FUNCTION logsync_push(
            p_account text[], p_node text[], p_first bigint[], p_last bigint[], p_digest bytea[], p_bytes bytea[], p_quota bigint[])
        RETURNS TABLE(o_outcome smallint, o_arrival bigint, o_detail text)
        LANGUAGE plpgsql AS $$
        DECLARE
            v_names text[];
            v_cursor bigint[];
            v_used bigint[];
            v_quota bigint[];
            v_added bigint[];
            v_at integer;
            v_prev record;
            v_size bigint;
            i integer;
        BEGIN
            PERFORM 1 FROM accounts a WHERE a.name = ANY(p_account) ORDER BY a.name FOR UPDATE;
            SELECT coalesce(array_agg(a.name), '{}'), coalesce(array_agg(a.cursor), '{}'), coalesce(array_agg(a.used_bytes), '{}'),
                   coalesce(array_agg(a.quota_bytes), '{}'), coalesce(array_agg(0::bigint), '{}')
              INTO v_names, v_cursor, v_used, v_quota, v_added
              FROM accounts a WHERE a.name = ANY(p_account);
            FOR i IN 1..coalesce(array_length(p_account, 1), 0) LOOP
                SELECT s.first, s.last, s.digest, s.arrival INTO v_prev FROM segments s
                 WHERE s.account = p_account[i] AND s.node = p_node[i] AND s.first <= p_last[i]
                 ORDER BY s.first DESC LIMIT 1;
                IF FOUND AND v_prev.last >= p_first[i] THEN
                    IF v_prev.first = p_first[i] AND v_prev.last = p_last[i] THEN
                        IF v_prev.digest = p_digest[i] THEN
                            o_outcome := 1; o_arrival := v_prev.arrival; o_detail := NULL;
                        ELSE
                            o_outcome := 2; o_arrival := 0; o_detail := NULL;
                        END IF;
                    ELSE
                        o_outcome := 3; o_arrival := 0; o_detail := v_prev.first || '-' || v_prev.last;
                    END IF;
                    RETURN NEXT;
                    CONTINUE;
                END IF;
                v_at := array_position(v_names, p_account[i]);
                IF v_at IS NULL THEN
                    o_outcome := 5; o_arrival := 0; o_detail := NULL;
                    RETURN NEXT;
                    CONTINUE;
                END IF;
                v_size := octet_length(p_bytes[i]);
                IF v_used[v_at] + v_size > coalesce(v_quota[v_at], p_quota[i]) THEN
                    o_outcome := 4; o_arrival := 0; o_detail := (v_used[v_at] + v_size) || ' ' || coalesce(v_quota[v_at], p_quota[i]);
                    RETURN NEXT;
                    CONTINUE;
                END IF;
                v_cursor[v_at] := v_cursor[v_at] + 1;
                v_used[v_at] := v_used[v_at] + v_size;
                v_added[v_at] := v_added[v_at] + 1;
                INSERT INTO segments(account, arrival, node, first, last, digest, size, bytes)
                VALUES (p_account[i], v_cursor[v_at], p_node[i], p_first[i], p_last[i], p_digest[i], v_size, p_bytes[i]);
                o_outcome := 0; o_arrival := v_cursor[v_at]; o_detail := NULL;
                RETURN NEXT;
            END LOOP;
            UPDATE accounts a SET cursor = u.cursor, used_bytes = u.used, segments = a.segments + u.added
              FROM unnest(v_names, v_cursor, v_used, v_added) AS u(name, cursor, used, added)
             WHERE a.name = u.name AND u.added > 0;
        END
        $$
        """

    /// Applies the missing migrations under the advisory lock, then runs `body` in the same transaction
    /// (the identity check), so that a relay never reads a half-migrated database.
    static func migrate<T: Sendable>(
        _ connection: PostgresConnection, logger: Logger, then body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await connection.inTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS relay_schema_migrations(
                    version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            let current = try await connection.first("SELECT coalesce(max(version), 0) FROM relay_schema_migrations", as: Int32.self, logger: logger) ?? Int32(0)
            guard current <= latestVersion else {
                throw RelayError(
                    .unavailable,
                    "the relay's PostgreSQL database has schema version \(current), newer than this sync-relay understands (\(latestVersion)): run the newer sync-relay")
            }
            for migration in migrations where migration.version > current {
                for statement in migration.statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.query(
                    "INSERT INTO relay_schema_migrations(version, description) VALUES (\(migration.version), \(migration.description))", logger: logger)
                logger.notice("applied the relay's PostgreSQL schema migration \(migration.version): \(migration.description)")
            }
            return try await body(connection)
        }
    }
}
