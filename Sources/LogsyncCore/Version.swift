/// The version every logsync command answers `--version` with.
public enum LogsyncVersion {
    public static let current = "0.6.0"
}
