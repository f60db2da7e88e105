import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import LogsyncCore
import LogsyncRelayProtocol
import LogsyncTransport
import NIOCore

/// The routes of bounded growth (docs/relay-protocol.md, "Progress records, baselines and pruning"):
/// progress records, baselines, and deleting a node's own segments and baselines.
extension RelayAPI {
    /// Baselines are stored and sent in chunks of this size: an upload or a download holds one in memory.
    static let baselineChunkBytes = 1 << 20

    // MARK: Progress records

    func putProgress(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        try await authorize(request, account: account, writingAs: node, "publish progress records")
        let length = try contentLength(
            request, what: "progress record", maximum: ProgressRecord.maximumByteCount, key: "a progress record's limit of 1 MiB",
            tooLarge: .progressTooLarge)
        let bytes = try await withBuffered(length) { () async throws(RelayError) in try await readBody(request, context, length: length) }
        // A sealed account's record shows only its routing header (docs/security.md).
        let record: (account: String, node: NodeID, schemaVersion: Int?)
        do {
            if SealedHeader.isSealed(bytes) {
                let sealed = try SealedHeader.checkWhole(bytes, maximumBytes: ProgressRecord.maximumByteCount).header
                guard sealed.kind == .progressRecord else { throw SegmentError(.malformed, at: "byte 8", "a sealed \(sealed.kind), not a progress record") }
                record = (sealed.account, sealed.node, nil)
            } else {
                let plain = try ProgressRecord(decoding: bytes)
                record = (plain.account, plain.node, plain.schemaVersion)
            }
        } catch {
            throw RelayError(.malformedProgress, "the body is not an intact progress record: \(error)")
        }
        guard record.account == account, record.node == node else {
            throw RelayError(
                .headerMismatch,
                "the progress record names account \(RelayNames.quoted(record.account)), node \(record.node); the route says account \(RelayNames.quoted(account)), node \(node)")
        }
        try await storage.putProgress(ProgressPut(account: account, node: node, bytes: bytes, defaultQuotaBytes: settings.defaultQuotaBytes))
        if let version = record.schemaVersion { schemaVersions.record(account: account, node: node.rawValue, version: version, fromProgress: true) }
        metrics.add("relay_progress_records_total")
        return Response(status: Self.status(RelayStatus.done))
    }

    func progress(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        try await authorize(request, account: account)
        let records = try await storage.progressRecords(account: account)
        return Self.json(
            ProgressAnswer(records: records.map { ProgressAnswer.Record(node: $0.node.rawValue, size: $0.bytes.count, data: Data($0.bytes).base64EncodedString()) }))
    }

    // MARK: Baselines

    private func baselineParameter(_ context: RelayRequestContext, node: NodeID) throws(RelayError) -> BaselineName {
        let text = context.parameters.get("name") ?? ""
        guard let name = BaselineName.parse(fileName: text, node: node) else {
            throw RelayError(
                .badRequest, "the baseline in the path \(RelayNames.quoted(text)) is not COUNT-DIGEST.lsbase (20 decimal digits, 16 lowercase hex digits)")
        }
        return name
    }

    func listBaselines(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        try await authorize(request, account: account)
        let stored = try await storage.baselines(account: account)
        return Self.json(BaselinesAnswer(baselines: stored.map { BaselinesAnswer.Baseline(node: $0.node.rawValue, name: $0.name, size: $0.size) }))
    }

    /// Streams the body into storage chunk by chunk, then stores the baseline under its name in one
    /// transaction: durable when answered, and nothing of it visible before.
    func putBaseline(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        let name = try baselineParameter(context, node: node)
        try await authorize(request, account: account, writingAs: node, "publish baselines")
        let length = try contentLength(
            request, what: "baseline", maximum: settings.maximumBaselineBytes, key: "max_baseline_bytes", tooLarge: .baselineTooLarge)
        guard length > 0 else { throw RelayError(.badRequest, "a baseline is never empty") }
        // A stored baseline of that name with another size cannot hold the same bytes: refused unread.
        if let stored = try await storage.baseline(account: account, node: node, name: name.fileName), stored.size != Int64(length) {
            throw RelayError(
                .conflict,
                "baseline \(name) is stored already with \(stored.size) bytes, not \(length): a baseline's name stands for its frontier, whose state has one encoding")
        }
        try await reserveQuota(account: account, bytes: Int64(length))
        defer { pendingUploads.withLock { $0[account, default: 0] -= Int64(length); if $0[account] == 0 { $0[account] = nil } } }
        let upload = try await storage.beginBaseline(account: account, node: node, name: name.fileName)
        do {
            let progress = UploadProgress()
            try await withBuffered(min(length, Self.baselineChunkBytes)) { () async throws(RelayError) in
                try await streamBody(request, context, length: length, chunkBytes: Self.baselineChunkBytes) { [storage] chunk throws(RelayError) in
                    let index = progress.add(chunk)
                    try await storage.appendBaselineChunk(upload: upload, index: index, bytes: chunk)
                }
            }
            let (chunks, digest) = progress.finish()
            let stored = try await storage.finishBaseline(
                BaselineFinish(
                    account: account, node: node, name: name.fileName, upload: upload, chunks: chunks, size: Int64(length), digest: digest,
                    defaultQuotaBytes: settings.defaultQuotaBytes))
            metrics.add("relay_baselines_total{outcome=\"\(stored ? "stored" : "duplicate")\"}")
            if stored { metrics.add("relay_baseline_bytes_total", Double(length)) }
            return Self.json(BaselineStored(stored: stored, size: Int64(length)), status: stored ? RelayStatus.stored : RelayStatus.unchanged)
        } catch {
            await storage.abandonBaseline(upload: upload)
            throw error
        }
    }

    /// Refuses an upload that would take the account over its quota, counting the uploads in flight,
    /// before its body is read; the reservation lasts until the upload ends.
    private func reserveQuota(account: String, bytes: Int64) async throws(RelayError) {
        guard let usage = try await storage.usage(account: account) else { throw RelayError(.forbidden, "this token is not valid for the account in the path") }
        let quota = usage.quota ?? settings.defaultQuotaBytes
        let refusal: RelayError? = pendingUploads.withLock { pending in
            let total = usage.used + pending[account, default: 0] + bytes
            guard total <= quota else {
                return RelayError(
                    .quotaExceeded,
                    "the account \(RelayNames.quoted(account)) would hold \(total) bytes with this baseline (and the uploads in flight); its quota is \(quota) (quota_bytes, counting segments, baselines and progress records): nothing was stored")
            }
            pending[account, default: 0] += bytes
            return nil
        }
        if let refusal { throw refusal }
    }

    func getBaseline(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        let name = try baselineParameter(context, node: node)
        try await authorize(request, account: account)
        guard let stored = try await storage.baseline(account: account, node: node, name: name.fileName) else {
            throw RelayError(.notFound, "the relay has no baseline \(name) in this account")
        }
        var headers = HTTPFields()
        headers[.contentType] = RelayHeader.octetStream
        // One chunk at a time from the database; a baseline deleted meanwhile ends the answer short (the
        // connection is closed), which the client sees as a failed transfer.
        let storage = self.storage
        let body = ResponseBody(contentLength: Int(stored.size)) { writer in
            for index in 0..<stored.chunks {
                guard let chunk = try await storage.baselineChunk(blob: stored.blob, index: index) else {
                    throw RelayError(.notFound, "baseline \(name) was deleted while it was being sent")
                }
                try await writer.write(ByteBuffer(bytes: chunk))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    func deleteBaseline(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        let name = try baselineParameter(context, node: node)
        try await authorize(request, account: account, writingAs: node, "delete baselines")
        if try await storage.deleteBaseline(account: account, node: node, name: name.fileName) {
            metrics.add("relay_deleted_baselines_total")
        }
        return Response(status: Self.status(RelayStatus.done))
    }

    // MARK: Pruning

    /// Deletes one of a node's segments. The other segments keep their arrivals, so every puller's
    /// cursor stays valid: a puller not yet past the deleted one simply does not get it.
    func deleteSegment(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        let (first, last) = try rangeParameter(context)
        try await authorize(request, account: account, writingAs: node, "delete segments")
        if try await storage.deleteSegment(account: account, node: node, firstSequence: first, lastSequence: last) {
            board.noteDeletion()
            metrics.add("relay_deleted_segments_total")
        }
        return Response(status: Self.status(RelayStatus.done))
    }
}

/// The chunks of an upload so far: their count and the SHA-256 of their bytes.
private final class UploadProgress: @unchecked Sendable {
    // Used by one task at a time (the body's reader), then read once it is done.
    private var hasher = SHA256()
    private var count = 0

    /// Adds a chunk and returns its index.
    func add(_ chunk: [UInt8]) -> Int {
        hasher.update(data: chunk)
        count += 1
        return count - 1
    }

    func finish() -> (chunks: Int, digest: [UInt8]) { (count, Array(hasher.finalize())) }
}
