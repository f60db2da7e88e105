import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// A running relay: the HTTP server over a storage, with its limits. `run()` serves until the task is
/// cancelled or SIGTERM/SIGINT arrive.
public struct RelayServer: Sendable {
    public let settings: RelaySettings
    public let storage: any MailboxStorage & CredentialStorage & RetentionStorage
    public let tls: TLSCredentials?
    let logger: Logger
    /// Hummingbird's own logger (connections, lifecycle): quieter than the relay's by default.
    let frameworkLogger: Logger

    public init(
        settings: RelaySettings, storage: any MailboxStorage & CredentialStorage & RetentionStorage, tls: TLSCredentials?, logger: Logger, frameworkLogger: Logger? = nil
    ) {
        self.settings = settings
        self.storage = storage
        self.tls = tls
        self.logger = logger
        self.frameworkLogger = frameworkLogger ?? logger
    }

    /// Serves until SIGTERM or SIGINT. `onListening` gets the bound port (useful when `port` is 0).
    public func run(onListening: @escaping @Sendable (Int) async -> Void) async throws {
        let metrics = RelayMetrics()
        let admission = ConnectionAdmission(maximum: settings.maximumConnections)
        let api = RelayAPI(storage: storage, settings: settings, metrics: metrics, admission: admission, logger: logger)
        let router = Router(context: RelayRequestContext.self)
        let middleware = RelayMiddleware(metrics: metrics, logger: logger)
        router.add(middleware: middleware)
        api.register(on: router)
        let responder = PushRoute(api: api, middleware: middleware, router: router.buildResponder())
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [BodyCutter()], idleTimeout: .seconds(Int64(settings.idleTimeoutSeconds)))
        let server: HTTPServerBuilder
        if let tls {
            server = HTTPServerBuilder { [logger] responder in
                ReloadableTLSChannel(
                    base: AdmittingChannel(base: HTTP1Channel(responder: responder, configuration: http1), admission: admission, logger: logger),
                    credentials: tls)
            }
        } else {
            server = HTTPServerBuilder { [logger] responder in
                AdmittingChannel(base: HTTP1Channel(responder: responder, configuration: http1), admission: admission, logger: logger)
            }
        }
        let connectionLogger = frameworkLogger
        let app = Application(
            responder: responder, server: server,
            configuration: ApplicationConfiguration(
                address: .hostname(settings.host, port: settings.port), serverName: "sync-relay", backlog: 1_024,
                availableConnectionsDelegate: MaximumAvailableConnections(admission.acceptLimit, logger: connectionLogger)),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? settings.port) },
            logger: connectionLogger)
        // Arrivals stored by other relays on the same database wake this one's long-polls.
        let arrivals = (storage as? any ArrivalSource).map { source in Task { [board = api.board] in await source.deliverArrivals(to: board) } }
        defer { arrivals?.cancel() }
        try await app.runService()
    }
}
