import ArgumentParser
import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncPlatform

struct Account: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Which account this node syncs: switch to another, log out, list the stores, follow a switch.",
        discussion: """
            A switch saves and ships the old account's pending changes, retires its store (kept while anything in it \
            is unshipped or a process holds it), builds the new account's store from its logs, and swaps it in \
            (docs/accounts.md). Exit statuses: 0 done; 64 bad command line; 69 syncd is not running; 70 syncd refused \
            (another switch in progress, a bad account name, or a syncd without accounts); 75 the switch did not end \
            within --timeout (it goes on: follow it with 'syncctl account status').
            """,
        subcommands: [Switch.self, Logout.self, List.self, AccountStatus.self])

    struct Switch: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Switch to an account and wait until its store is built and syncing.")

        @OptionGroup var connection: Connection
        @Argument(help: "The account to switch to (letters, digits, '-', '_', '.').") var id: String
        @Option(help: "Give up waiting after this many seconds (exit 75; the switch goes on).") var timeout: Double = 600

        func run() throws {
            try connection.show(.accountSwitch, timeoutMilliseconds: Int(timeout * 1000), account: id, wait: .seconds(timeout + 5)) { response in
                guard let accounts = response.accounts else { return }
                if response.ok { print("switched to account \(id): the store is \(accounts.store)") }
                describe(accounts).dropFirst(response.ok ? 1 : 0).forEach { print($0) }
            }
        }
    }

    struct Logout: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log out: ship the account's changes, then continue on the local store.",
            discussion: "--keep (the default) makes the local store a copy of the account's data; --remove starts it empty. The account's own store is retired either way.")

        @OptionGroup var connection: Connection
        @Flag(exclusivity: .exclusive, help: "What the local store holds after the logout.") var data: LogoutChoice = .keep
        @Option(help: "Give up waiting after this many seconds (exit 75; the logout goes on).") var timeout: Double = 600

        func run() throws {
            try connection.show(.accountLogout, timeoutMilliseconds: Int(timeout * 1000), logout: data.rawValue, wait: .seconds(timeout + 5)) { response in
                guard let accounts = response.accounts else { return }
                if response.ok { print("logged out: the local store is \(accounts.store)") }
                describe(accounts).dropFirst(response.ok ? 1 : 0).forEach { print($0) }
            }
        }
    }

    enum LogoutChoice: String, EnumerableFlag {
        case keep, remove
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The stores on this node: the active one, the local store, the retained ones.")

        @OptionGroup var connection: Connection

        func run() throws {
            let accounts = try connection.required(connection.request(.accountList).accounts, "accounts")
            if connection.json { return connection.printJSON(accounts.stores) }
            for store in accounts.stores {
                print("\(store.role.padding(toLength: 9, withPad: " ", startingAt: 0)) \((store.account ?? "(local)").padding(toLength: 16, withPad: " ", startingAt: 0)) \(store.path)")
            }
        }
    }

    struct AccountStatus: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status", abstract: "The active account, the switch in progress (its step and rebuild progress), the retained stores.")

        @OptionGroup var connection: Connection

        func run() throws {
            let accounts = try connection.required(connection.request(.accountStatus).accounts, "accounts")
            if connection.json { return connection.printJSON(accounts) }
            describe(accounts).forEach { print($0) }
        }
    }
}

/// The lines `status` and the `account` commands print about accounts.
func describe(_ accounts: AccountReport) -> [String] {
    var lines = ["active     \(accounts.active.map { "account \($0)" } ?? "the local store (logged out)") — \(accounts.store)"]
    if let run = accounts.switching {
        var line = "switching  \(run.from ?? "(local)") → \(run.to ?? "(local)"), step \(run.step), since \(UTCTime.iso8601(milliseconds: run.startedAt))"
        if run.appliedTransactions > 0 || run.availableTransactions != nil {
            line += ", \(run.appliedTransactions)\(run.availableTransactions.map { " of \($0)" } ?? "") transactions applied"
        }
        lines.append(line)
        if let waiting = run.waiting { lines.append("  \(waiting)") }
    }
    for store in accounts.retained { lines.append("retained   \(store.account ?? "(local)") \(store.path): \(store.reason ?? "kept")") }
    return lines
}
