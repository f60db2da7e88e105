import Foundation

extension Schema {
    /// Loads and validates a schema from JSON:
    ///
    /// ```json
    /// {"version": 1, "entities": [
    ///   {"name": "Note", "primaryKey": {"name": "id", "type": "uuid"},
    ///    "attributes": [{"name": "title", "type": "text", "preservedOnDelete": true}],
    ///    "relationships": [{"name": "folder", "destination": "Folder", "deleteRule": "cascade"}],
    ///    "uniqueKeys": [["title"]]}
    /// ]}
    /// ```
    ///
    /// Errors name the entity and attribute at fault, e.g. an unknown column type.
    public init(json data: Data) throws(SchemaError) {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw SchemaError(.malformed, at: "$", "not valid JSON: \(error.localizedDescription)")
        }
        guard let object = root as? [String: Any] else {
            throw SchemaError(.malformed, at: "$", "expected an object with 'version' and 'entities'")
        }
        guard let version = object["version"] as? Int else {
            throw SchemaError(.invalidVersion, at: "$.version", "'version' must be an integer")
        }
        guard let entityObjects = object["entities"] as? [[String: Any]] else {
            throw SchemaError(.malformed, at: "$.entities", "'entities' must be an array of objects")
        }
        // Foundation's reader turns a negative 19-digit integer into a Double; JSONDecoder keeps it exact.
        let exactDefaults = try? JSONDecoder().decode(ExactIntegerDefaults.self, from: data)
        var entities: [Entity] = []
        for (index, entityObject) in entityObjects.enumerated() {
            let exact = exactDefaults?.entities.indices.contains(index) == true ? exactDefaults?.entities[index].attributes : nil
            entities.append(try Self.entity(from: entityObject, at: "$.entities[\(index)]", exactIntegers: exact ?? []))
        }
        self.init(version: version, entities: entities)
        try validate()
    }

    /// The schema in the JSON form ``init(json:)`` reads, one entity per line: what the tools' `--schema`
    /// and syncd's `[store] schema` take, generated from a schema declared in code.
    public var json: String {
        func string(_ text: String) -> String {
            String(decoding: (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8), as: UTF8.self)
        }
        func member(_ name: String, _ value: String) -> String { "\(string(name)): \(value)" }
        let entities = entities.map { entity -> String in
            var members = [member("name", string(entity.name))]
            if let key = entity.primaryKey {
                members.append(member("primaryKey", "{\(member("name", string(key.name))), \(member("type", string(key.type.rawValue)))}"))
            }
            let attributes = entity.attributes.map { attribute -> String in
                var parts = [member("name", string(attribute.name)), member("type", string(attribute.type.rawValue))]
                if !attribute.optional { parts.append(member("optional", "false")) }
                switch attribute.defaultValue {
                case .integer(let value)?: parts.append(member("default", String(value)))
                // A decimal point or an exponent, so that the reader takes it for a real.
                case .real(let value)?: parts.append(member("default", String(value)))
                case .text(let value)?: parts.append(member("default", string(value)))
                case nil: break
                }
                if attribute.preservedOnDelete { parts.append(member("preservedOnDelete", "true")) }
                if let identifier = attribute.renamingIdentifier { parts.append(member("renamingIdentifier", string(identifier))) }
                if attribute.deprecated { parts.append(member("deprecated", "true")) }
                if let conversion = attribute.convertedFrom {
                    parts.append(member("convertedFrom", "{\(member("attribute", string(conversion.attribute))), \(member("type", string(conversion.type.rawValue)))}"))
                }
                return "{" + parts.joined(separator: ", ") + "}"
            }
            if !attributes.isEmpty { members.append(member("attributes", "[" + attributes.joined(separator: ", ") + "]")) }
            let relationships = entity.relationships.map {
                "{\(member("name", string($0.name))), \(member("destination", string($0.destination))), \(member("deleteRule", string($0.deleteRule.rawValue)))}"
            }
            if !relationships.isEmpty { members.append(member("relationships", "[" + relationships.joined(separator: ", ") + "]")) }
            if !entity.uniqueKeys.isEmpty {
                members.append(member("uniqueKeys", "[" + entity.uniqueKeys.map { "[" + $0.map(string).joined(separator: ", ") + "]" }.joined(separator: ", ") + "]"))
            }
            if !entity.contracted.isEmpty {
                members.append(member("contracted", "[" + entity.contracted.map(string).joined(separator: ", ") + "]"))
            }
            if let identifier = entity.renamingIdentifier { members.append(member("renamingIdentifier", string(identifier))) }
            return "  {" + members.joined(separator: ", ") + "}"
        }
        return "{\"version\": \(version), \"entities\": [\n" + entities.joined(separator: ",\n") + "\n]}\n"
    }

    /// Every attribute's `default` read as an exact Int64 where it is an integral number.
    private struct ExactIntegerDefaults: Decodable {
        struct Entity: Decodable {
            var attributes: [Int64?]
            enum CodingKeys: CodingKey { case attributes }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                attributes = (try? container.decode([Attribute].self, forKey: .attributes))?.map(\.value) ?? []
            }
        }
        struct Attribute: Decodable {
            var value: Int64?
            enum CodingKeys: String, CodingKey { case value = "default" }
            init(from decoder: any Decoder) throws {
                value = try? decoder.container(keyedBy: CodingKeys.self).decode(Int64.self, forKey: .value)
            }
        }
        var entities: [Entity]
    }

    private static func entity(from object: [String: Any], at path: String, exactIntegers: [Int64?]) throws(SchemaError) -> Entity {
        guard let name = object["name"] as? String else {
            throw SchemaError(.malformed, at: "\(path).name", "every entity needs a 'name'")
        }
        var key: PrimaryKey?
        if let keyObject = object["primaryKey"] as? [String: Any] {
            guard let keyName = keyObject["name"] as? String else {
                throw SchemaError(.malformed, at: "\(name).primaryKey", "the primary key needs a 'name'")
            }
            key = PrimaryKey(keyName, try type(keyObject["type"], at: "\(name).\(keyName)"))
        }
        var attributes: [Attribute] = []
        for (attributeIndex, attributeObject) in (object["attributes"] as? [[String: Any]] ?? []).enumerated() {
            guard let attributeName = attributeObject["name"] as? String else {
                throw SchemaError(.malformed, at: "\(name).attributes", "every attribute needs a 'name'")
            }
            let location = "\(name).\(attributeName)"
            var defaultValue: DefaultValue?
            switch attributeObject["default"] {
            case nil: break
            case let value as String: defaultValue = .text(value)
            case let value as NSNumber:
                let isFloat = ["d", "f"].contains(String(cString: value.objCType))
                let attributeType = try type(attributeObject["type"], at: location)
                if !isFloat {
                    defaultValue = .integer(value.int64Value)
                } else if attributeType != .real, let exact = exactIntegers.indices.contains(attributeIndex) ? exactIntegers[attributeIndex] : nil,
                    Double(exact) == value.doubleValue
                {
                    // An integral number for a non-real column: the exact integer, not its nearest Double.
                    defaultValue = .integer(exact)
                } else {
                    defaultValue = .real(value.doubleValue)
                }
            default: throw SchemaError(.invalidDefault, at: location, "'default' must be a string or a number")
            }
            var conversion: Conversion?
            if let object = attributeObject["convertedFrom"] {
                guard let object = object as? [String: Any], let source = object["attribute"] as? String else {
                    throw SchemaError(.malformed, at: location, "'convertedFrom' must be an object with 'attribute' and 'type'")
                }
                conversion = Conversion(from: source, try type(object["type"], at: "\(location).convertedFrom"))
            }
            attributes.append(
                Attribute(
                    attributeName, try type(attributeObject["type"], at: location),
                    optional: attributeObject["optional"] as? Bool ?? true, default: defaultValue,
                    preservedOnDelete: attributeObject["preservedOnDelete"] as? Bool ?? false,
                    renamingIdentifier: attributeObject["renamingIdentifier"] as? String,
                    deprecated: attributeObject["deprecated"] as? Bool ?? false, convertedFrom: conversion))
        }
        var relationships: [Relationship] = []
        for relationshipObject in object["relationships"] as? [[String: Any]] ?? [] {
            guard let relationshipName = relationshipObject["name"] as? String,
                let destination = relationshipObject["destination"] as? String
            else {
                throw SchemaError(.malformed, at: "\(name).relationships", "every relationship needs a 'name' and a 'destination'")
            }
            let ruleName = relationshipObject["deleteRule"] as? String ?? DeleteRule.nullify.rawValue
            guard let rule = DeleteRule(rawValue: ruleName) else {
                throw SchemaError(
                    .malformed, at: "\(name).\(relationshipName)",
                    "unknown delete rule '\(ruleName)' (expected one of \(DeleteRule.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            relationships.append(Relationship(relationshipName, to: destination, deleteRule: rule))
        }
        let uniqueKeys = object["uniqueKeys"] as? [[String]] ?? []
        let contracted = object["contracted"] as? [String] ?? []
        return Entity(
            name, primaryKey: key, attributes: attributes, relationships: relationships, uniqueKeys: uniqueKeys, contracted: contracted,
            renamingIdentifier: object["renamingIdentifier"] as? String)
    }

    private static func type(_ value: Any?, at location: String) throws(SchemaError) -> AttributeType {
        guard let name = value as? String else {
            throw SchemaError(.unknownType, at: location, "missing 'type'")
        }
        guard let type = AttributeType(rawValue: name) else {
            throw SchemaError(
                .unknownType, at: location,
                "unknown column type '\(name)' (expected one of \(AttributeType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return type
    }
}
