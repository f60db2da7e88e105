import LogsyncCore

/// How a context resolves a property that it changed and that the store changed too since the context
/// last handed the object out: by property, like Core Data's `NSMergeByPropertyObjectTrumpMergePolicy`
/// and `NSMergeByPropertyStoreTrumpMergePolicy`. Properties changed on one side only are never in
/// conflict: a remote change to one property and a local change to another both survive.
///
/// Whichever side wins, the context reports every conflict (``MergeConflict``): a local edit is never
/// dropped without telling the app.
public struct MergePolicy: Sendable, Hashable {
    /// Which side wins a conflict.
    public enum Side: String, Sendable, Hashable {
        /// The context's unsaved value wins; saving writes it over the store's.
        case mine
        /// The store's value wins; the context's unsaved value for that property is discarded.
        case store
    }

    /// The side that wins a conflict on any property not listed in ``overrides``.
    public var preferred: Side
    /// Winners for single properties, keyed `"Entity.column"`: `["Note.title": .store]`.
    public var overrides: [String: Side]

    /// A policy where `preferred` wins, except for the properties named in `overrides`.
    public init(preferring preferred: Side, overrides: [String: Side] = [:]) {
        self.preferred = preferred
        self.overrides = overrides
    }

    /// The context's changes win, property by property.
    public static let mineWins = MergePolicy(preferring: .mine)
    /// The store's changes win, property by property.
    public static let storeWins = MergePolicy(preferring: .store)

    /// The winner for one property.
    public func winner(entity: String, column: String) -> Side {
        overrides["\(entity).\(column)"] ?? preferred
    }

    /// The winner for a conflict about the whole object (deleted on one side, edited on the other): the
    /// preferred side.
    var objectWinner: Side { preferred }
}

/// A change the context made and the store contradicts, and how it was resolved.
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// What the two sides did.
    public enum Kind: Sendable, Hashable {
        /// Both sides changed these properties, each to a different value.
        case properties([String])
        /// The context edited an object that was deleted from the store.
        case deletedWhileEdited
        /// The context deleted an object that the store changed meanwhile.
        case updatedWhileDeleted
        /// The context inserted an object whose id the store already holds.
        case insertedTwice
    }

    /// Which side won.
    public enum Resolution: Sendable, Hashable {
        /// The context's change stands and will be saved (a deleted object it edited is inserted again).
        case keptMine
        /// The context's change was discarded in favour of the store.
        case tookStore
        /// Several properties, resolved property by property: those kept, the rest took the store's value.
        case mixed(keptMine: [String])
    }

    /// The object concerned.
    public var objectID: ObjectID
    /// What the two sides did.
    public var kind: Kind
    /// Which side won, and for which properties.
    public var resolution: Resolution
    /// The context's values of the properties concerned.
    public var mine: [String: DatabaseValue]
    /// The store's values of the properties concerned; empty when the store no longer has the object.
    public var store: [String: DatabaseValue]

    /// One line: object, kind and resolution.
    public var description: String {
        "\(objectID): \(kind) -> \(resolution)"
    }
}
