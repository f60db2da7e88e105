import Foundation
import LogsyncHTTP
import LogsyncTransport
import Synchronization

/// A failed request to Syncthing's REST API: what was asked, and what went wrong.
package struct SyncthingError: Error, Sendable, CustomStringConvertible {
    package enum Code: Sendable {
        /// No answer: refused, reset, timed out.
        case unreachable
        /// Syncthing answered with an error status (a wrong API key is 403 "CSRF Error").
        case refused
        /// The answer was not what Syncthing 1.x sends, or names no folder that fits.
        case unexpected
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}

/// A folder of Syncthing's configuration (`/rest/config/folders`): its id and where it is on disk.
package struct SyncthingFolder: Sendable, Decodable, Hashable {
    package var id: String
    package var path: String

    package init(id: String, path: String) {
        self.id = id
        self.path = path
    }
}

/// The few calls of Syncthing's REST API logsync makes (`docs/carriers.md`), with the API key in the
/// `X-API-Key` header, each bounded by `timeoutMilliseconds`. One request at a time (one libcurl handle,
/// kept open between requests).
package final class SyncthingClient: Sendable {
    package let url: String
    /// Replaced by ``use(apiKey:)`` (a key rotated in its file, then a reload).
    private let apiKey: Mutex<String>
    private let timeoutMilliseconds: Int
    private let session = CurlSession()

    package init(url: String, apiKey: String, timeoutMilliseconds: Int = 2_000) {
        self.url = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.apiKey = Mutex(apiKey)
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// Sends `apiKey` from the next request on; returns whether it differs from the one in use.
    @discardableResult
    package func use(apiKey: String) -> Bool {
        self.apiKey.withLock { current in
            defer { current = apiKey }
            return current != apiKey
        }
    }

    /// `GET /rest/system/ping`: whether Syncthing answers (and accepts the key).
    package func ping() throws(SyncthingError) {
        _ = try request("GET", "/rest/system/ping")
    }

    /// `GET /rest/config/folders`.
    package func folders() throws(SyncthingError) -> [SyncthingFolder] {
        try decode([SyncthingFolder].self, try request("GET", "/rest/config/folders"), from: "/rest/config/folders")
    }

    /// `POST /rest/db/scan?folder=ID&sub=PATH`: scans `sub` of the folder now (the whole folder when `sub`
    /// is empty), and answers once the scan is done; other devices then learn of what changed.
    package func scan(folder: String, sub: String) throws(SyncthingError) {
        var path = "/rest/db/scan?folder=" + Self.encoded(folder)
        if !sub.isEmpty { path += "&sub=" + Self.encoded(sub) }
        _ = try request("POST", path)
    }

    /// `GET /rest/system/connections`: which devices are connected now, by device id.
    package func connections() throws(SyncthingError) -> [String: Bool] {
        struct Connection: Decodable { var connected: Bool }
        struct Answer: Decodable { var connections: [String: Connection] }
        return try decode(Answer.self, try request("GET", "/rest/system/connections"), from: "/rest/system/connections")
            .connections.mapValues(\.connected)
    }

    /// One request; the body of a 2xx answer, else a ``SyncthingError`` saying what happened.
    package func request(_ method: String, _ path: String) throws(SyncthingError) -> [UInt8] {
        let response: CurlSession.Response
        do {
            response = try session.perform(
                method: method, url: url + path, headers: ["X-API-Key: \(apiKey.withLock { $0 })"], body: method == "GET" ? nil : [],
                timeoutMilliseconds: timeoutMilliseconds, connectTimeoutMilliseconds: timeoutMilliseconds, maximumResponseBytes: 4 << 20)
        } catch {
            throw SyncthingError(.unreachable, "Syncthing at \(url) did not answer \(method) \(CurlSession.redacted(path)): \(error.message)")
        }
        guard (200..<300).contains(response.status) else {
            let text = String(decoding: response.body.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let hint = response.status == 403 || response.status == 401 ? " (is the API key right?)" : ""
            throw SyncthingError(.refused, "Syncthing at \(url) answered \(response.status) to \(method) \(CurlSession.redacted(path)): \(text)\(hint)")
        }
        return response.body
    }

    private func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8], from path: String) throws(SyncthingError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw SyncthingError(.unexpected, "Syncthing's answer to \(path) is not the JSON Syncthing 1.x sends: \(error)")
        }
    }

    /// A query value, percent-encoded (folder ids and paths may hold `&`, `+`, `=`, spaces).
    static func encoded(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&+=?#")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}
