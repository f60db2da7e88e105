import LogsyncCore

/// The refusals every storage gives in the same words, whichever database it keeps.
public enum StorageRefusals {
    public static func otherBytes(node: NodeID, first: UInt64, last: UInt64) -> RelayError {
        RelayError(
            .conflict,
            "segment \(node)/\(RelayNames.rangeText(first: first, last: last)) is stored already with other bytes: a node never rewrites a segment (two machines may share a node id)")
    }

    public static func overlap(node: NodeID, first: UInt64, last: UInt64, storedFirst: UInt64, storedLast: UInt64) -> RelayError {
        RelayError(
            .conflict,
            "segment \(node)/\(RelayNames.rangeText(first: first, last: last)) overlaps the stored segment \(node)/\(RelayNames.rangeText(first: storedFirst, last: storedLast))")
    }

    public static func otherBaseline(node: NodeID, name: String) -> RelayError {
        RelayError(
            .conflict,
            "baseline \(node)/\(name) is stored already with other bytes: a baseline's name stands for its frontier, whose state has one encoding")
    }

    public static func missingAccount(_ account: String) -> RelayError {
        RelayError(.forbidden, "the account \(RelayNames.quoted(account)) no longer exists")
    }

    public static func overQuota(_ account: String, _ total: Int64, quota: Int64, what: String) -> RelayError {
        RelayError(
            .quotaExceeded,
            "the account \(RelayNames.quoted(account)) would hold \(total) bytes with this \(what); its quota is \(quota) (quota_bytes, counting segments, baselines and progress records): nothing was stored")
    }

    public static func accountExists(_ name: String) -> RelayError {
        RelayError(.exists, "the account \(RelayNames.quoted(name)) exists already")
    }

    public static func noAccount(_ name: String) -> RelayError {
        RelayError(.notFound, "there is no account \(RelayNames.quoted(name)) (sync-relay account list shows them)")
    }

    public static func noAccountForToken(_ name: String) -> RelayError {
        RelayError(.notFound, "there is no account \(RelayNames.quoted(name)): create it first (sync-relay account create)")
    }

    public static func noToken(_ id: String) -> RelayError {
        RelayError(.notFound, "there is no token with id \(RelayNames.quoted(id)) (sync-relay token list shows them)")
    }

    /// Checks an account name and a token's node before anything is written.
    public static func checkAccountName(_ name: String) throws(RelayError) {
        if let problem = RelayNames.accountProblem(name) {
            throw RelayError(.badRequest, "the account name \(RelayNames.quoted(name)) \(problem)")
        }
    }

    public static func checkTokenNode(_ node: NodeID?) throws(RelayError) {
        if let node, let problem = RelayNames.nodeProblem(node.rawValue) {
            throw RelayError(.badRequest, "the node \(RelayNames.quoted(node.rawValue)) \(problem)")
        }
    }
}
