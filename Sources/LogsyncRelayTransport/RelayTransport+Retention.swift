import Foundation
import LogsyncCore
import LogsyncHTTP
import LogsyncRelayProtocol
import LogsyncTransport

/// Bounded growth through the relay (docs/relay-protocol.md, "Progress records, baselines and pruning"):
/// the same timeouts, retries and refusals as segment pushes and pulls. A baseline is downloaded in
/// chunks straight to its reader; it is uploaded from memory (gathered first, since the relay wants its
/// size up front), at most ``RelayClientSettings/maximumBaselineBytes``.
extension RelayTransport {
    /// Baselines reach their reader in chunks of this size.
    static let baselineChunkBytes = 1 << 20
    /// The largest answer listing progress records or baselines.
    static let maximumListingBytes = 64 << 20

    /// Baseline transfers have no overall timeout (their size says little about how long they may take):
    /// they are cut when they stall for the request timeout instead.
    private var stallSeconds: Int { max(1, settings.requestTimeoutMilliseconds / 1000) }

    public func publishProgress(_ bytes: [UInt8]) throws(TransportError) {
        let response = try send(
            .putProgress, url(RelayRequestPath.progress(account: settings.account, node: node.rawValue)), body: bytes, session: requests,
            timeoutMilliseconds: settings.requestTimeoutMilliseconds)
        guard RelayStatus.isSuccess(response.status) else { throw refusal(response, doing: "publishing this node's progress record") }
    }

    public func progressRecords() throws(TransportError) -> [NodeID: [UInt8]] {
        let response = try send(
            .progress, url(RelayRequestPath.progress(account: settings.account)), session: requests,
            timeoutMilliseconds: settings.requestTimeoutMilliseconds, maximumResponseBytes: Self.maximumListingBytes)
        guard RelayRoute.progress.successes.contains(response.status) else { throw Self.error(for: response, doing: "reading progress records") }
        guard let answer = ProgressAnswer.decoded(response.body) else {
            throw TransportError(.refused, "the relay's list of progress records is not the JSON this node expects (a relay of another version?)")
        }
        var records: [NodeID: [UInt8]] = [:]
        // An entry that is not well formed is left out, as the shared folder leaves out unreadable records.
        for entry in answer.records where SegmentName.isNodeFolderName(entry.node) {
            if let bytes = Data(base64Encoded: entry.data) { records[NodeID(entry.node)] = Array(bytes) }
        }
        return records
    }

    public func publishBaseline(_ name: BaselineName, chunks next: () throws -> [UInt8]?) throws(TransportError) {
        try requireOwn(name.node, "publish a baseline of")
        var bytes: [UInt8] = []
        do {
            while let chunk = try next() {
                guard bytes.count + chunk.count <= settings.maximumBaselineBytes else {
                    throw TransportError(
                        .tooLarge, "baseline \(name) is over \(settings.maximumBaselineBytes) bytes, the most this node uploads to a relay")
                }
                bytes += chunk
            }
        } catch let error as TransportError {
            throw error
        } catch {
            throw TransportError(.io, "cannot write baseline \(name): \(error)")
        }
        let response = try send(
            .putBaseline, baselineURL(name), body: bytes, session: requests,
            timeoutMilliseconds: settings.requestTimeoutMilliseconds, stallSeconds: stallSeconds)
        guard RelayRoute.putBaseline.successes.contains(response.status) else { throw refusal(response, doing: "publishing baseline \(name)") }
    }

    public func baselines() throws(TransportError) -> [BaselineName] {
        let response = try send(
            .baselines, url(RelayRequestPath.baselines(account: settings.account)), session: requests,
            timeoutMilliseconds: settings.requestTimeoutMilliseconds, maximumResponseBytes: Self.maximumListingBytes)
        guard RelayRoute.baselines.successes.contains(response.status) else { throw Self.error(for: response, doing: "listing baselines") }
        guard let answer = BaselinesAnswer.decoded(response.body) else {
            throw TransportError(.refused, "the relay's list of baselines is not the JSON this node expects (a relay of another version?)")
        }
        return answer.baselines.compactMap { entry in
            guard SegmentName.isNodeFolderName(entry.node) else { return nil }
            return BaselineName.parse(fileName: entry.name, node: NodeID(entry.node))
        }.sorted()
    }

    public func readBaseline(_ name: BaselineName, maximumBytes: Int, consume: ([UInt8]) throws -> Void) throws(TransportError) {
        var handedOut = false
        let response = try withoutActuallyEscaping(consume) { (consume) throws(TransportError) -> CurlSession.Response in
            let stream = CurlSession.Stream(chunkBytes: Self.baselineChunkBytes, maximumBytes: maximumBytes) { chunk in
                handedOut = true
                try consume(chunk)
            }
            // Retried only until a first chunk was handed to the reader: it cannot take bytes twice.
            return try send(
                .getBaseline, baselineURL(name), session: requests, timeoutMilliseconds: settings.requestTimeoutMilliseconds,
                stallSeconds: stallSeconds, stream: stream,
                retryable: { !handedOut })
        }
        guard RelayRoute.getBaseline.successes.contains(response.status) else { throw Self.error(for: response, doing: "reading baseline \(name)") }
    }

    public func remove(_ name: SegmentName) throws(TransportError) {
        try requireOwn(name.node, "delete segment \(name.fileName) of")
        let response = try send(.deleteSegment, segmentURL(name), session: requests, timeoutMilliseconds: settings.requestTimeoutMilliseconds)
        // 404: gone already, which is what was asked.
        guard RelayStatus.isSuccess(response.status) || response.status == RelayErrorCode.notFound.status else {
            throw refusal(response, doing: "deleting segment \(name)")
        }
        state.withLock { state in
            state.index[name.node]?.removeAll { $0 == name }
            if let bytes = state.cached.removeValue(forKey: name) { state.cachedBytes -= bytes.count }
        }
    }

    public func remove(_ name: BaselineName) throws(TransportError) {
        try requireOwn(name.node, "delete baseline \(name.fileName) of")
        let response = try send(.deleteBaseline, baselineURL(name), session: requests, timeoutMilliseconds: settings.requestTimeoutMilliseconds)
        guard RelayStatus.isSuccess(response.status) || response.status == RelayErrorCode.notFound.status else {
            throw refusal(response, doing: "deleting baseline \(name)")
        }
    }

    private func baselineURL(_ name: BaselineName) -> String {
        url(RelayRequestPath.baseline(account: settings.account, node: name.node.rawValue, name: name.fileName))
    }

    /// A node writes and deletes only its own files, through a relay as in a shared folder.
    private func requireOwn(_ owner: NodeID, _ what: String) throws(TransportError) {
        guard owner == node else {
            throw TransportError(.forbidden, "refused to \(what) node \(owner): a node only writes and deletes its own files")
        }
    }
}
