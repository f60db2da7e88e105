import Foundation
import LogsyncCore

extension Store {
    /// The schema registered in the store file at `path`, or nil when there is no store there (or it was
    /// never registered). Lets a daemon open a store without being told its schema.
    public static func registeredSchema(at path: String) throws -> Schema? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let connection = try Connection(path: path, options: [.readOnly])
            guard try connection.scalar("SELECT 1 FROM sqlite_master WHERE name = '_ls_meta'") != nil,
                case .text(let json)? = try connection.scalar("SELECT value FROM _ls_meta WHERE key = 'schema'")
            else { return nil }
            return try JSONDecoder().decode(Schema.self, from: Data(json.utf8))
        } catch {
            throw storeError(error, path: path, doing: "reading the registered schema")
        }
    }
}
