import Crypto
import Foundation
import _CryptoExtras

/// An account key derived from a passphrase instead of drawn at random (`logsync seal derive`,
/// `docs/security.md`): scrypt at pinned parameters, salted with the account's name, so that every device
/// given the same passphrase for the same account derives the same key — and its recovery phrase, which is
/// what syncd reads. The parameters are constants of this format, never read from anywhere: nothing can
/// derive the key more cheaply, and a changed parameter would be another key (a device would stop at start
/// with the wrong key named), never a silent downgrade.
extension AccountKey {
    /// scrypt's cost (N), block size (r) and parallelism (p): 128 MiB and about half a second per
    /// derivation on a laptop core, for each guess an attacker makes too.
    public static let passphraseRounds = 1 << 17
    public static let passphraseBlockSize = 8
    public static let passphraseParallelism = 1
    /// The shortest passphrase taken, in characters: scrypt slows guessing down, it does not make a short
    /// passphrase long.
    public static let passphraseMinimumCharacters = 16

    /// The key `passphrase` derives for `account`. The passphrase is taken in Unicode's composed form
    /// (NFC), so that devices whose keyboards compose accents differently derive the same key.
    public init(passphrase: String, account: String) throws(SealError) {
        let text = passphrase.precomposedStringWithCanonicalMapping
        guard text.count >= Self.passphraseMinimumCharacters else {
            throw SealError(
                .badKey,
                "the passphrase has \(text.count) characters; at least \(Self.passphraseMinimumCharacters) are needed (several words), or use a random key: logsync seal new")
        }
        let salt = Array("logsync account key 1".utf8) + [0] + Array(account.utf8)
        try self.init(
            bytes: try Self.scrypt(
                Array(text.utf8), salt: salt, rounds: Self.passphraseRounds, blockSize: Self.passphraseBlockSize, parallelism: Self.passphraseParallelism,
                count: 32))
    }

    /// scrypt (RFC 7914) through swift-crypto's BoringSSL.
    package static func scrypt(_ passphrase: [UInt8], salt: [UInt8], rounds: Int, blockSize: Int, parallelism: Int, count: Int) throws(SealError) -> [UInt8] {
        do {
            let key = try KDF.Scrypt.deriveKey(
                from: passphrase, salt: salt, outputByteCount: count, rounds: rounds, blockSize: blockSize, parallelism: parallelism,
                maxMemory: 256 << 20)
            return key.withUnsafeBytes { Array($0) }
        } catch {
            throw SealError(.crypto, "scrypt failed: \(error)")
        }
    }
}
