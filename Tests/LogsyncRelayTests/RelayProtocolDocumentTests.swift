import Foundation
@testable import LogsyncRelay
import LogsyncRelayProtocol
import LogsyncTestKit
import Testing

/// The relay's wire protocol as LogsyncRelayProtocol declares it — the one definition the relay and
/// its client are built from — against docs/relay-openapi.yaml: the same routes both ways, the same
/// successes, and the same keys in every JSON answer. A route or a key added on one side only fails here.
@Suite struct RelayProtocolDocumentTests {
    static let methods = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    static func document() throws -> YAMLNode {
        let text = try String(contentsOfFile: Products.packageRoot + "/docs/relay-openapi.yaml", encoding: .utf8)
        return try YAMLSubset.parse(text)
    }

    /// `METHOD /path` → the operation's mapping, for every operation of the document.
    static func operations(_ document: YAMLNode) -> [String: YAMLNode] {
        var operations: [String: YAMLNode] = [:]
        for (path, item) in document["paths"]?.entries ?? [:] {
            for (method, operation) in item.entries where methods.contains(method) {
                operations["\(method.uppercased()) \(path)"] = operation
            }
        }
        return operations
    }

    @Test func theDocumentIsReadWhole() throws {
        let document = try Self.document()
        #expect(document["openapi"]?.string == "3.0.3")
        #expect(document["components"]?["schemas"]?["Error"]?["required"] == .list([.scalar("code"), .scalar("message")]))
        #expect(
            document["paths"]?["/v1/accounts/{account}/nodes/{node}/baselines/{name}"]?["parameters"]?.items.last?["schema"]?["pattern"]?.string
                == "^[0-9]{20}-[0-9a-f]{16}\\.lsbase$")
        let sample = "a:\n  - b: {c: [1, \"2\"]}\n    d: >\n      e\n      f\nh: 'i''j'\nk:\n- l\n"
        #expect(
            try YAMLSubset.parse(sample)
                == .map([
                    "a": .list([.map(["b": .map(["c": .list([.scalar("1"), .scalar("2")])]), "d": .scalar("e f")])]), "h": .scalar("i'j"),
                    "k": .list([.scalar("l")]),
                ]))
        #expect(throws: YAMLError.self) { try YAMLSubset.parse("a: [1, 2\n") }
        #expect(throws: YAMLError.self) { try YAMLSubset.parse("a: &anchor 1\n") }
    }

    @Test func everyRouteIsInTheDocumentAndEveryOperationIsARoute() throws {
        let operations = Self.operations(try Self.document())
        let declared = Dictionary(uniqueKeysWithValues: RelayRoute.allCases.map { ($0.description, $0) })
        let onlyInModule = Set(declared.keys).subtracting(operations.keys).sorted()
        let onlyInDocument = Set(operations.keys).subtracting(declared.keys).sorted()
        #expect(onlyInModule.isEmpty, "LogsyncRelayProtocol declares \(onlyInModule), which docs/relay-openapi.yaml does not describe")
        #expect(onlyInDocument.isEmpty, "docs/relay-openapi.yaml describes \(onlyInDocument), which RelayRoute does not declare")
        for (key, route) in declared {
            guard let operation = operations[key] else { continue }
            #expect(operation["operationId"]?.string == route.operation, "\(key): operationId")
            // Tokens: the document's operations without `security: []` need one.
            let open = operation["security"] == .list([])
            #expect(open != route.needsToken, "\(key): the document says \(open ? "no token" : "a token")")
        }
        // Every path's template names its parameters as RelayPath does.
        let documentPaths = Set((try Self.document())["paths"]?.entries.keys.map { $0 } ?? [])
        #expect(Set(RelayPath.allCases.map(\.template)) == documentPaths)
    }

    @Test func successesAndTheirBodiesAreTheDocuments() throws {
        let document = try Self.document()
        let operations = Self.operations(document)
        for route in RelayRoute.allCases {
            guard let operation = operations[route.description] else { continue }
            let responses = operation["responses"]?.entries ?? [:]
            let successes = responses.keys.filter { $0.hasPrefix("2") }.compactMap { Int($0) }.sorted()
            #expect(
                successes == Array(Set(route.successes)).sorted(),
                "\(route): the document's successes are \(successes), the module's \(route.successes)")
            for status in successes {
                let content = responses[String(status)]?["content"]
                let schema = content?["application/json"]?["schema"]?["$ref"]?.string.map { String($0.split(separator: "/").last ?? "") }
                #expect(
                    schema == route.answer?.schema,
                    "\(route) \(status): the document answers \(schema ?? "no JSON"), the module \(route.answer?.schema ?? "no JSON")")
            }
            // Refusals: the protocol's error answer, with statuses that some error code has.
            for (status, response) in responses where !status.hasPrefix("2") {
                #expect(response["$ref"]?.string == "#/components/responses/Error", "\(route) \(status)")
                #expect(RelayErrorCode.all.contains { String($0.status) == status }, "\(route) \(status): no RelayErrorCode has this status")
            }
        }
    }

    /// Every answer the module declares, encoded with all its keys, against its schema.
    @Test func answerKeysAreTheSchemasProperties() throws {
        let document = try Self.document()
        let schemas = document["components"]?["schemas"]?.entries ?? [:]
        var answers: [any RelayAnswer.Type] = RelayRoute.allCases.compactMap(\.answer)
        answers.append(ErrorAnswer.self)
        var problems: [String] = []
        for answer in answers {
            guard let schema = schemas[answer.schema] else {
                problems.append("\(answer) names the schema \(answer.schema), which docs/relay-openapi.yaml does not have")
                continue
            }
            let json = try JSONSerialization.jsonObject(with: try Self.filled(answer).encoded())
            Self.compare(json, schema, at: answer.schema, schemas: schemas, into: &problems)
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    static func filled<T: RelayAnswer>(_ type: T.Type) throws -> T { try FillingDecoder.filled(type) }

    /// Appends a problem for each object in `json` whose keys are not the properties of its schema.
    static func compare(_ json: Any, _ schema: YAMLNode, at path: String, schemas: [String: YAMLNode], into problems: inout [String]) {
        var schema = schema
        if let reference = schema["$ref"]?.string {
            let name = String(reference.split(separator: "/").last ?? "")
            guard let resolved = schemas[name] else { return problems.append("\(path): \(reference) is not in the document") }
            schema = resolved
        }
        if let properties = schema["properties"]?.entries {
            guard let object = json as? [String: Any] else { return problems.append("\(path): the module encodes \(json), not an object") }
            let onlyEncoded = Set(object.keys).subtracting(properties.keys).sorted()
            let onlyDocumented = Set(properties.keys).subtracting(object.keys).sorted()
            if !onlyEncoded.isEmpty { problems.append("\(path): the module encodes \(onlyEncoded), which the document's schema does not have") }
            if !onlyDocumented.isEmpty { problems.append("\(path): the document's schema has \(onlyDocumented), which the module does not encode") }
            let required = Set(schema["required"]?.items.compactMap(\.string) ?? [])
            if !required.isSubset(of: properties.keys) { problems.append("\(path): required \(required.sorted()) are not all properties") }
            for (key, value) in object {
                if let property = properties[key] { compare(value, property, at: "\(path).\(key)", schemas: schemas, into: &problems) }
            }
        } else if schema["type"]?.string == "array", let items = schema["items"] {
            guard let array = json as? [Any], let first = array.first else { return problems.append("\(path): the module encodes no array element") }
            compare(first, items, at: "\(path)[]", schemas: schemas, into: &problems)
        } else if schema["type"]?.string == "object" {
            problems.append("\(path): the document's object has no properties")
        }
    }

    @Test func errorCodesAreTheDocuments() throws {
        let document = try Self.document()
        let codes = document["components"]?["schemas"]?["Error"]?["properties"]?["code"]?["enum"]?.items.compactMap(\.string) ?? []
        #expect(Set(codes) == Set(RelayErrorCode.all.map(\.name)))
        #expect(codes.count == RelayErrorCode.all.count)
    }

    /// Both ends link the module: it brings neither an HTTP library (Hummingbird, libcurl) nor storage.
    @Test func theModuleImportsOnlyFoundation() throws {
        let folder = Products.packageRoot + "/Sources/LogsyncRelayProtocol"
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty)
        for file in files {
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            let imports = text.split(separator: "\n").filter { $0.hasPrefix("import ") || $0.contains(" import ") }
            #expect(imports.allSatisfy { $0.hasSuffix("import Foundation") }, "\(file) imports \(imports)")
        }
    }

    /// The relay writes a push's answer by hand, and reads a push's path by hand: both as the module says.
    @Test func theRelaysHandWrittenPartsAreTheModules() throws {
        for (stored, arrival) in [(true, UInt64(1)), (false, UInt64.max)] {
            #expect(Data(RelayAPI.pushAnswerText(stored: stored, arrival: arrival).utf8) == PushAnswer(stored: stored, arrival: arrival).encoded())
        }
        let node = "0b3a6f0e-8a5e-4a4c-9d7b-1d2e3f4a5b6c"
        let path = try #require(PushRoute.path(RelayRequestPath.segment(account: "acct", node: node, first: 3, last: 7)))
        #expect(path.account == "acct" && path.node == node && path.range == "3-7")
        #expect(PushRoute.endpoint == RelayRoute.push.path.template)
        #expect(RelayRequestPath.pull(account: "a", after: 5, wait: .seconds(25)) == "/v1/accounts/a/segments?after=5&wait=25")
        #expect(RelayRequestPath.baseline(account: "a", node: node, name: "n.lsbase") == "/v1/accounts/a/nodes/\(node)/baselines/n.lsbase")
    }
}
