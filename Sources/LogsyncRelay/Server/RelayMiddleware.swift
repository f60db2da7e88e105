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
        // The line per request is built only when it is logged.
        let started = logger.logLevel <= .debug ? ContinuousClock.now : nil
        var response: Response
        var refusal: RelayError?
        do {
            response = try await next(request, context)
        } catch let error as RelayError {
            refusal = error
            response = try error.response(from: request, context: context)
        } catch let error as HTTPError {
            let code: RelayError.Code
            switch error.status.code {
            case 404: code = .notFound
            case 405: code = .methodNotAllowed
            case 413: code = .tooLarge
            case 400..<500: code = .badRequest
            default: code = .storage
            }
            let relayError = RelayError(
                code, code == .notFound ? "no such route: the relay's routes are under /v1 (docs/relay-protocol.md)" : (error.body ?? "\(error.status)"))
            refusal = relayError
            response = try relayError.response(from: request, context: context)
            response.status = error.status
        } catch {
            let relayError = RelayError(.storage, "the relay failed to answer: \(error)")
            refusal = relayError
            response = try relayError.response(from: request, context: context)
        }
        metrics.addRequest(route: context.endpointPath ?? "unmatched", status: response.status.code)
        if let refusal {
            metrics.add("relay_refusals_total{code=\"\(refusal.code.name)\"}")
            let level: Logger.Level = response.status.code >= 500 && refusal.code != .busy ? .error : .notice
            logger.log(
                level: level, "refused \(request.method) \(RelayNames.quoted(request.uri.path)): \(response.status.code) \(refusal.code.name): \(refusal.message)",
                metadata: ["STATUS": "\(response.status.code)", "CODE": "\(refusal.code.name)"])
        }
        if let started {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            logger.debug("\(request.method) \(RelayNames.quoted(request.uri.path)) \(response.status.code) \(String(format: "%.2f", milliseconds)) ms")
        }
        return response
    }
}
