import Foundation
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// How many connections the relay serves at once (`[limits] max_connections`), shared by every accepted
/// connection. A connection past the limit is answered `503` with `Retry-After` and closed, instead of
/// waiting unseen in the listen backlog; past `maximum + overflow` (connections being refused at once)
/// the relay stops accepting, and further ones wait in the backlog.
final class ConnectionAdmission: Sendable {
    let maximum: Int
    /// Connections accepted past `maximum` only to be told to come back.
    let overflow: Int
    private let open = Atomic<Int>(0)
    private let refusals = Atomic<Int>(0)

    init(maximum: Int, overflow: Int = 256) {
        self.maximum = maximum
        self.overflow = overflow
    }

    /// Connections the server may hold at once, served or being refused.
    var acceptLimit: Int { maximum + overflow }

    /// Counts a new connection in; whether it is served.
    func admit() -> Bool {
        let now = open.wrappingAdd(1, ordering: .relaxed).newValue
        guard now > maximum else { return true }
        open.wrappingSubtract(1, ordering: .relaxed)
        refusals.wrappingAdd(1, ordering: .relaxed)
        return false
    }

    func release() { open.wrappingSubtract(1, ordering: .relaxed) }

    var served: Int { open.load(ordering: .relaxed) }
    var refused: Int { refusals.load(ordering: .relaxed) }

    /// The whole answer to a connection past the limit: the relay's JSON error, then the connection closes.
    static let busyAnswer: [UInt8] = {
        let body = #"{"code":"busy","message":"the relay serves max_connections connections already: retry after the Retry-After seconds"}"#
        return Array(
            ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
    }()
}

/// A child channel that admits a connection to `base` (HTTP/1.1, behind TLS when the relay serves it)
/// while fewer than `max_connections` are served; a connection past it is set up as usual, but a handler
/// in front of HTTP answers its first bytes with `503` and closes it, so HTTP never sees a request.
struct AdmittingChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let admission: ConnectionAdmission
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if admission.admit() {
            channel.closeFuture.whenComplete { [admission] _ in admission.release() }
        } else {
            self.logger.notice("refused a connection: \(admission.maximum) are served already (max_connections)")
            do {
                try channel.pipeline.syncOperations.addHandler(BusyAnswer())
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
        return base.setup(channel: channel, logger: logger)
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Answers a refused connection's first bytes with ``ConnectionAdmission/busyAnswer``, closes it once
/// that is written, and passes nothing on.
private final class BusyAnswer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var answered = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        answered = true
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: ConnectionAdmission.busyAnswer)), promise: written)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
    }
}
