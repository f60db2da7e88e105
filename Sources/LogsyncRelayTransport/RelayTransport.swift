import Foundation
import LogsyncCore
import LogsyncHTTP
import LogsyncPlatform
import LogsyncRelayProtocol
import LogsyncTransport
import Synchronization
import LogsyncStatus

/// Where a node's relay is and how to talk to it.
public struct RelayClientSettings: Sendable {
    /// The relay's base URL, `https://host:port` (or `http://` for a relay on loopback or behind a proxy).
    public var url: String
    public var account: String
    /// The bearer token (read from a file or `$CREDENTIALS_DIRECTORY`, never from syncd.toml itself) the
    /// transport starts with; ``RelayTransport/use(token:)`` replaces it.
    public var token: String
    /// A PEM file of certificate authorities to trust instead of the system's (a self-signed relay).
    public var caFile: String?
    public var connectTimeoutMilliseconds = 5_000
    public var requestTimeoutMilliseconds = 30_000
    /// How long each long-poll asks the relay to wait; the relay may shorten it.
    public var longPollSeconds = 25
    /// Attempts per request on network errors and 5xx answers, with jittered exponential backoff.
    public var attempts = 3
    /// The segment size limit, which also bounds answers.
    public var maximumSegmentBytes = SegmentLimits.default.maxSegmentBytes
    /// Bytes of pulled segments kept in memory until the engine reads them; past it they are fetched
    /// again when read.
    public var cacheBytes = 64 << 20
    /// The largest baseline this node publishes: a baseline is gathered in memory before its upload (the
    /// relay needs its size up front), so this bounds that memory. The relay's own limit is
    /// `max_baseline_bytes` (512 MiB by default).
    public var maximumBaselineBytes = 512 << 20

    public init(url: String, account: String, token: String, caFile: String? = nil) {
        self.url = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.account = account
        self.token = token
        self.caFile = caFile
    }
}

/// A ``Transport`` through a `sync-relay` over HTTP(S), with libcurl.
///
/// Pushes, pulls and reads share one connection; the long-poll that wakes the daemon has its own, since it
/// waits up to ``RelayClientSettings/longPollSeconds`` at a time. Segments come with the pulls, in the
/// relay's arrival order, and are kept (bounded) until the engine reads them.
public final class RelayTransport: Transport, Sendable {
    public let settings: RelayClientSettings
    public let node: NodeID
    let requests: CurlSession
    let state = Mutex(State())
    /// Every request's headers: with and without a body. Replaced when the token is (a reload).
    private let headers: Mutex<(plain: [String], body: [String])>
    private let contact: Mutex<RelayContact>
    /// Counts token replacements: a long-poll backing off after a refused token tries again at once.
    private let tokenChanges = Atomic<Int>(0)

    struct State {
        /// The last arrival pulled.
        var cursor: UInt64 = 0
        var index: [NodeID: [SegmentName]] = [:]
        var cached: [SegmentName: [UInt8]] = [:]
        var cachedBytes = 0
        /// Pulled since the last refresh.
        var appeared: [SegmentName] = []
        /// The relay's identity and epoch (`ID/EPOCH`) the cursor counts in, from its first answer on.
        var identity: String?
        /// Times the relay's history was found gone back, and why the last time (``carrierState()``).
        var resets = 0
        var lastReset: String?
    }

    public init(settings: RelayClientSettings, node: NodeID) {
        self.settings = settings
        self.node = node
        requests = CurlSession(caFile: settings.caFile)
        contact = Mutex(RelayContact(url: settings.url))
        headers = Mutex(Self.headers(token: settings.token))
    }

    private static func headers(token: String) -> (plain: [String], body: [String]) {
        let authorization = RelayHeader.authorizationLine(token: token)
        return ([authorization], [authorization, "\(RelayHeader.contentType): \(RelayHeader.octetStream)"])
    }

    /// Sends `token` from the next request on (a token rotated in its file, then a reload); returns
    /// whether it differs from the one in use.
    @discardableResult
    public func use(token: String) -> Bool {
        let replacement = Self.headers(token: token)
        let changed = headers.withLock { headers in
            guard headers.plain != replacement.plain else { return false }
            headers = replacement
            return true
        }
        if changed { tokenChanges.wrappingAdd(1, ordering: .relaxed) }
        return changed
    }

    /// What the node last heard from the relay.
    public var lastContact: RelayContact { contact.withLock { $0 } }

    /// The URL of a request path (``RelayRequestPath``).
    func url(_ path: String) -> String { settings.url + path }

    /// The URL of one of the account's segments.
    func segmentURL(_ name: SegmentName) -> String {
        url(RelayRequestPath.segment(account: settings.account, node: name.node.rawValue, first: name.firstSequence, last: name.lastSequence))
    }

    // MARK: Transport

    public func publish(_ name: SegmentName, bytes: [UInt8]) throws(TransportError) {
        let response = try send(.push, segmentURL(name), body: bytes, session: requests, timeoutMilliseconds: settings.requestTimeoutMilliseconds)
        guard RelayRoute.push.successes.contains(response.status) else { throw refusal(response, doing: "pushing segment \(name)") }
    }

    /// The error for a refused request (a push, or a pull: a node's first request is the pull that checks
    /// its own history), which `syncctl status` shows as the last refusal.
    func refusal(_ response: CurlSession.Response, doing what: String) -> TransportError {
        let error = Self.error(for: response, doing: what)
        contact.withLock { $0.lastRefusal = error.message }
        return error
    }

    public func scan(excluding node: NodeID) throws(TransportError) -> TransportScan {
        _ = try refresh(excluding: node)
        let names = state.withLock { $0.index.filter { $0.key != node }.values.flatMap { $0 } }
        return TransportScan(segments: names.sorted(), ignored: [])
    }

    public func refresh(excluding node: NodeID) throws(TransportError) -> TransportView {
        _ = try drain(session: requests)
        return state.withLock { state in
            let appeared = state.appeared.filter { $0.node != node }
            state.appeared = []
            return TransportView(appeared: appeared, ignored: [], nodes: state.index.keys.filter { $0 != node }.sorted())
        }
    }

    /// Pulls what arrived (kept for the next refresh to report) and answers from the index, which holds
    /// every node's segments, this node's included.
    public func ownSegments(of node: NodeID) throws(TransportError) -> [SegmentName] {
        _ = try drain(session: requests)
        return state.withLock { $0.index[node] ?? [] }
    }

    public func segments(of node: NodeID, after sequence: UInt64) -> [SegmentName] {
        state.withLock { state in (state.index[node] ?? []).filter { $0.lastSequence > sequence } }
    }

    public func read(_ name: SegmentName, maximumBytes: Int) throws(TransportError) -> [UInt8] {
        if let bytes = state.withLock({ state -> [UInt8]? in
            guard let bytes = state.cached.removeValue(forKey: name) else { return nil }
            state.cachedBytes -= bytes.count
            return bytes
        }) {
            return bytes
        }
        let response = try send(
            .fetch, segmentURL(name), session: requests, timeoutMilliseconds: settings.requestTimeoutMilliseconds,
            maximumResponseBytes: maximumBytes + 1)
        guard RelayRoute.fetch.successes.contains(response.status) else { throw Self.error(for: response, doing: "reading segment \(name)") }
        guard response.body.count <= maximumBytes else {
            throw TransportError(.tooLarge, "segment \(name) is \(response.body.count) bytes; at most \(maximumBytes) are read")
        }
        return response.body
    }

    /// Long-polls the relay on a thread of its own and yields whenever segments arrived (already pulled
    /// for the next refresh), and at least every `rescanInterval`. Network failures back off with jitter
    /// up to a minute; a refused token backs off the longest, and `syncctl status` says why.
    public func arrivals(rescanInterval: Duration) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let session = CurlSession(caFile: settings.caFile, cancellable: true)
        let stopped = Atomic<Bool>(false)
        continuation.onTermination = { _ in
            stopped.store(true, ordering: .relaxed)
            session.cancelled.store(true, ordering: .relaxed)
        }
        let waitSeconds = max(1, min(settings.longPollSeconds, Int(rescanInterval.components.seconds)))
        Thread.detachNewThread { [self] in
            var backoff = Backoff(initialMilliseconds: 100, maximumMilliseconds: 60_000)
            var nextRescan = ContinuousClock.now + rescanInterval
            while !stopped.load(ordering: .relaxed) {
                do {
                    let pulled = try pull(session: session, waitSeconds: waitSeconds)
                    backoff.reset()
                    // Drain what is left without waiting (a page limit was hit).
                    let foreign = try drain(session: session, after: pulled, while: { !stopped.load(ordering: .relaxed) })
                    // Wakes for other nodes' segments at once; its own pushes coming back wake nothing.
                    if foreign || ContinuousClock.now >= nextRescan {
                        continuation.yield()
                        nextRescan = ContinuousClock.now + rescanInterval
                    }
                } catch {
                    if stopped.load(ordering: .relaxed) { break }
                    let delay = (error as? TransportError)?.code.isPermanent == true ? backoff.maximumMilliseconds : backoff.next()
                    let deadline = ContinuousClock.now + .milliseconds(delay)
                    let token = tokenChanges.load(ordering: .relaxed)
                    while !stopped.load(ordering: .relaxed), ContinuousClock.now < deadline, tokenChanges.load(ordering: .relaxed) == token {
                        Pause.microseconds(20_000)
                    }
                    continuation.yield()
                }
            }
            continuation.finish()
        }
        return stream
    }

    /// What this transport knows of the relay's history: its identity and epoch as its last pull answer
    /// said, and the resets it went through (nil before an answer, or from a relay too old to say).
    public func carrierState() -> CarrierState? {
        state.withLock { state in state.identity.map { CarrierState(identity: $0, resets: state.resets, lastReset: state.lastReset) } }
    }

    // MARK: Requests

    /// Pulls without waiting while pages come and `going` says so, after `first` (what a pull just
    /// brought; nil: pull once first); returns whether any of it was another node's. A relay whose
    /// history goes back more than once meanwhile (relays on different databases behind one address?)
    /// is an error, not a loop.
    private func drain(
        session: CurlSession, after first: (received: Bool, foreign: Bool)? = nil, while going: () -> Bool = { true }
    ) throws(TransportError) -> Bool {
        let resets = state.withLock { $0.resets }
        var pulled: (received: Bool, foreign: Bool)
        if let first { pulled = first } else { pulled = try pull(session: session, waitSeconds: 0) }
        var foreign = pulled.foreign
        while pulled.received, going() {
            pulled = try pull(session: session, waitSeconds: 0)
            foreign = foreign || pulled.foreign
            let (now, why) = state.withLock { ($0.resets, $0.lastReset ?? "") }
            if now > resets + 1 {
                throw TransportError(
                    .refused, "the relay's history went back \(now - resets) times in a row (\(why)): are relays with different databases behind \(settings.url)?")
            }
        }
        return foreign
    }

    /// Pulls after the cursor once: whether segments came (more may wait), and whether any is another
    /// node's. An answer that shows the relay's history went back (another identity or epoch, or a latest
    /// arrival below the cursor) resets the cursor to 0 and counts as received: the next pull starts over.
    private func pull(session: CurlSession, waitSeconds: Int) throws(TransportError) -> (received: Bool, foreign: Bool) {
        let (cursor, resets) = state.withLock { ($0.cursor, $0.resets) }
        let url = url(RelayRequestPath.pull(account: settings.account, after: cursor, wait: .seconds(waitSeconds)))
        // Base64 in JSON: 4/3 of the bytes, plus room for the page's metadata.
        let answerLimit = settings.maximumSegmentBytes * 4 / 3 + (16 << 20)
        let response = try send(
            .pull, url, session: session, timeoutMilliseconds: settings.requestTimeoutMilliseconds + waitSeconds * 1000,
            maximumResponseBytes: answerLimit)
        guard RelayRoute.pull.successes.contains(response.status) else { throw refusal(response, doing: "pulling segments") }
        guard let page = PullAnswer.decoded(response.body) else {
            throw TransportError(.refused, "the relay's answer to a pull is not the JSON this node expects (a relay of another version?)")
        }
        var segments: [(SegmentName, [UInt8])] = []
        for segment in page.segments {
            guard SegmentName.isNodeFolderName(segment.node), segment.first >= 1, segment.first <= segment.last,
                let bytes = Data(base64Encoded: segment.data)
            else {
                throw TransportError(.refused, "the relay sent a segment entry that is not well formed (arrival \(segment.arrival))")
            }
            segments.append((SegmentName(node: NodeID(segment.node), firstSequence: segment.first, lastSequence: segment.last), Array(bytes)))
        }
        let identity = page.relay.map { "\($0.id)/\($0.epoch)" }
        var reset: String?
        let pulled = state.withLock { state -> (received: Bool, foreign: Bool) in
            // The history went back since this pull left: its answer counts from a cursor that no longer holds.
            guard state.resets == resets else { return (true, false) }
            if let identity, let known = state.identity, known != identity {
                reset = "the relay's identity changed from \(known) to \(identity) (its database was restored from a backup, or replaced)"
            } else if let latest = page.latest, latest < cursor {
                reset = "the relay's latest arrival is \(latest), below the \(cursor) this node had pulled (its database went back)"
            }
            if let reset {
                state = State(identity: identity ?? state.identity, resets: state.resets + 1, lastReset: reset)
                return (true, true)
            }
            if state.identity == nil { state.identity = identity }
            // Another pull (the long-poll, or a refresh) may have moved past this page meanwhile.
            guard page.cursor > state.cursor else { return (false, false) }
            for (name, bytes) in segments {
                var names = state.index[name.node] ?? []
                guard !names.contains(name) else { continue }
                let position = names.firstIndex { $0 > name } ?? names.endIndex
                names.insert(name, at: position)
                state.index[name.node] = names
                state.appeared.append(name)
                if name.node != node, state.cachedBytes + bytes.count <= settings.cacheBytes {
                    state.cached[name] = bytes
                    state.cachedBytes += bytes.count
                }
            }
            state.cursor = page.cursor
            return (!segments.isEmpty, segments.contains { $0.0.node != node })
        }
        if identity != nil || reset != nil {
            let at = Int64(Date().timeIntervalSince1970 * 1000)
            contact.withLock { contact in
                contact.identity = identity ?? contact.identity
                if let reset { (contact.lastReset, contact.lastResetAt) = ("\(reset): pulled again from the start", at) }
            }
        }
        return pulled
    }

    /// Sends a request of `route` to `url`, retrying network failures and 5xx answers with jittered
    /// exponential backoff up to ``RelayClientSettings/attempts`` times while `retryable` says so (not
    /// once a streamed answer has been handed out in part); any other answer is returned as it is.
    func send(
        _ route: RelayRoute, _ url: String, body: [UInt8]? = nil, session: CurlSession, timeoutMilliseconds: Int,
        maximumResponseBytes: Int = 1 << 20, stallSeconds: Int? = nil, stream: CurlSession.Stream? = nil, retryable: () -> Bool = { true }
    ) throws(TransportError) -> CurlSession.Response {
        var backoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 2_000)
        var attempt = 0
        while true {
            attempt += 1
            do {
                let response = try session.perform(
                    method: route.method.rawValue, url: url, headers: headers.withLock { body == nil ? $0.plain : $0.body },
                    body: body, timeoutMilliseconds: timeoutMilliseconds, connectTimeoutMilliseconds: settings.connectTimeoutMilliseconds,
                    maximumResponseBytes: maximumResponseBytes, stallSeconds: stallSeconds, stream: stream)
                record(response)
                if response.status >= 500, attempt < settings.attempts, retryable() {
                    Pause.microseconds(UInt32(backoff.next() * 1000))
                    continue
                }
                return response
            } catch {
                if !session.cancelled.load(ordering: .relaxed) {
                    contact.withLock { $0.lastAnswer = error.message; $0.lastAnswerAt = Int64(Date().timeIntervalSince1970 * 1000) }
                }
                guard attempt < settings.attempts, !session.cancelled.load(ordering: .relaxed), !error.code.isPermanent, retryable() else { throw error }
                Pause.microseconds(UInt32(backoff.next() * 1000))
            }
        }
    }

    private func record(_ response: CurlSession.Response) {
        var answer = "\(response.status)"
        if response.status >= 400, let body = ErrorAnswer.decoded(response.body) {
            answer += " \(body.code): \(body.message)"
        }
        contact.withLock { $0.lastAnswer = answer; $0.lastAnswerAt = Int64(Date().timeIntervalSince1970 * 1000) }
    }

    /// The error for a refusal, by status: the ones that retrying cannot fix are marked permanent.
    static func error(for response: CurlSession.Response, doing what: String) -> TransportError {
        let body = ErrorAnswer.decoded(response.body)
        let detail = body.map { "\($0.code): \($0.message)" } ?? "no explanation"
        let code: TransportError.Code
        switch response.status {
        case RelayErrorCode.unauthorized.status: code = .unauthorized
        case RelayErrorCode.forbidden.status: code = .forbidden
        case RelayErrorCode.notFound.status: code = .notFound
        case RelayErrorCode.conflict.status: code = .conflict
        case RelayErrorCode.tooLarge.status: code = .tooLarge
        case RelayErrorCode.quotaExceeded.status: code = .quotaExceeded
        case 400..<500: code = .refused
        default: code = .io
        }
        return TransportError(code, "the relay answered \(response.status) to \(what) (\(detail))")
    }
}

/// Jittered exponential backoff: each delay is a random point in [d/2, d], with d doubling up to a bound.
struct Backoff {
    let initialMilliseconds: Int
    let maximumMilliseconds: Int
    private var current: Int

    init(initialMilliseconds: Int, maximumMilliseconds: Int) {
        self.initialMilliseconds = initialMilliseconds
        self.maximumMilliseconds = maximumMilliseconds
        current = initialMilliseconds
    }

    mutating func next() -> Int {
        let delay = Int.random(in: (current / 2)...current)
        current = min(current * 2, maximumMilliseconds)
        return delay
    }

    mutating func reset() { current = initialMilliseconds }
}
