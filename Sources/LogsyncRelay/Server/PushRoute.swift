import Hummingbird
import LogsyncRelayProtocol

/// The relay's responder: the push route, matched before the router, then the router. `PUT
/// /v1/accounts/{account}/nodes/{node}/segments/{range}` is most of a relay's requests, and resolving it
/// in the router's trie (seven components compared as substrings, backtracking among the routes that
/// share a prefix) cost about 5 % of the relay's CPU per push. Only the plain form of that path is taken
/// here — no empty component, no trailing slash — with the endpoint path the router would have set (for
/// `relay_requests_total`), through the same middleware as every route; any
/// other request goes to the router, which answers it as before. (A router middleware would not do: the
/// router applies its middlewares after the trie has found the route.)
struct PushRoute: HTTPResponder {
    typealias Context = RelayRequestContext
    let api: RelayAPI
    let middleware: RelayMiddleware
    let router: RouterResponder<RelayRequestContext>

    /// The route as the router names it: its template.
    static let endpoint = RelayRoute.push.path.template

    func respond(to request: Request, context: Context) async throws -> Response {
        guard request.method == RelayAPI.method(RelayRoute.push.method), let path = Self.path(request.uri.path) else {
            return try await router.respond(to: request, context: context)
        }
        context.coreContext.endpointPath.value = Self.endpoint
        return try await middleware.handle(request, context: context) { request, context in
            try await api.push(request, context, account: String(path.account), node: String(path.node), range: String(path.range))
        }
    }

    /// The account, node and range of a push's path in its plain form, else nil. Read byte by byte: the
    /// same with `split` and a parameter dictionary cost more than the trie it replaces.
    static func path(_ path: String) -> (account: Substring, node: Substring, range: Substring)? {
        let utf8 = path.utf8
        guard utf8.starts(with: "/v1/accounts/".utf8) else { return nil }
        var index = utf8.index(utf8.startIndex, offsetBy: 13)
        // Where the five components after the prefix start and end.
        var starts = (index, index, index, index, index)
        var ends = (index, index, index, index, index)
        var component = 0
        while index < utf8.endIndex {
            if utf8[index] == UInt8(ascii: "/") {
                guard component < 4 else { return nil }
                switch component {
                case 0: ends.0 = index; starts.1 = utf8.index(after: index)
                case 1: ends.1 = index; starts.2 = utf8.index(after: index)
                case 2: ends.2 = index; starts.3 = utf8.index(after: index)
                default: ends.3 = index; starts.4 = utf8.index(after: index)
                }
                component += 1
            }
            utf8.formIndex(after: &index)
        }
        ends.4 = index
        guard component == 4, starts.0 < ends.0, starts.2 < ends.2, starts.4 < ends.4,
            utf8[starts.1..<ends.1].elementsEqual("nodes".utf8), utf8[starts.3..<ends.3].elementsEqual("segments".utf8)
        else { return nil }
        return (path[starts.0..<ends.0], path[starts.2..<ends.2], path[starts.4..<ends.4])
    }
}
