import ArgumentParser
import Foundation
import LogsyncPlatform
import LogsyncSeal

/// `logsync seal`: an account's key for sealed logs (`docs/security.md`).
struct SealCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Make or check the key of a sealed account.",
        subcommands: [New.self, Derive.self, Fingerprint.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new account key and write its recovery phrase to FILE (owner-only, never overwritten).",
            discussion: """
                The phrase is the account's key: every device of the account needs it (syncd reads it from \
                [seal] key_file or the systemd credential logsync-account-key), and whoever has it can read \
                the account's logs. Keep a copy offline: a lost phrase cannot be recovered by anyone. Prints \
                the key's fingerprint, which every device shows the same.
                """)

        @Argument(help: "The file to write the recovery phrase to (created; an existing file is refused).")
        var file: String

        @Flag(help: "Also print the phrase, to copy it by hand to another device.")
        var show = false

        func run() throws {
            try SealCommand.write(AccountKey.random(), what: "a new account key", to: file, show: show)
        }
    }

    struct Derive: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Derive an account key from a passphrase read on standard input, and write its recovery phrase to FILE.",
            discussion: """
                For people who would rather remember a passphrase than keep a phrase: every device given the \
                same passphrase for the same account derives the same key (scrypt, N = 2^17, r = 8, p = 1, \
                salted with the account's name; docs/security.md). The passphrase is read from the first \
                line of standard input, never from the command line, and has at least 16 characters. Whoever \
                guesses it reads the account: prefer `logsync seal new` unless the passphrase is long and \
                random (several words).
                """)

        @Argument(help: "The file to write the recovery phrase to (created; an existing file is refused).")
        var file: String

        @Option(help: "The account the key is for ([sync] account in syncd.toml): part of the derivation.")
        var account: String

        @Flag(help: "Also print the phrase.")
        var show = false

        func run() throws {
            guard let line = readLine(strippingNewline: true) else {
                throw ValidationError("no passphrase on standard input (give it on the first line)")
            }
            let key: AccountKey
            do {
                key = try AccountKey(passphrase: line, account: account)
            } catch {
                throw ValidationError("\(error)")
            }
            try SealCommand.write(key, what: "the key derived for account '\(account)'", to: file, show: show)
        }
    }

    /// Writes `key`'s recovery phrase to a new owner-only `file` and prints its fingerprint (and the phrase
    /// with `show`).
    static func write(_ key: AccountKey, what: String, to file: String, show: Bool) throws {
        do {
            try DurableFiles.createPrivate(file, with: Array((key.recoveryPhrase + "\n").utf8))
        } catch {
            throw ValidationError("cannot create \(file): \(error) (an existing key file is never overwritten)")
        }
        print("wrote the recovery phrase of \(what) to \(file) (mode 0600)")
        print("fingerprint: \(key.fingerprint)")
        if show { print("recovery phrase: \(key.recoveryPhrase)") }
    }

    struct Fingerprint: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the fingerprint of the account key whose recovery phrase FILE holds, to compare devices.")

        @Argument(help: "A file holding a recovery phrase.")
        var file: String

        func run() throws {
            guard let data = FileManager.default.contents(atPath: file), data.count <= 4_096 else {
                throw ValidationError("cannot read \(file)")
            }
            do {
                print(try AccountKey(recoveryPhrase: String(decoding: data, as: UTF8.self)).fingerprint)
            } catch {
                FileHandle.standardError.write(Data("logsync: \(file): \(error)\n".utf8))
                throw ExitCode(ExitStatus.dataError)
            }
        }
    }
}
