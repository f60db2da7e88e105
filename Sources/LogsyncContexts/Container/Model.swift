import Foundation
import LogsyncCore
import Synchronization

/// The schema as the contexts of one container use it: each entity's columns, and a row coder per record
/// type, built once.
final class Model: Sendable {
    let schema: Schema
    private let entities: [String: EntityColumns]
    private let coders = Mutex<[ObjectIdentifier: RowCoder]>([:])

    init(schema: Schema) throws {
        self.schema = schema
        var entities: [String: EntityColumns] = [:]
        for entity in schema.entities where entity.primaryKey != nil {
            entities[entity.name] = try EntityColumns(entity, schema: schema)
        }
        self.entities = entities
    }

    func columns(of entity: String) throws -> EntityColumns {
        guard let columns = entities[entity] else {
            throw ContextError(
                .unknownEntity,
                "'\(entity)' is not an entity of the schema (entities: \(entities.keys.sorted().joined(separator: ", ")))",
                entity: entity)
        }
        return columns
    }

    func coder<R: Record>(for type: R.Type) throws -> RowCoder {
        let key = ObjectIdentifier(type)
        if let coder = coders.withLock({ $0[key] }) { return coder }
        let coder = try RowCoder(type, schema: schema)
        coders.withLock { $0[key] = coder }
        return coder
    }
}
