import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Around every request: turns any error into a JSON answer `{code, message}`, counts it, and logs a line
/// per request at debug level and per refusal at notice level. Never logs headers (tokens travel there).
struct RelayMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let metrics: RelayMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The line per request is built only when it is logged. Only what the await needs lives across
        // it: a request's task keeps its deepest frames for as long as its connection is open, and an
        // idle long-poll's connection is open for its whole wait.
        let started = logger.logLevel <= .debug ? ContinuousClock.now : nil
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            return try refused(error, request: request, context: context, started: started)
        }
        finished(request, context: context, status: response.status, refusal: nil, started: started)
        return response
    }

    /// The JSON answer for what a route threw, counted and logged.
    @inline(never)
    private func refused(_ error: any Error, request: Request, context: Context, started: ContinuousClock.Instant?) throws -> Response {
        let refusal: RelayError
        var status: HTTPResponse.Status?
        switch error {
        case let error as RelayError:
            refusal = error
        case let error as HTTPError:
            let code: RelayError.Code
            switch error.status.code {
            case 404: code = .notFound
            case 405: code = .methodNotAllowed
            case 413: code = .tooLarge
            case 400..<500: code = .badRequest
            default: code = .storage
            }
            refusal = RelayError(
                code, code == .notFound ? "no such route: the relay's routes are under /v1 (docs/relay-protocol.md)" : (error.body ?? "\(error.status)"))
            status = error.status
        default:
            refusal = RelayError(.storage, "the relay failed to answer: \(error)")
        }
        var response = try refusal.response(from: request, context: context)
        if let status { response.status = status }
        finished(request, context: context, status: response.status, refusal: refusal, started: started)
        return response
    }

    /// Counts the request, and logs its refusal (notice, or error for a failure of the relay's) and, at
    /// debug level, its line.
    @inline(never)
    private func finished(_ request: Request, context: Context, status: HTTPResponse.Status, refusal: RelayError?, started: ContinuousClock.Instant?) {
        metrics.addRequest(route: context.endpointPath ?? "unmatched", status: status.code)
        if let refusal {
            metrics.add("relay_refusals_total{code=\"\(refusal.code.name)\"}")
            let level: Logger.Level = status.code >= 500 && refusal.code != .busy ? .error : .notice
            logger.log(
                level: level, "refused \(request.method) \(RelayNames.quoted(request.uri.path)): \(status.code) \(refusal.code.name): \(refusal.message)",
                metadata: ["STATUS": "\(status.code)", "CODE": "\(refusal.code.name)"])
        }
        if let started {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            logger.debug("\(request.method) \(RelayNames.quoted(request.uri.path)) \(status.code) \(String(format: "%.2f", milliseconds)) ms")
        }
    }
}
