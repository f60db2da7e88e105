import Foundation
import LogsyncCore
import LogsyncSeal
import LogsyncTestKit
import LogsyncTransport
import Testing

/// The sealed format on its own: keys and recovery phrases, sealing and opening segments, progress
/// records and baselines, and every way a carrier can damage them.
@Suite("Sealed objects")
struct SealFormatTests {
    static let account = "acct"
    static let key = AccountKey.random()
    static let signer = NodeSigningKey()
    static let keyring = SealKeyring(account: account, accountKey: key, signingKey: signer)
    static let node = NodeID(SegmentFixtures.nodeID())

    @Test("a recovery phrase gives the key back, forgives case, dashes and look-alike letters, and catches a typo")
    func recoveryPhrase() throws {
        let key = AccountKey.random()
        let phrase = key.recoveryPhrase
        #expect(phrase.split(separator: "-").count == 14 && phrase.split(separator: "-").allSatisfy { $0.count == 4 }, "\(phrase)")
        #expect(try AccountKey(recoveryPhrase: phrase) == key)
        #expect(try AccountKey(recoveryPhrase: phrase.uppercased().replacingOccurrences(of: "-", with: " ")) == key)
        #expect(try AccountKey(recoveryPhrase: phrase.replacingOccurrences(of: "0", with: "o").replacingOccurrences(of: "1", with: "l")) == key)
        // Any one digit changed is caught by the checksum.
        let digits = Array(phrase)
        var caught = 0
        for index in digits.indices where digits[index] != "-" {
            var changed = digits
            changed[index] = digits[index] == "7" ? "8" : "7"
            do {
                _ = try AccountKey(recoveryPhrase: String(changed))
            } catch {
                caught += 1
            }
        }
        #expect(caught == 56)
        #expect(throws: SealError.self) { try AccountKey(recoveryPhrase: "abcd-efgh") }
        #expect(throws: SealError.self) { try AccountKey(recoveryPhrase: String(phrase.dropLast()) + "u") }
        #expect(key.fingerprint.count == 16 && key.fingerprint != AccountKey.random().fingerprint)
    }

    @Test("a passphrase derives the same key for the same account on every device, another for another account; scrypt is RFC 7914's; short passphrases are refused")
    func passphrase() throws {
        // RFC 7914, section 12, the third test vector: the function the pinned parameters are given to.
        let vector = try AccountKey.scrypt(Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8), rounds: 16_384, blockSize: 8, parallelism: 1, count: 64)
        #expect(vector.map { String(format: "%02x", $0) }.joined() == "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887")
        let passphrase = "correct horse battery staple"
        let key = try AccountKey(passphrase: passphrase, account: "alice")
        #expect(try AccountKey(passphrase: passphrase, account: "alice") == key)
        #expect(try AccountKey(passphrase: passphrase, account: "bob") != key)
        // Composed and decomposed accents are one passphrase.
        #expect(try AccountKey(passphrase: "caf\u{E9} au lait tous les matins", account: "a") == AccountKey(passphrase: "cafe\u{301} au lait tous les matins", account: "a"))
        #expect(throws: SealError.self) { try AccountKey(passphrase: "short phrase", account: "alice") }
        #expect(AccountKey.passphraseRounds == 1 << 17 && AccountKey.passphraseBlockSize == 8 && AccountKey.passphraseParallelism == 1)
    }

    @Test("a sealed segment opens to its bytes, says nothing of them outside, and is the same bytes when sealed again")
    func segmentRoundTrip() throws {
        let plain = try SegmentFixtures.segment(account: Self.account, node: Self.node.rawValue, first: 1, last: 40, title: "secret-title-xyzzy")
        let sealed = try Sealer.seal(.segment, first: 1, last: 40, node: Self.node, content: plain, keyring: Self.keyring)
        let opened = try Sealer.open(sealed.bytes, kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20)
        #expect(opened.content == plain)
        #expect(opened.signer == Self.signer.publicKey && opened.link == sealed.link && opened.previous == [UInt8](repeating: 0, count: 32))
        #expect(try Sealer.seal(.segment, first: 1, last: 40, node: Self.node, content: plain, keyring: Self.keyring).bytes == sealed.bytes)
        #expect(!contains(sealed.bytes, Array("secret-title-xyzzy".utf8)) && !contains(sealed.bytes, Array("fixture".utf8)))
        // The header a carrier reads: routing only.
        let (header, _) = try SealedHeader.checkWhole(sealed.bytes, maximumBytes: 1 << 20)
        #expect(header.account == Self.account && header.node == Self.node && header.first == 1 && header.last == 40 && header.kind == .segment)
        // Sizes move in steps of the padding: 256 bytes, and 64 below 1 KiB.
        let ciphertext = try SealedHeader.checkWhole(sealed.bytes, maximumBytes: 1 << 20).ciphertext
        let padded = ciphertext.count - SealedHeader.tagByteCount
        #expect(padded % (padded < Sealer.smallObjectBytes ? Sealer.smallPadding : Sealer.padding) == 0)
        let large = try SegmentFixtures.segment(account: Self.account, node: Self.node.rawValue, first: 1, last: 2_000)
        let sealedLarge = try Sealer.seal(.segment, first: 1, last: 2_000, node: Self.node, content: large, keyring: Self.keyring)
        let largeCiphertext = try SealedHeader.checkWhole(sealedLarge.bytes, maximumBytes: 1 << 22).ciphertext.count - SealedHeader.tagByteCount
        #expect(largeCiphertext > Sealer.smallObjectBytes && largeCiphertext % Sealer.padding == 0 && largeCiphertext - large.count - 68 < Sealer.padding)
        let small = try SegmentFixtures.segment(account: Self.account, node: Self.node.rawValue, first: 1, last: 1)
        let sealedSmall = try Sealer.seal(.segment, first: 1, last: 1, node: Self.node, content: small, keyring: Self.keyring)
        let smallCiphertext = try SealedHeader.checkWhole(sealedSmall.bytes, maximumBytes: 1 << 20).ciphertext.count - SealedHeader.tagByteCount
        #expect(smallCiphertext < Sealer.smallObjectBytes && smallCiphertext % Sealer.smallPadding == 0 && smallCiphertext - small.count - 68 < Sealer.smallPadding)
        #expect(try Sealer.open(sealedSmall.bytes, kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20).content == small)
    }

    @Test("every byte changed, every cut, and every key but the account's is refused, never trapped on", arguments: propertySeeds("LOGSYNC_SEAL_SEEDS", default: 40, from: 1))
    func damageIsRefused(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let plain = try SegmentFixtures.segment(account: Self.account, node: Self.node.rawValue, first: 3, last: 3 + UInt64.random(in: 0...30, using: &rng))
        let header = try SegmentDecoder.checkEnvelope(plain)
        let sealed = try Sealer.seal(.segment, first: header.firstSequence, last: header.lastSequence, node: Self.node, content: plain, keyring: Self.keyring).bytes
        for _ in 0..<64 {
            var changed = sealed
            let index = Int.random(in: 0..<changed.count, using: &rng)
            changed[index] ^= UInt8.random(in: 1...255, using: &rng)
            #expect(throws: SealError.self, "seed \(seed): byte \(index) changed") {
                try Sealer.open(changed, kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20)
            }
            let cut = Int.random(in: 0..<sealed.count, using: &rng)
            #expect(throws: SealError.self, "seed \(seed): cut at \(cut)") {
                try Sealer.open(Array(sealed[0..<cut]), kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20)
            }
        }
        #expect(throws: SealError.self) { try Sealer.open(sealed + [0], kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20) }
        let stranger = SealKeyring(account: Self.account, accountKey: AccountKey.random(), signingKey: Self.signer)
        do {
            _ = try Sealer.open(sealed, kind: .segment, keyring: stranger, maximumBytes: 1 << 20)
            Issue.record("opened under another account key")
        } catch {
            #expect(error.code == .wrongKey && error.message.contains("recovery phrase"), "\(error)")
        }
        do {
            _ = try Sealer.open(plain, kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20)
            Issue.record("a plain segment opened as sealed")
        } catch {
            #expect(error.code == .mixed, "\(error)")
        }
        #expect(throws: SealError.self) { try Sealer.open(sealed, kind: .progressRecord, keyring: Self.keyring, maximumBytes: 1 << 20) }
    }

    @Test("a re-signed object is refused: the signature covers the link, and the signer's key is inside the ciphertext")
    func signatureBindsTheSigner() throws {
        let plain = try SegmentFixtures.segment(account: Self.account, node: Self.node.rawValue, first: 1, last: 2)
        var sealed = try Sealer.seal(.segment, first: 1, last: 2, node: Self.node, content: plain, keyring: Self.keyring).bytes
        let other = NodeSigningKey()
        let digest = Array(sealed[0..<(sealed.count - 64)])
        let forged = try OtherSigner.sign(digest, with: other)
        sealed.replaceSubrange((sealed.count - 64)..., with: forged)
        do {
            _ = try Sealer.open(sealed, kind: .segment, keyring: Self.keyring, maximumBytes: 1 << 20)
            Issue.record("a signature by another key was taken")
        } catch {
            #expect(error.code == .unauthentic, "\(error)")
        }
    }

    @Test("a sealed baseline opens across any chunking; a cut, a reordered or a changed chunk is refused", arguments: propertySeeds("LOGSYNC_SEAL_SEEDS", default: 12, from: 1))
    func baselineChunks(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let plain = (0..<Int.random(in: 1...300_000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var sealer = try BaselineSealer(transactionCount: 77, frontierDigest: 0xabc, node: Self.node, keyring: Self.keyring)
        var sealedChunks: [[UInt8]] = []
        var offset = 0
        while offset < plain.count {
            let end = min(plain.count, offset + Int.random(in: 1...70_000, using: &rng))
            sealedChunks.append(try sealer.seal(Array(plain[offset..<end]), last: end == plain.count))
            offset = end
        }
        let sealed = sealedChunks.flatMap { $0 }
        func open(_ bytes: [UInt8], pieces: Int) throws -> [UInt8] {
            var opener = BaselineOpener(node: Self.node, transactionCount: 77, frontierDigest: 0xabc, keyring: Self.keyring)
            var out: [UInt8] = []
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + max(1, bytes.count / pieces + Int.random(in: 0...13, using: &rng)))
                out += try opener.feed(Array(bytes[at..<end]))
                at = end
            }
            try opener.finish()
            return out
        }
        #expect(try open(sealed, pieces: Int.random(in: 1...50, using: &rng)) == plain, "seed \(seed)")
        #expect(throws: SealError.self) { try open(Array(sealed.dropLast(Int.random(in: 1...200, using: &rng))), pieces: 3) }
        var changed = sealed
        changed[Int.random(in: 0..<changed.count, using: &rng)] ^= 0x40
        #expect(throws: SealError.self, "seed \(seed)") { try open(changed, pieces: 5) }
        if sealedChunks.count > 2 {
            var swapped = sealedChunks
            swapped.swapAt(1, 2)
            #expect(throws: SealError.self) { try open(swapped.flatMap { $0 }, pieces: 4) }
        }
        // Nothing but the signature may follow the last chunk, and nothing is buffered past it.
        var padded = BaselineOpener(node: Self.node, transactionCount: 77, frontierDigest: 0xabc, keyring: Self.keyring)
        #expect(throws: SealError.self) { _ = try padded.feed(sealed + [UInt8](repeating: 0, count: 4_096)) }
        // The same name sealed again (the same frontier after a schema upgrade) gets another key.
        var again = try BaselineSealer(transactionCount: 77, frontierDigest: 0xabc, node: Self.node, keyring: Self.keyring)
        let other = try again.seal(Array(plain.prefix(100)), last: true)
        #expect(Array(other.prefix(80)) != Array(sealed.prefix(80)), "two baselines of one name share a salt")
        // Another baseline's name: refused before anything is handed on.
        var misnamed = BaselineOpener(node: Self.node, transactionCount: 78, frontierDigest: 0xabc, keyring: Self.keyring)
        #expect(throws: SealError.self) { try misnamed.feed(sealed) }
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
    }
}

/// Signs as a node that is not the one a sealed object names (through the public sealing API: seal
/// the same bytes under another signer and take its signature).
enum OtherSigner {
    static func sign(_ bytes: [UInt8], with key: NodeSigningKey) throws -> [UInt8] {
        let ring = SealKeyring(account: SealFormatTests.account, accountKey: SealFormatTests.key, signingKey: key)
        // A signature of another object by the other key: valid bytes, wrong message.
        return Array(try Sealer.seal(.progressRecord, node: SealFormatTests.node, content: bytes, keyring: ring).bytes.suffix(64))
    }
}
