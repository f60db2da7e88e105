import Hummingbird

/// The relay's responder: the push route, matched before the router, then the router. `PUT
/// /v1/accounts/{account}/nodes/{node}/segments/{range}` is most of a relay's requests, and resolving it
/// in the router's trie (seven components compared as substrings, backtracking among the routes that
/// share a prefix) cost about 5 % of the relay's CPU per push. Only the plain form of that path is taken
/// here — no empty component, no trailing slash — with the parameters and the endpoint path (for
/// `relay_requests_total`) the router would have set, through the same middleware as every route; any
/// other request goes to the router, which answers it as before. (A router middleware would not do: the
/// router applies its middlewares after the trie has found the route.)
struct PushRoute: HTTPResponder {
    typealias Context = RelayRequestContext
    let api: RelayAPI
    let middleware: RelayMiddleware
    let router: RouterResponder<RelayRequestContext>

    /// The route as the router names it.
    static let endpoint = "/v1/accounts/{account}/nodes/{node}/segments/{range}"
    private static let prefix = "/v1/accounts/"

    func respond(to request: Request, context: Context) async throws -> Response {
        guard request.method == .put, let parameters = Self.parameters(request.uri.path) else {
            return try await router.respond(to: request, context: context)
        }
        var context = context
        context.coreContext.parameters = parameters
        context.coreContext.endpointPath.value = Self.endpoint
        return try await middleware.handle(request, context: context) { request, context in try await api.push(request, context) }
    }

    /// The route's parameters when `path` is a push's, else nil.
    static func parameters(_ path: String) -> Parameters? {
        guard path.hasPrefix(prefix) else { return nil }
        let parts = path.dropFirst(prefix.count).split(separator: "/", maxSplits: 5, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[1] == "nodes", parts[3] == "segments", !parts[0].isEmpty, !parts[2].isEmpty, !parts[4].isEmpty
        else { return nil }
        return ["account": parts[0], "node": parts[2], "range": parts[4]]
    }
}
