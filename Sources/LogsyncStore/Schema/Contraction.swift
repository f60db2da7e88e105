import LogsyncCore
import LogsyncSQLite

/// Removes the columns of attributes a new schema contracts (``Entity/contracted``) from one entity,
/// inside the registration's transaction (`docs/schema-evolution.md`, "Removing an attribute").
///
/// A column's place in `_ls_entity.columns` is its bit in history masks and row states, so taking one
/// out moves every later column down a bit: history masks are shifted in SQL, and each of the entity's
/// row states is decoded with the old columns and encoded with the new ones, which drops the removed
/// column's register. The column itself goes with `ALTER TABLE … DROP COLUMN`, after the generated
/// triggers that name it (installed again when registration ends).
struct Contraction {
    let connection: Connection
    /// `_ls_entity.id` of the entity.
    let entityID: Int64
    /// The entity as the stored schema declares it, and its columns in bit order.
    let entity: Entity
    let columns: [String]

    /// Drops `removed` (current names of `entity`'s attributes) and returns the columns left, in bit order.
    func run(removing removed: [String]) throws -> [String] {
        guard !removed.isEmpty else { return columns }
        let table = SchemaSQL.quote(entity.name)
        for name in removed {
            do {
                try connection.execute("ALTER TABLE \(table) DROP COLUMN \(SchemaSQL.quote(name))")
            } catch {
                throw StoreError(
                    .schema,
                    "the schema contracts '\(entity.name).\(name)', but its column cannot be dropped (\(error.message)); an index or "
                        + "trigger of the app's own probably names it: drop that first, in the same release; nothing was changed",
                    path: connection.path, cause: error)
            }
        }
        var remaining = columns
        for name in removed {
            guard let bit = remaining.firstIndex(of: name) else { continue }
            // Every bit above `bit` moves down one; `bit` itself goes.
            try connection.execute(
                "UPDATE _ls_log SET cols = (cols & ((1 << ?1) - 1)) | ((cols >> (?1 + 1)) << ?1) WHERE entity = ?2 AND cols IS NOT NULL",
                [.integer(Int64(bit)), .integer(entityID)])
            remaining.remove(at: bit)
        }
        let before = Catalog.EntityInfo.alone(entity, id: entityID, columns: columns)
        var kept = entity
        kept.attributes.removeAll { removed.contains($0.name) }
        let after = Catalog.EntityInfo.alone(kept, id: entityID, columns: remaining)
        try StateRewrite(connection: connection, entityID: entityID).run(from: before, to: after) { _, _ in true }
        return remaining
    }
}
