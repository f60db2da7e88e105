// The only header through which logsync reaches libsqlite3.
//
// Debian's libsqlite3 is built with the session extension and the pre-update hook, but <sqlite3.h>
// declares those APIs only when these macros are defined before it is included.
#ifndef LOGSYNC_CSQLITE_SHIM_H
#define LOGSYNC_CSQLITE_SHIM_H

#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro that Swift cannot import: bind through typed wrappers instead.
static inline int csqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}

static inline int csqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}

// SQLITE_STATIC likewise: for bytes the caller keeps valid and unchanged until the parameter is bound
// again or the statement is finalized.
static inline int csqlite_bind_text_static(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_STATIC);
}

static inline int csqlite_bind_blob_static(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_STATIC);
}

// sqlite3_config is variadic too. Turns off SQLite's count of the memory it holds, which takes a global
// mutex on every allocation; logsync never reads it. Must run before SQLite is initialized (before the
// first connection opens); returns SQLITE_MISUSE after.
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

// sqlite3_db_config is variadic, which Swift cannot call: one typed wrapper per option logsync sets.
// Turns the connection's triggers on or off and reports the setting now in effect (or -1 on error).
static inline int csqlite_enable_triggers(sqlite3 *db, int on) {
    int now = -1;
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, on, &now);
    return rc == SQLITE_OK ? now : -1;
}

// Turns off SQLite's double-quoted string literals for DML and DDL on the connection
// (SQLITE_DBCONFIG_DQS_DML/_DDL), so that a quoted identifier naming no column is an error instead of
// silently becoming a string. Returns 0 on success.
static inline int csqlite_disable_double_quoted_strings(sqlite3 *db) {
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
}

#endif
