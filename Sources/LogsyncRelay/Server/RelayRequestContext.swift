import Hummingbird
import NIOCore

/// Hummingbird's basic context plus the request's connection, which ``BodyDeadlines`` closes for reading
/// when a body stops arriving.
struct RelayRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
