import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// The certificate and key a TLS relay serves, swapped in place on SIGHUP: connections accepted after a
/// reload use the new pair, open ones keep theirs.
public final class TLSCredentials: Sendable {
    public let certificatePath: String
    public let keyPath: String
    private let context: Mutex<NIOSSLContext>

    public init(certificatePath: String, keyPath: String) throws(RelayError) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        context = Mutex(try Self.load(certificatePath: certificatePath, keyPath: keyPath))
    }

    /// Reads the files again; on failure the pair in use stays and the error says why.
    public func reload() throws(RelayError) {
        let fresh = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        context.withLock { $0 = fresh }
    }

    var current: NIOSSLContext { context.withLock { $0 } }

    private static func load(certificatePath: String, keyPath: String) throws(RelayError) -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
            guard !chain.isEmpty else { throw RelayError(.unavailable, "\(certificatePath) holds no PEM certificate") }
            let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            configuration.minimumTLSVersion = .tlsv12
            return try NIOSSLContext(configuration: configuration)
        } catch let error as RelayError {
            throw error
        } catch {
            throw RelayError(
                .unavailable,
                "cannot load the TLS certificate \(certificatePath) and key \(keyPath): \(error) — check that both are PEM files readable by the relay")
        }
    }
}

/// A child channel that puts TLS, from the credentials in force when the connection is accepted, in front
/// of another (HTTP/1.1).
struct ReloadableTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let credentials: TLSCredentials

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = credentials.current
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
