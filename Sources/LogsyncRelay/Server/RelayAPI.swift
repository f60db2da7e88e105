import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import LogsyncCore
import LogsyncRelayProtocol
import NIOCore
import Synchronization

/// The relay's routes, all under `/v1` (docs/relay-protocol.md, docs/relay-openapi.yaml).
final class RelayAPI: Sendable {
    let storage: any MailboxStorage & CredentialStorage & RetentionStorage
    let settings: RelaySettings
    let board: ArrivalBoard
    let metrics: RelayMetrics
    /// Each node's schema version as its pushes' headers say, for `/metrics`.
    let schemaVersions = SchemaVersions()
    let admission: ConnectionAdmission
    let logger: Logger
    /// Bytes of request bodies held in memory now, bounded by ``RelaySettings/maximumBufferedBytes``.
    let buffered = Atomic<Int>(0)
    /// The deadlines of the bodies being read (`request_timeout_s`).
    let deadlines = BodyDeadlines()
    /// Pull answers already encoded, for the many long-polls one push wakes with the same question: valid
    /// while the account's latest announced arrival is the one they were made at and no segment was
    /// deleted since (``ArrivalBoard/deletions``). At most ``pageCacheBytes`` in all.
    private let pages = Mutex<(entries: [PageKey: (latest: UInt64, deletions: Int, body: ByteBuffer, count: Int)], bytes: Int)>(([:], 0))
    /// Pages being read now, by what they are read for: the requests that ask the same wait for one read.
    private let inFlight = Mutex<[FlightKey: Task<(body: ByteBuffer, count: Int)?, any Error>]>([:])
    /// Bytes of baseline uploads in flight per account, counted against its quota before their bodies
    /// are read.
    let pendingUploads = Mutex<[String: Int64]>([:])
    static let pageCacheBytes = 32 << 20

    private struct PageKey: Hashable {
        var account: String
        var after: UInt64
        var limit: Int
    }

    init(
        storage: any MailboxStorage & CredentialStorage & RetentionStorage, settings: RelaySettings, metrics: RelayMetrics, admission: ConnectionAdmission,
        logger: Logger
    ) {
        self.storage = storage
        self.admission = admission
        self.settings = settings
        self.board = ArrivalBoard(maximumWaiters: settings.maximumWaitingPolls)
        self.metrics = metrics
        self.logger = logger
    }

    /// Registers every route of ``RelayRoute`` (the protocol's one list), and a 405 for the other methods
    /// on its paths.
    func register(on router: Router<RelayRequestContext>) {
        for route in RelayRoute.allCases {
            router.on(RouterPath(route.path.template), method: Self.method(route.method)) { [self] request, context in
                try await respond(route, request, context)
            }
        }
        // Other methods on these paths: 405 with the methods that are allowed, rather than 404.
        let methods: [HTTPRequest.Method] = [.get, .put, .post, .delete, .patch, .options, .trace] + [HTTPRequest.Method("QUERY")].compactMap { $0 }
        for path in RelayPath.allCases {
            let allowed = path.methods.map(Self.method)
            let allow = allowed.map(\.rawValue).joined(separator: ", ")
            for method in methods where !allowed.contains(method) {
                router.on(RouterPath(path.template), method: method) { _, _ -> Response in
                    throw RelayError(.methodNotAllowed, "this route answers \(allow) only", allow: allow)
                }
            }
        }
    }

    /// A success's status (``RelayStatus``), with its reason phrase.
    static func status(_ code: Int) -> HTTPResponse.Status {
        switch code {
        case 200: .ok
        case 201: .created
        case 204: .noContent
        default: HTTPResponse.Status(code: code)
        }
    }

    static func method(_ method: RelayMethod) -> HTTPRequest.Method {
        switch method {
        case .get: .get
        case .put: .put
        case .delete: .delete
        }
    }

    /// Answers a request the router matched to `route`.
    private func respond(_ route: RelayRoute, _ request: Request, _ context: RelayRequestContext) async throws -> Response {
        switch route {
        case .health: return Self.json(HealthAnswer(relay: storage.identity))
        case .ready:
            guard await storage.isReady() else { throw RelayError(.unavailable, "the relay's storage is not ready", retryAfter: 5) }
            return Self.json(StatusAnswer(status: "ready"))
        case .metrics: return await metricsText()
        case .push:
            return try await push(
                request, context, account: context.parameters.get("account") ?? "", node: context.parameters.get("node") ?? "",
                range: context.parameters.get("range") ?? "")
        case .fetch: return try await fetch(request, context)
        case .pull: return try await pull(request, context)
        case .nodes: return try await nodes(request, context)
        case .putProgress: return try await putProgress(request, context)
        case .progress: return try await progress(request, context)
        case .baselines: return try await listBaselines(request, context)
        case .putBaseline: return try await putBaseline(request, context)
        case .getBaseline: return try await getBaseline(request, context)
        case .deleteBaseline: return try await deleteBaseline(request, context)
        case .deleteSegment: return try await deleteSegment(request, context)
        }
    }

    private func metricsText() async -> Response {
        var headers = HTTPFields()
        headers[.contentType] = RelayHeader.metricsText
        let storageGauges = await (storage as? any StorageGauges)?.gauges() ?? []
        let versions = schemaVersions.perAccount
        let text = metrics.text(
            gauges: [
                ("relay_waiting_polls", "Long-polls waiting now.", Double(board.waiting)),
                ("relay_buffered_body_bytes", "Request body bytes held in memory now.", Double(buffered.load(ordering: .relaxed))),
                ("relay_connections", "Connections served now (max_connections at most).", Double(admission.served)),
                ("relay_connections_refused_total", "Connections answered 503 because max_connections were served.", Double(admission.refused)),
                ("relay_schema_nodes_dropped", "Nodes whose schema version is not tracked because 100,000 are.", Double(schemaVersions.dropped)),
            ] + storageGauges,
            families: [
                ("relay_account_oldest_schema", "Per account, the oldest schema version its nodes pushed under since this relay started.",
                 versions.map { ([("account", $0.account)], Double($0.oldest)) }),
                ("relay_account_newest_schema", "Per account, the newest schema version its nodes pushed under since this relay started.",
                 versions.map { ([("account", $0.account)], Double($0.newest)) }),
            ])
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: Routes

    /// The path's parameters come from the router or, for most pushes, from ``PushRoute``.
    func push(_ request: Request, _ context: RelayRequestContext, account: String, node: String, range: String) async throws -> Response {
        let account = try accountParameter(account)
        let node = try nodeParameter(node)
        let (first, last) = try rangeParameter(range)
        try await authorize(request, account: account, writingAs: node, "push")
        let length = try contentLength(
            request, what: "segment", maximum: settings.maximumSegmentBytes, key: "max_segment_bytes", tooLarge: .tooLarge)
        let bytes = try await withBuffered(length) { () async throws(RelayError) in try await readBody(request, context, length: length) }
        // A sealed account's segment shows only its routing header (docs/security.md): its schema
        // version is inside, so it counts in no schema gauge.
        let header: (account: String, node: NodeID, first: UInt64, last: UInt64, schemaVersion: Int?)
        do {
            if SealedHeader.isSealed(bytes) {
                let sealed = try SealedHeader.checkWhole(bytes, maximumBytes: settings.maximumSegmentBytes).header
                guard sealed.kind == .segment else { throw SegmentError(.malformed, at: "byte 8", "a sealed \(sealed.kind), not a segment") }
                header = (sealed.account, sealed.node, sealed.first, sealed.last, nil)
            } else {
                let plain = try SegmentDecoder.checkEnvelope(bytes, limits: SegmentLimits(maxSegmentBytes: settings.maximumSegmentBytes))
                header = (plain.account, plain.node, plain.firstSequence, plain.lastSequence, plain.schemaVersion)
            }
        } catch {
            throw RelayError(.malformedSegment, "the body is not an intact segment: \(error)")
        }
        guard header.account == account, header.node == node, header.first == first, header.last == last else {
            throw RelayError(
                .headerMismatch,
                "the segment's header says account \(RelayNames.quoted(header.account)), node \(header.node), sequences \(header.first)-\(header.last); the route says account \(RelayNames.quoted(account)), node \(node), sequences \(first)-\(last)")
        }
        let outcome = try await storage.push(
            SegmentPush(
                account: account, node: node, firstSequence: first, lastSequence: last, bytes: bytes,
                defaultQuotaBytes: settings.defaultQuotaBytes))
        if let version = header.schemaVersion { schemaVersions.record(account: account, node: node.rawValue, version: version) }
        switch outcome {
        case .stored(let arrival):
            board.announce(account: account, arrival: arrival)
            metrics.add("relay_pushes_total{outcome=\"stored\"}", 1, "relay_stored_bytes_total", Double(bytes.count))
            return Self.pushAnswer(stored: true, arrival: arrival)
        case .duplicate(let arrival):
            metrics.add("relay_pushes_total{outcome=\"duplicate\"}")
            return Self.pushAnswer(stored: false, arrival: arrival)
        }
    }

    /// A push's answer, `{"arrival":N,"stored":B}`: the bytes ``PushAnswer/encoded()`` makes, written
    /// directly (the encoder cost a push more than its CRC and SHA-256; `RelayProtocolDocumentTests`
    /// compares the two).
    static func pushAnswer(stored: Bool, arrival: UInt64) -> Response {
        Response(
            status: status(stored ? RelayStatus.stored : RelayStatus.unchanged), headers: jsonHeaders,
            body: .init(byteBuffer: ByteBuffer(string: pushAnswerText(stored: stored, arrival: arrival))))
    }

    static func pushAnswerText(stored: Bool, arrival: UInt64) -> String {
        stored ? "{\"arrival\":\(arrival),\"stored\":true}" : "{\"arrival\":\(arrival),\"stored\":false}"
    }

    static let jsonHeaders: HTTPFields = [.contentType: RelayHeader.json]

    /// A body of `length` bytes (checked against its limit already), whole: it must arrive within
    /// `request_timeout_s`.
    func readBody(_ request: Request, _ context: RelayRequestContext, length: Int) async throws(RelayError) -> [UInt8] {
        var whole: [UInt8] = []
        try await streamBody(request, context, length: length, chunkBytes: max(length, 1)) { chunk throws(RelayError) in whole = chunk }
        return whole
    }

    /// Reads a body of `length` bytes and hands it to `consume` in chunks of `chunkBytes` (the last one
    /// shorter): memory holds one chunk. Each chunk must arrive within `request_timeout_s` (the time
    /// `consume` takes does not count), else 408 and the connection is closed. The body is read in the
    /// request's own task; ``BodyDeadlines`` cuts it when it is late.
    func streamBody(
        _ request: Request, _ context: RelayRequestContext, length: Int, chunkBytes: Int,
        _ consume: ([UInt8]) async throws(RelayError) -> Void
    ) async throws(RelayError) {
        let timeout = Duration.seconds(settings.requestTimeoutSeconds)
        let watch = deadlines.watch(context.channel, until: .now + timeout)
        defer { deadlines.end(watch) }
        let late = { [settings] in
            RelayError(.timeout, "the body did not arrive within \(settings.requestTimeoutSeconds) seconds (request_timeout_s)")
        }
        var chunk: [UInt8] = []
        var total = 0
        do {
            for try await buffer in request.body {
                guard total + buffer.readableBytes <= length else {
                    throw RelayError(.badRequest, "the body is longer than its Content-Length (\(length))")
                }
                total += buffer.readableBytes
                var rest = buffer.readableBytesView[...]
                while !rest.isEmpty {
                    if chunk.isEmpty { chunk.reserveCapacity(min(chunkBytes, length - total + rest.count)) }
                    let taken = min(rest.count, chunkBytes - chunk.count)
                    chunk.append(contentsOf: rest.prefix(taken))
                    rest = rest.dropFirst(taken)
                    // A full chunk is handed over here unless it ends the body (then after the loop).
                    if chunk.count == chunkBytes, !rest.isEmpty || total < length {
                        deadlines.extend(watch, until: nil)
                        try await consume(chunk)
                        chunk = []
                        deadlines.extend(watch, until: .now + timeout)
                    }
                }
            }
        } catch let error as RelayError {
            throw deadlines.timedOut(watch) ? late() : error
        } catch {
            throw deadlines.timedOut(watch) ? late() : RelayError(.badRequest, "the body could not be read: \(error)")
        }
        guard total == length else {
            throw deadlines.timedOut(watch) ? late() : RelayError(.badRequest, "the body ended after \(total) of \(length) bytes")
        }
        // Read whole: the last chunk's work is not timed either.
        guard !deadlines.end(watch) else { throw late() }
        if !chunk.isEmpty { try await consume(chunk) }
    }

    private func fetch(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        let node = try nodeParameter(context)
        let (first, last) = try rangeParameter(context)
        _ = try await authorize(request, account: account)
        guard let bytes = try await storage.segment(account: account, node: node, firstSequence: first, lastSequence: last) else {
            throw RelayError(.notFound, "the relay has no segment \(node)/\(first)-\(last) in this account")
        }
        var headers = HTTPFields()
        headers[.contentType] = RelayHeader.octetStream
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A pull's account, cursor, page size and wait, as its path and query say.
    private struct PullQuestion {
        var account: String
        var after: UInt64
        var limit: Int
        var wait: Int
    }

    @inline(never)
    private func pullQuestion(_ request: Request, _ context: RelayRequestContext) throws(RelayError) -> PullQuestion {
        let account = try accountParameter(context)
        let query = request.uri.queryParameters
        let after = try Self.integer(query, RelayQuery.after, default: 0, range: RelayQuery.afterRange)
        let limit = Int(try Self.integer(query, RelayQuery.limit, default: UInt64(settings.maximumPullSegments), range: RelayQuery.limitRange))
        let wait = Int(try Self.integer(query, RelayQuery.wait, default: 0, range: RelayQuery.waitRange))
        return PullQuestion(account: account, after: after, limit: min(limit, settings.maximumPullSegments), wait: min(wait, settings.maximumWaitSeconds))
    }

    private func pull(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let question = try pullQuestion(request, context)
        _ = try await authorize(request, account: question.account)
        return try await answer(question)
    }

    /// The page after the question's cursor, waited for up to its wait (a long-poll). Only the question
    /// and the page live across the waits: an idle long-poll's task keeps its deepest frames.
    private func answer(_ question: PullQuestion) async throws -> Response {
        let (account, after, pageLimit, waitFor) = (question.account, question.after, question.limit, question.wait)
        var answer = try await encodedPage(account: account, after: after, limit: pageLimit)
        if answer == nil, waitFor > 0 {
            let deadline = ContinuousClock.now + .seconds(waitFor)
            while answer == nil, ContinuousClock.now < deadline, !Task.isCancelled {
                guard try await board.wait(account: account, after: after, timeout: deadline - ContinuousClock.now) else { break }
                answer = try await encodedPage(account: account, after: after, limit: pageLimit)
            }
        }
        guard let answer else {
            // Nothing after the cursor: the latest arrival lets a node tell a relay that went backwards
            // (a cursor past it) from one where nothing happened.
            return Self.json(
                PullAnswer(cursor: after, more: false, segments: [], relay: storage.identity, latest: try await storage.latestArrival(account: account)))
        }
        metrics.add("relay_pulled_segments_total", Double(answer.count))
        return Response(status: .ok, headers: Self.jsonHeaders, body: .init(byteBuffer: answer.body))
    }

    /// The encoded answer for a non-empty page, or nil when nothing arrived after `after`. The many
    /// long-polls one push wakes ask the same question: the first answer is kept and reused while the
    /// account's latest announced arrival stays the one it was made at.
    private func encodedPage(account: String, after: UInt64, limit: Int) async throws(RelayError) -> (body: ByteBuffer, count: Int)? {
        let key = PageKey(account: account, after: after, limit: limit)
        let latest = board.latest(account: account)
        let deleted = board.deletions
        if let latest, let hit = pages.withLock({ $0.entries[key] }), hit.latest == latest, hit.deletions == deleted { return (hit.body, hit.count) }
        guard let latest else { return try await readPage(key, latest: nil, deleted: deleted) }
        // The long-polls one push wakes all miss at once: the first reads and encodes, the others wait for
        // its answer instead of asking the database the same question (on PostgreSQL, a thousand queries
        // queued on a pool of sixteen connections).
        let flight = FlightKey(page: key, latest: latest, deletions: deleted)
        let (task, owner) = inFlight.withLock { flights -> (Task<(body: ByteBuffer, count: Int)?, any Error>, Bool) in
            if let task = flights[flight] { return (task, false) }
            let task = Task { [self] in try await readPage(key, latest: latest, deleted: deleted) }
            flights[flight] = task
            return (task, true)
        }
        defer { if owner { inFlight.withLock { $0[flight] = nil } } }
        do {
            return try await task.value
        } catch {
            throw error as? RelayError ?? RelayError(.storage, "reading a page failed: \(error)")
        }
    }

    private struct FlightKey: Hashable {
        var page: PageKey
        var latest: UInt64
        var deletions: Int
    }

    /// Reads and encodes a page; keeps it when the account's latest arrival is known.
    private func readPage(_ key: PageKey, latest: UInt64?, deleted: Int) async throws(RelayError) -> (body: ByteBuffer, count: Int)? {
        let (account, after, limit) = (key.account, key.after, key.limit)
        let page = try await storage.pull(account: account, after: after, limit: limit, maximumBytes: settings.maximumPullBytes)
        guard !page.segments.isEmpty else { return nil }
        let answer = PullAnswer(
            cursor: page.cursor, more: page.more,
            segments: page.segments.map {
                PullAnswer.Segment(
                    arrival: $0.arrival, node: $0.node.rawValue, first: $0.firstSequence, last: $0.lastSequence, size: $0.bytes.count,
                    data: Data($0.bytes).base64EncodedString())
            },
            relay: storage.identity, latest: max(page.cursor, latest ?? 0))
        let body = ByteBuffer(bytes: answer.encoded())
        if let latest {
            pages.withLock { cache in
                if cache.bytes + body.readableBytes > Self.pageCacheBytes { cache = ([:], 0) }
                if let old = cache.entries[key] { cache.bytes -= old.body.readableBytes }
                cache.entries[key] = (latest, deleted, body, page.segments.count)
                cache.bytes += body.readableBytes
            }
        }
        return (body, page.segments.count)
    }

    private func nodes(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let account = try accountParameter(context)
        _ = try await authorize(request, account: account)
        let cursor = try await storage.latestArrival(account: account)
        return Self.json(NodesAnswer(cursor: cursor, nodes: try await storage.nodes(account: account)))
    }

    // MARK: Checks

    func accountParameter(_ context: RelayRequestContext) throws(RelayError) -> String {
        try accountParameter(context.parameters.get("account") ?? "")
    }

    func accountParameter(_ account: String) throws(RelayError) -> String {
        if let problem = RelayNames.accountProblem(account) {
            throw RelayError(.badRequest, "the account in the path \(RelayNames.quoted(account)) \(problem)")
        }
        return account
    }

    func nodeParameter(_ context: RelayRequestContext) throws(RelayError) -> NodeID {
        try nodeParameter(context.parameters.get("node") ?? "")
    }

    func nodeParameter(_ node: String) throws(RelayError) -> NodeID {
        if let problem = RelayNames.nodeProblem(node) {
            throw RelayError(.badRequest, "the node in the path \(RelayNames.quoted(node)) \(problem)")
        }
        return NodeID(node)
    }

    func rangeParameter(_ context: RelayRequestContext) throws(RelayError) -> (UInt64, UInt64) {
        try rangeParameter(context.parameters.get("range") ?? "")
    }

    func rangeParameter(_ text: String) throws(RelayError) -> (UInt64, UInt64) {
        guard let range = RelayNames.parseRange(text) else {
            throw RelayError(.badRequest, "the segment in the path \(RelayNames.quoted(text)) is not FIRST-LAST (decimal sequence numbers, 1 ≤ FIRST ≤ LAST)")
        }
        return range
    }

    /// The credential of the request's bearer token, which must be for `account`. The same answer for an
    /// account that does not exist as for one that does: a token learns nothing about other accounts.
    @discardableResult
    func authorize(_ request: Request, account: String) async throws(RelayError) -> Credential {
        guard let header = request.headers[.authorization] else {
            throw RelayError(
                .unauthorized, "no token: send \(RelayHeader.authorization): \(RelayHeader.bearerPrefix)<token> (sync-relay token issue makes one)")
        }
        guard header.hasPrefix(RelayHeader.bearerPrefix),
            let credential = try await storage.authenticate(String(header.dropFirst(RelayHeader.bearerPrefix.count)))
        else {
            throw RelayError(.unauthorized, "the token is not valid (wrong, revoked, or its account deleted): ask the relay's operator for a new one")
        }
        guard credential.account == account else {
            throw RelayError(.forbidden, "this token is not valid for the account in the path")
        }
        return credential
    }

    /// Checks that the request's token may write as `node`: a token bound to another node may not; an
    /// account's token may write as any node of its account.
    func authorize(_ request: Request, account: String, writingAs node: NodeID, _ what: String) async throws(RelayError) {
        let credential = try await authorize(request, account: account)
        if let bound = credential.node, bound != node {
            throw RelayError(.forbidden, "this token may \(what) only as node \(bound), not \(node)")
        }
    }

    /// The request's Content-Length, at most `maximum`: a body is sized before a byte of it is read.
    func contentLength(_ request: Request, what: String, maximum: Int, key: String, tooLarge: RelayError.Code) throws(RelayError) -> Int {
        guard let lengthText = request.headers[.contentLength] else {
            throw RelayError(.lengthRequired, "this request needs a Content-Length header (the \(what)'s size)")
        }
        guard let length = Int(lengthText), length >= 0 else { throw RelayError(.badRequest, "Content-Length is not a number") }
        guard length <= maximum else {
            throw RelayError(tooLarge, "the \(what) is \(length) bytes; this relay takes at most \(maximum) (\(key))")
        }
        return length
    }

    /// Runs `body` with `length` bytes reserved from ``RelaySettings/maximumBufferedBytes``: bounded
    /// memory under a flood of bodies, since each reserves its size before it is read.
    func withBuffered<T>(_ length: Int, _ body: () async throws(RelayError) -> T) async throws(RelayError) -> T {
        let now = buffered.wrappingAdd(length, ordering: .relaxed).newValue
        defer { buffered.wrappingSubtract(length, ordering: .relaxed) }
        guard now <= settings.maximumBufferedBytes || now == length else {
            throw RelayError(
                .busy, "the relay holds \(settings.maximumBufferedBytes) bytes of uploads already (max_buffered_bytes): retry shortly", retryAfter: 1)
        }
        return try await body()
    }

    private static func integer(
        _ query: FlatDictionary<Substring, Substring>, _ name: String, default value: UInt64, range: ClosedRange<UInt64>
    ) throws(RelayError) -> UInt64 {
        guard let text = query[name[...]] else { return value }
        guard text.utf8.count <= 20, text.utf8.allSatisfy({ (48...57).contains($0) }), let number = UInt64(text), range.contains(number) else {
            throw RelayError(.badRequest, "the query parameter '\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound), got \(RelayNames.quoted(String(text)))")
        }
        return number
    }

    static func json(_ answer: some RelayAnswer, status: Int = RelayStatus.ok) -> Response {
        Response(status: Self.status(status), headers: jsonHeaders, body: .init(byteBuffer: ByteBuffer(bytes: answer.encoded())))
    }
}

/// When the body being read must have moved on by: shared by its reader and its timer.
private final class BodyDeadline: Sendable {
    let instant: Mutex<ContinuousClock.Instant>
    init(_ instant: ContinuousClock.Instant) { self.instant = Mutex(instant) }
}
