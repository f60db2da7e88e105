import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform

/// `logsync schema`: the app's schema across releases (`docs/schema-evolution.md`).
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Check a schema change before it ships.",
        subcommands: [Check.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Whether moving from OLD to NEW is safe while devices run both releases.",
            discussion: """
                Prints what NEW adds, every change a store would refuse to migrate with why and which releases \
                do it instead, and notes on what differs while both releases run. Exit statuses: 0 safe; 1 unsafe; \
                64 a file cannot be read; 65 a file is not a valid schema declaration (docs/history.md).
                """)

        @Argument(help: "The schema of the release devices run now (JSON, docs/history.md).")
        var old: String

        @Argument(help: "The schema of the next release.")
        var new: String

        @Flag(help: "Print the findings as JSON.")
        var json = false

        func run() throws {
            let check = SchemaCheck(from: try Self.load(old), to: try Self.load(new))
            if json {
                let findings = check.findings.map {
                    ["severity": $0.severity.rawValue, "location": $0.location, "reason": $0.reason, "advice": $0.advice]
                }
                let object: [String: Any] = [
                    "safe": check.isSafe, "from": check.old.version, "to": check.new.version, "adds": check.added, "findings": findings,
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print(check.report)
            }
            if !check.isSafe { throw ExitCode(ExitStatus.failed) }
        }

        static func load(_ path: String) throws -> Schema {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw ValidationError("cannot read \(path): \(error.localizedDescription)")
            }
            do {
                return try Schema(json: data)
            } catch {
                FileHandle.standardError.write(Data("logsync: \(path) is not a valid schema declaration: \(error)\n".utf8))
                throw ExitCode(ExitStatus.dataError)
            }
        }
    }
}
