/// What syncd last heard from Syncthing when it asked it to scan this node's folder after a publish
/// (`[syncthing]`): filled in by the Syncthing client, shown by `syncctl status` (a plain value in the
/// core, like ``RelayContact``, so that the control protocol carries it without linking the client).
/// The requests are advice: a failure here slows delivery to Syncthing's own watcher, never stops sync.
package struct SyncthingContact: Sendable, Codable, Hashable {
    /// Syncthing's REST address.
    package var url: String
    /// The Syncthing folder asked to scan, and its path, once known (configured or found by path).
    package var folderID: String?
    package var folderPath: String?
    /// This node's folder relative to the Syncthing folder: what each scan asks for (`sub`).
    package var sub: String?
    /// Publishes that asked for a scan; scans sent (several asks made during one scan become one
    /// follow-up scan); scans that failed.
    package var requested: Int
    package var scans: Int
    package var failures: Int
    /// The last answer: `200 OK in 23 ms`, or what went wrong; when it came (ms since 1970).
    package var lastAnswer: String?
    package var lastAnswerAt: Int64?
    /// The last failure and when it happened, kept after later successes.
    package var lastFailure: String?
    package var lastFailureAt: Int64?

    package init(url: String) {
        self.url = url
        requested = 0
        scans = 0
        failures = 0
    }

    /// Whether the last request failed.
    package var failing: Bool { lastFailureAt != nil && lastFailureAt == lastAnswerAt }

    enum CodingKeys: String, CodingKey {
        case url, folderID = "folder_id", folderPath = "folder_path", sub, requested, scans, failures
        case lastAnswer = "last_answer", lastAnswerAt = "last_answer_at", lastFailure = "last_failure", lastFailureAt = "last_failure_at"
    }
}
