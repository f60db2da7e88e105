#if canImport(Glibc)
import Glibc
#endif

/// Signals a daemon handles itself, through Dispatch's signal sources (which read them with a signalfd).
///
/// Blocked from the first line of `main`, before any thread exists, so that every thread inherits the
/// block: a signal that arrives before its source is registered (Dispatch registers it later, on its
/// own thread) stays pending until the source reads it. Ignoring the signal instead (`SIG_IGN`, the
/// usual advice for Dispatch sources) discards one that arrives in that window: a `systemctl stop` just
/// after READY=1 could be lost that way and wait for SIGKILL.
public enum HandledSignals {
    /// Ignores `signal` from now on (a process that never reloads, asked to by a unit's `ExecReload`).
    public static func ignore(_ signal: Int32) {
        _ = Glibc.signal(signal, SIG_IGN)
    }

    /// Gives `signal` its default action again (a benchmark done with its Dispatch signal sources).
    public static func restoreDefault(_ signal: Int32) {
        _ = Glibc.signal(signal, SIG_DFL)
    }

    /// Blocks `signals` in the calling thread; call it before any other thread starts.
    public static func block(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
