import Crypto
import Foundation

/// An account's key: 256 random bits that every device of a sealed account holds, shown once as a
/// recovery phrase a person can copy to another device (``recoveryPhrase``). The keys that seal objects
/// are derived from it per key epoch, and each object's key from its epoch's key (``SealKeyring``).
public struct AccountKey: Sendable, Hashable {
    /// The 32 key bytes.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(SealError) {
        guard bytes.count == 32 else { throw SealError(.badKey, "an account key is 32 bytes, not \(bytes.count)") }
        self.bytes = bytes
    }

    /// A new key from the system's random number generator.
    public static func random() -> AccountKey {
        let key = SymmetricKey(size: .bits256)
        return try! AccountKey(bytes: key.withUnsafeBytes { Array($0) })
    }

    /// The key from its recovery phrase (``RecoveryPhrase``): case, dashes and spaces do not matter, and
    /// `o`, `i` and `l` are read as `0`, `1` and `1`; a typo is reported by the phrase's checksum.
    public init(recoveryPhrase text: String) throws(SealError) {
        self = try RecoveryPhrase.decode(text)
    }

    /// The recovery phrase: 56 Crockford base-32 digits in 14 groups of four, the last three digits a
    /// checksum. Shown once, when the account is sealed.
    public var recoveryPhrase: String { RecoveryPhrase.encode(self) }

    /// 8 bytes that name this key without revealing it: every sealed header carries them, so a node
    /// given the wrong key says so before trying to open anything.
    public var keyID: [UInt8] { Array(derive("logsync key id", bytes: 8)) }

    /// What a person compares to check that two devices hold the same key: the key id as hex.
    public var fingerprint: String { Hex.encode(keyID) }

    /// The key of epoch 0, which the account key seals under until a device is revoked.
    var firstEpochKey: SymmetricKey { SymmetricKey(data: derive("logsync epoch 0 key", bytes: 32)) }

    private func derive(_ info: String, bytes count: Int) -> [UInt8] {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: bytes), info: Array(info.utf8), outputByteCount: count)
            .withUnsafeBytes { Array($0) }
    }
}

/// The written form of an account key: Crockford's base 32 (digits and letters without `i`, `l`, `o` and
/// `u`), so that it survives being read aloud, typed or copied by hand. 32 key bytes and 3 checksum bytes
/// (the start of their SHA-256) make 280 bits, exactly 56 digits.
public enum RecoveryPhrase {
    static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    public static func encode(_ key: AccountKey) -> String {
        let data = key.bytes + Array(SHA256.hash(data: key.bytes).prefix(3))
        var digits: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in data {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                digits.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        var groups: [String] = []
        var index = 0
        while index < digits.count {
            groups.append(String(decoding: digits[index..<min(index + 4, digits.count)], as: UTF8.self))
            index += 4
        }
        return groups.joined(separator: "-")
    }

    public static func decode(_ text: String) throws(SealError) -> AccountKey {
        var values: [UInt8] = []
        for scalar in text.lowercased().unicodeScalars {
            switch scalar {
            case "-", " ", "\t", "\n", "\r": continue
            case "o": values.append(0)
            case "i", "l": values.append(1)
            default:
                guard scalar.isASCII, let index = alphabet.firstIndex(of: UInt8(scalar.value)) else {
                    throw SealError(.badKey, "'\(scalar)' is not a digit of a recovery phrase (0-9 and letters but i, l, o and u)")
                }
                values.append(UInt8(index))
            }
        }
        guard values.count == 56 else {
            throw SealError(.badKey, "a recovery phrase has 56 digits (14 groups of four); this one has \(values.count)")
        }
        var data: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                data.append(UInt8((buffer >> UInt32(bits)) & 0xff))
            }
        }
        let key = Array(data[0..<32])
        guard Array(SHA256.hash(data: key).prefix(3)) == Array(data[32..<35]) else {
            throw SealError(.badKey, "the recovery phrase has a typo: its checksum does not match (check each group of four)")
        }
        return try AccountKey(bytes: key)
    }
}
