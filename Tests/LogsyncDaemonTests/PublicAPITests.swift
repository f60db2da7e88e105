import Foundation
import LogsyncTestKit
import Testing

/// The library products' public API is what `docs/api/public-api.txt` lists: a change to it is made on
/// purpose, with `scripts/public-api.py --update`, never by accident.
@Suite("public API")
struct PublicAPITests {
    @Test(
        "the public API of LogsyncCore, LogsyncStore, LogsyncSync and LogsyncContexts matches the committed baseline",
        .enabled(if: Tools.installed("python3"), "python3 is not installed (scripts/install-deps.sh installs it)"))
    func matchesBaseline() async throws {
        let script = Products.packageRoot + "/scripts/public-api.py"
        let result = try await Subprocess.run(
            try #require(Tools.find("python3")), [script, "--modules", Products.directory + "/Modules"], timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("public API unchanged"), "\(result.stdout)")
    }
}
