/// The exit statuses of every logsync command (`syncd`, `syncctl`, `logsync`, `notes`), one meaning each
/// across all of them: sysexits(3) where one fits. `docs/exit-codes.md` is the table users read.
public enum ExitStatus {
    /// Done.
    public static let ok: Int32 = 0
    /// The operation ran and did not succeed: a sync round failed, a note was not found.
    public static let failed: Int32 = 1
    /// Bad command line (EX_USAGE; swift-argument-parser's own code for a validation error).
    public static let usage: Int32 = 64
    /// The data cannot be used: a damaged store, an invalid schema, tables changed by another program, a
    /// file that is not a store (EX_DATAERR).
    public static let dataError: Int32 = 65
    /// `syncd` is not running: no control socket, or nobody listening (EX_UNAVAILABLE).
    public static let unavailable: Int32 = 69
    /// `syncd` answered with an error of its own (busy, stopping, internal), or dropped a client that fell
    /// behind (EX_SOFTWARE).
    public static let daemonError: Int32 = 70
    /// A system resource could not be had: the control socket is held by another program, a directory
    /// cannot be created (EX_OSERR).
    public static let systemError: Int32 = 71
    /// A file or folder cannot be created or written: the store's directory is missing or read-only
    /// (EX_CANTCREAT).
    public static let cannotCreate: Int32 = 73
    /// Reading or writing files failed: the shared folder, a full disk (EX_IOERR).
    public static let ioError: Int32 = 74
    /// Try again later: another `syncd` runs on the same store, no answer came in time (EX_TEMPFAIL).
    public static let temporaryFailure: Int32 = 75
    /// The socket answers, but not as `syncd` speaking this protocol version (EX_PROTOCOL).
    public static let protocolError: Int32 = 76
    /// The folder of the control socket is not private: another user's, writable by others, a link
    /// (EX_NOPERM).
    public static let notPermitted: Int32 = 77
    /// Bad configuration: the file and line are printed; a reload that fails keeps the running one
    /// (EX_CONFIG).
    public static let configuration: Int32 = 78
}
