// The only header through which logsync reaches libsystemd: readiness/watchdog notifications and the
// journal. Variadic functions (sd_notifyf, sd_journal_send) are not importable; these typed wrappers
// and the iovec form are used instead.
#ifndef LOGSYNC_CSYSTEMD_SHIM_H
#define LOGSYNC_CSYSTEMD_SHIM_H

#include <stdint.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

/// sd_notify without unsetting the environment: a no-op returning 0 when NOTIFY_SOCKET is not set.
static inline int csystemd_notify(const char *state) {
    return sd_notify(0, state);
}

/// > 0 and the interval in microseconds when the service manager expects watchdog pings.
static inline int csystemd_watchdog_enabled(uint64_t *usec) {
    return sd_watchdog_enabled(0, usec);
}

static inline int csystemd_journal_sendv(const struct iovec *iov, int count) {
    return sd_journal_sendv(iov, count);
}

#endif
