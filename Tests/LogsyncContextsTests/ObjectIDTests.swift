import Foundation
import LogsyncContexts
import Testing

@Suite("object ids and references")
struct ObjectIDTests {
    struct Labelled: Record {
        static let entityName = "Label"
        var id = UUID()
    }

    @Test("an object id names the entity (the type's name unless declared) and the lowercase key")
    func objectIDs() {
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        #expect(Folder(id: id).objectID.description == "Folder/e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
        #expect(Labelled(id: id).objectID.entity == "Label")
        #expect(Reference<Folder>(id).objectID == Folder(id: id).objectID)
    }

    @Test("a reference encodes as the destination's key alone")
    func referenceCoding() throws {
        let id = UUID()
        let data = try JSONEncoder().encode([Reference<Folder>(id)])
        #expect(String(decoding: data, as: UTF8.self) == "[\"\(id.uuidString)\"]")
        #expect(try JSONDecoder().decode([Reference<Folder>].self, from: data) == [Reference(id)])
    }
}
