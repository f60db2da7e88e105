import Foundation
import LogsyncTestKit
import Testing

/// Clients of `syncd` (`syncctl`, `notes`) depend on `LogsyncControl`, never on the daemon: they must not
/// carry the sync engine, the transports, swift-log or libsystemd. Checked in the package's dependency
/// graph and in the built binaries.
@Suite("what the clients link")
struct LinkageTests {
    static let clients = ["syncctl", "notes"]
    /// Modules a client must not reach, directly or through another module.
    static let forbiddenModules: Set = ["LogsyncDaemon", "LogsyncSync", "LogsyncTransport", "LogsyncSystemd", "CSystemd"]
    static let forbiddenProducts: Set = ["Logging"]

    @Test("in the package's dependency graph, syncctl and notes reach neither the daemon, the engine, the transports, swift-log nor libsystemd")
    func dependencyGraph() async throws {
        // A scratch folder of its own: the package's .build is locked by the running `swift test`.
        let scratch = try TemporaryDirectory("graph")
        let dump = try await Subprocess.run(
            "/usr/bin/env", ["swift", "package", "--package-path", Products.packageRoot, "--scratch-path", scratch.path, "dump-package"],
            timeout: .seconds(120))
        try #require(dump.status == 0, "swift package dump-package failed: \(dump.stderr)")
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let targets = try #require(manifest["targets"] as? [[String: Any]])
        var modules: [String: [String]] = [:]
        var products: [String: [String]] = [:]
        for target in targets {
            let name = try #require(target["name"] as? String)
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                if let byName = dependency["byName"] as? [Any], let module = byName.first as? String { modules[name, default: []].append(module) }
                if let target = dependency["target"] as? [Any], let module = target.first as? String { modules[name, default: []].append(module) }
                if let product = dependency["product"] as? [Any], let module = product.first as? String { products[name, default: []].append(module) }
            }
        }
        #expect(modules["syncd"]?.contains("LogsyncDaemon") == true, "the graph was read: syncd depends on the daemon")
        for client in Self.clients {
            var reached: Set<String> = [], queue = [client]
            while let next = queue.popLast() {
                for module in modules[next] ?? [] where reached.insert(module).inserted { queue.append(module) }
            }
            #expect(reached.contains("LogsyncControl"), "\(client) talks to syncd through LogsyncControl: \(reached.sorted())")
            #expect(reached.isDisjoint(with: Self.forbiddenModules), "\(client) reaches \(reached.intersection(Self.forbiddenModules).sorted())")
            let reachedProducts = Set(([client] + reached).flatMap { products[$0] ?? [] })
            #expect(reachedProducts.isDisjoint(with: Self.forbiddenProducts), "\(client) uses \(reachedProducts.sorted())")
        }
    }

    @Test(
        "the built syncctl and notes load no libsystemd and hold no symbol of the daemon, the engine, the transports or swift-log",
        .enabled(if: Tools.installed("nm"), "nm (binutils) is not installed"), arguments: clients)
    func builtBinaries(client: String) async throws {
        let binary = Products.path(client)
        let libraries = try await Subprocess.run("/usr/bin/ldd", [binary])
        try #require(libraries.status == 0, "\(libraries)")
        #expect(!libraries.stdout.contains("libsystemd"), "\(client) loads libsystemd:\n\(libraries.stdout)")
        let symbols = try await Subprocess.run(try #require(Tools.find("nm")), [binary], timeout: .seconds(120))
        try #require(symbols.status == 0 && symbols.stdout.contains(Self.mangled("LogsyncControl")), "nm read the binary and found LogsyncControl: \(symbols.stderr)")
        for module in Self.forbiddenModules.union(Self.forbiddenProducts) {
            #expect(!symbols.stdout.contains(Self.mangled(module)), "\(client) holds symbols of \(module)")
        }
    }

    @Test("the symbol check can fail: syncd holds symbols of the engine and swift-log", .enabled(if: Tools.installed("nm"), "nm (binutils) is not installed"))
    func symbolCheckSeesTheDaemon() async throws {
        let daemon = try await Subprocess.run(try #require(Tools.find("nm")), [Products.path("syncd")], timeout: .seconds(120))
        #expect(daemon.stdout.contains(Self.mangled("LogsyncSync")) && daemon.stdout.contains(Self.mangled("Logging")))
    }

    /// Swift mangles a module name as its length and the name.
    static func mangled(_ module: String) -> String { "\(module.count)\(module)" }
}
