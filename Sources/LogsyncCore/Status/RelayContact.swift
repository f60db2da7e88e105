/// What the node last heard from its relay: filled in by the relay transport, shown by `syncctl status`
/// (a plain value in the core, so that the control protocol carries it without linking the transport).
public struct RelayContact: Sendable, Codable, Hashable {
    public var url: String
    /// The last answer: `200 OK`, `409 conflict: …`, or the network error.
    public var lastAnswer: String?
    /// When it came (milliseconds since 1970).
    public var lastAnswerAt: Int64?
    /// The last push the relay refused, and why.
    public var lastRefusal: String?

    public init(url: String, lastAnswer: String? = nil, lastAnswerAt: Int64? = nil, lastRefusal: String? = nil) {
        self.url = url
        self.lastAnswer = lastAnswer
        self.lastAnswerAt = lastAnswerAt
        self.lastRefusal = lastRefusal
    }

    enum CodingKeys: String, CodingKey {
        case url, lastAnswer = "last_answer", lastAnswerAt = "last_answer_at", lastRefusal = "last_refusal"
    }
}
