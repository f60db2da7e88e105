import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTransport

@main
struct Logsync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync",
        abstract: "Inspect and write logsync stores: SQLite files with persistent history.",
        subcommands: [Tour.self, Exec.self, History.self, Watch.self, Hold.self, Purge.self, Sync.self]
    )
}

/// Options shared by the commands that open a store.
struct StoreOptionGroup: ParsableArguments {
    @Option(name: .long, help: "Path of the store file.")
    var store: String

    @Option(name: .long, help: "Schema declaration as JSON (see docs/history.md); default: the schema registered in the store.")
    var schema: String?

    func open() throws -> Store {
        guard let schema else {
            guard let registered = try Store.registeredSchema(at: store) else {
                throw ValidationError("\(store) is not a logsync store yet: give --schema to create it")
            }
            return try Store(path: store, schema: registered)
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: schema))
        } catch {
            throw ValidationError("cannot read schema file \(schema): \(error.localizedDescription)")
        }
        return try Store(path: store, schema: try Schema(json: data))
    }
}

/// Exit codes shared by the commands, so scripts can tell failures apart.
enum ExitCodes {
    static let storeError: Int32 = 3
    static let schemaError: Int32 = 4
    /// The shared folder or another transport failed (missing folder, full disk, a conflicting file).
    static let transportError: Int32 = 5
}

extension ParsableCommand {
    /// Runs `body`, turning store and schema errors into one clear line on stderr and a distinct exit code.
    func reportingErrors(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(error.code == .schema ? ExitCodes.schemaError : ExitCodes.storeError)
        } catch let error as SchemaError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(ExitCodes.schemaError)
        } catch let error as TransportError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(ExitCodes.transportError)
        }
    }
}

/// Prints a line and pushes it out at once: tests read these lines from a pipe while the process runs.
func printFlushed(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
