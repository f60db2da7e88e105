import Crypto

/// A device's key for receiving epoch keys (X25519, HPKE's recipient key), derived from its signing key:
/// one secret per device, kept in one file, and a device card binds the two public keys together under
/// the signing key's signature.
extension NodeSigningKey {
    var agreementKey: Curve25519.KeyAgreement.PrivateKey {
        let seed = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: raw), info: Array("logsync device agreement key v1".utf8), outputByteCount: 32)
        return try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) })
    }

    /// The public key epoch keys are wrapped to for this device.
    public var agreementPublicKey: [UInt8] { Array(agreementKey.publicKey.rawRepresentation) }
}

extension AccountKey {
    /// The recovery phrase as a recipient of epoch keys: whoever holds the phrase can read every epoch,
    /// so that a new device can always join from the phrase alone (`docs/security.md`, "Devices").
    var recoveryAgreementKey: Curve25519.KeyAgreement.PrivateKey {
        let seed = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: bytes), info: Array("logsync recovery agreement key v1".utf8), outputByteCount: 32)
        return try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) })
    }

    /// The key of epoch 0, as bytes.
    var firstEpochKeyBytes: [UInt8] { firstEpochKey.withUnsafeBytes { Array($0) } }
}
