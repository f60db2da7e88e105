import LogsyncCore

extension Schema {
    /// The notes of the README's tours and of `syncd`'s embedded defaults: folders holding notes, deleted
    /// with their folder, titles and folder names kept in tombstones.
    public static let notes = Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .text, optional: false, default: "", preservedOnDelete: true)]),
        Entity(
            "Note",
            attributes: [
                Attribute("title", .text, preservedOnDelete: true), Attribute("body", .text),
                Attribute("pinned", .bool, optional: false, default: 0),
            ],
            relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade)]),
    ])
}
