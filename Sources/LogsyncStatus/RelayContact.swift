/// What the node last heard from its relay: filled in by the relay transport, shown by `syncctl status`
/// (a plain value of its own module, so that the control protocol carries it without linking the transport).
public struct RelayContact: Sendable, Codable, Hashable {
    public var url: String
    /// The last answer: `200 OK`, `409 conflict: …`, or the network error.
    public var lastAnswer: String?
    /// When it came (milliseconds since 1970).
    public var lastAnswerAt: Int64?
    /// The last push the relay refused, and why.
    public var lastRefusal: String?
    /// Which history the relay serves, `ID/EPOCH` (its database's id and epoch), as its last pull answer
    /// said; nil before one came, or from a relay too old to say.
    public var identity: String?
    /// The last time the node found the relay had lost history (a new identity or epoch, or fewer
    /// arrivals than the node had pulled), what it found and what it did.
    public var lastReset: String?
    public var lastResetAt: Int64?

    public init(
        url: String, lastAnswer: String? = nil, lastAnswerAt: Int64? = nil, lastRefusal: String? = nil, identity: String? = nil,
        lastReset: String? = nil, lastResetAt: Int64? = nil
    ) {
        self.url = url
        self.lastAnswer = lastAnswer
        self.lastAnswerAt = lastAnswerAt
        self.lastRefusal = lastRefusal
        self.identity = identity
        self.lastReset = lastReset
        self.lastResetAt = lastResetAt
    }

    enum CodingKeys: String, CodingKey {
        case url, lastAnswer = "last_answer", lastAnswerAt = "last_answer_at", lastRefusal = "last_refusal", identity
        case lastReset = "last_reset", lastResetAt = "last_reset_at"
    }
}
