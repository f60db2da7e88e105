import ArgumentParser
import Foundation
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncTransport

@main
struct Logsync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync",
        abstract: "Inspect and write logsync stores: SQLite files with persistent history.",
        discussion: """
            Exit statuses (docs/exit-codes.md): 0 done; 1 the operation failed (a write refused by a constraint, \
            an unsafe schema change); \
            64 bad command line; 65 the file is not a usable store or the schema is invalid; 73 the store's folder \
            is missing or not writable; 74 the shared folder failed; 75 another writer held the store too long.
            """,
        version: LogsyncVersion.current,
        subcommands: [Tour.self, Exec.self, History.self, Watch.self, Hold.self, Purge.self, Sync.self, SchemaCommand.self, SealCommand.self]
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

extension ParsableCommand {
    /// Runs `body`, turning store, schema and transport errors into one clear line on stderr and their exit
    /// status.
    func reportingErrors(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(error.exitStatus)
        } catch let error as SchemaError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(ExitStatus.dataError)
        } catch let error as TransportError {
            FileHandle.standardError.write(Data("logsync: \(error)\n".utf8))
            throw ExitCode(ExitStatus.ioError)
        }
    }
}

/// Prints a line and pushes it out at once: tests read these lines from a pipe while the process runs.
func printFlushed(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
