/// Why a sealed object could not be made or opened, or a key could not be used: what failed and what to
/// do. Opening never traps on hostile bytes: every problem is one of these.
public struct SealError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        public var description: String { name }

        /// The object is sealed under another account key (its key id differs): this node was given the
        /// wrong key, or the object belongs elsewhere. Nothing is applied.
        public static let wrongKey = Code(name: "wrongKey")
        /// The object is sealed under a key epoch this node does not hold.
        public static let unknownEpoch = Code(name: "unknownEpoch")
        /// The ciphertext, its header or its signature fail to authenticate: changed, truncated, padded or
        /// forged by whoever carried it.
        public static let unauthentic = Code(name: "unauthentic")
        /// The object is authentic but does not belong where the carrier put it: another node's, another
        /// account's, another range's, or another kind of object.
        public static let misplaced = Code(name: "misplaced")
        /// Signed by another key than the node's earlier objects.
        public static let signerChanged = Code(name: "signerChanged")
        /// The segment does not continue its node's chain where this node verified it: a second history of
        /// the same sequences.
        public static let chainBroken = Code(name: "chainBroken")
        /// Signed by a device revoked from the account, past what was verified before its revocation.
        public static let revoked = Code(name: "revoked")
        /// A plain object in a sealed account, or a sealed one in a plain account: never mixed.
        public static let mixed = Code(name: "mixed")
        /// The bytes do not follow the sealed format.
        public static let malformed = Code(name: "malformed")
        /// A key or recovery phrase could not be read or is not one.
        public static let badKey = Code(name: "badKey")
        /// The cryptographic library refused (never for hostile input).
        public static let crypto = Code(name: "crypto")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
