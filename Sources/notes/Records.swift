import Foundation
import LogsyncContexts

/// A folder of notes: the `Folder` entity of `Schema.notes`.
struct Folder: Record {
    var id = UUID()
    var name = ""
}

/// A note: the `Note` entity of `Schema.notes`. Deleting its folder deletes it too.
struct Note: Record {
    var id = UUID()
    var title: String?
    var body: String?
    var pinned = false
    var folder: Reference<Folder>?
}
