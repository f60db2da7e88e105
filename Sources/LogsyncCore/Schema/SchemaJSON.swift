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
        var entities: [Entity] = []
        for (index, entityObject) in entityObjects.enumerated() {
            entities.append(try Self.entity(from: entityObject, at: "$.entities[\(index)]"))
        }
        self.init(version: version, entities: entities)
        try validate()
    }

    private static func entity(from object: [String: Any], at path: String) throws(SchemaError) -> Entity {
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
        for attributeObject in object["attributes"] as? [[String: Any]] ?? [] {
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
                defaultValue = isFloat ? .real(value.doubleValue) : .integer(value.int64Value)
            default: throw SchemaError(.invalidDefault, at: location, "'default' must be a string or a number")
            }
            attributes.append(
                Attribute(
                    attributeName, try type(attributeObject["type"], at: location),
                    optional: attributeObject["optional"] as? Bool ?? true, default: defaultValue,
                    preservedOnDelete: attributeObject["preservedOnDelete"] as? Bool ?? false))
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
        return Entity(name, primaryKey: key, attributes: attributes, relationships: relationships, uniqueKeys: uniqueKeys)
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
