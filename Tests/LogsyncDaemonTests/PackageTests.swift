import Foundation
import LogsyncCore
import LogsyncTestKit
import Testing

/// The Debian package (`scripts/package-deb.sh`), built from the test build's binaries, checked with
/// Debian's own tools.
@Suite("the Debian package")
struct PackageTests {
    /// In CI these come with `scripts/install-deps.sh`: missing there is a broken setup, not a skip.
    static var toolsAvailable: Bool {
        (Tools.installed("dpkg-deb") && Tools.installed("dpkg-shlibdeps") && Tools.installed("lintian") && Tools.installed("patchelf"))
            || ProcessInfo.processInfo.environment["CI"] != nil
    }

    @Test(
        "scripts/package-deb.sh builds a .deb lintian finds no error in; dpkg-deb lists and extracts it, and the extracted syncd and syncctl run",
        .enabled(if: toolsAvailable, "dpkg-dev, lintian and patchelf are not installed (scripts/install-deps.sh installs them)"))
    func debianPackage() async throws {
        let directory = try TemporaryDirectory("deb")
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_BIN_DIR"] = Products.directory
        let built = try await Subprocess.run(
            "/bin/bash", [Products.packageRoot + "/scripts/package-deb.sh", directory.file("out")], environment: environment, timeout: .seconds(600))
        #expect(built.status == 0, "package-deb.sh (lintian included): \(built)")
        let deb = try #require(built.stdout.split(separator: "\n").last.map(String.init), "\(built)")
        #expect(deb.hasSuffix("logsync_\(LogsyncVersion.current)_amd64.deb"), "\(deb)")

        let listed = try await Subprocess.run("/usr/bin/dpkg-deb", ["--contents", deb])
        #expect(listed.status == 0)
        for path in [
            "./usr/bin/syncd", "./usr/bin/syncctl", "./usr/bin/logsync", "./usr/bin/notes", "./usr/bin/sync-relay",
            "./usr/share/man/man1/syncd.1.gz", "./usr/share/bash-completion/completions/syncctl", "./lib/systemd/system/syncd.service",
            "./lib/systemd/system/syncd@.service", "./lib/systemd/system/sync-relay.service", "./usr/lib/systemd/user/syncd.service",
            "./etc/logsync/syncd.toml", "./etc/logsync/sync-relay.toml", "./usr/share/doc/logsync/copyright",
        ] {
            #expect(listed.stdout.contains(" \(path)\n"), "\(path) in the package:\n\(listed.stdout)")
        }
        let fields = try await Subprocess.run("/usr/bin/dpkg-deb", ["--field", deb, "Package", "Version", "Depends"])
        #expect(fields.stdout.contains("Package: logsync") && fields.stdout.contains("Version: \(LogsyncVersion.current)"), "\(fields)")
        #expect(fields.stdout.contains("libsqlite3-0") && fields.stdout.contains("libcurl4"), "shared libraries as dependencies: \(fields)")

        let control = directory.file("control"), tree = directory.file("tree")
        #expect(try await Subprocess.run("/usr/bin/dpkg-deb", ["--control", deb, control]).status == 0)
        let conffiles = try String(contentsOfFile: control + "/conffiles", encoding: .utf8)
        #expect(conffiles == "/etc/logsync/syncd.toml\n/etc/logsync/sync-relay.toml\n", "configuration kept on upgrade: \(conffiles)")
        let postinst = try String(contentsOfFile: control + "/postinst", encoding: .utf8)
        #expect(!postinst.contains("enable") && !postinst.contains("start"), "nothing enabled or started unasked:\n\(postinst)")
        #expect(try await Subprocess.run("/usr/bin/dpkg-deb", ["--extract", deb, tree]).status == 0)
        let unit = try String(contentsOfFile: tree + "/lib/systemd/system/syncd.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/bin/syncd ") && !unit.contains("/usr/local"), "\(unit)")
        // The package drops the build's path to the Swift toolchain (a release links the runtime in); a
        // debug build's binaries find it through the library path instead.
        let elf = try await Subprocess.run("/usr/bin/readelf", ["-d", Products.path("syncd")])
        let runpath = elf.stdout.split(separator: "\n").first { $0.contains("RUNPATH") || $0.contains("RPATH") }
            .flatMap { $0.split(separator: "[").last?.split(separator: "]").first }.map(String.init) ?? ""
        #expect(try await Subprocess.run("/usr/bin/readelf", ["-d", tree + "/usr/bin/syncd"]).stdout.contains("RUNPATH") == false)
        var run = ProcessInfo.processInfo.environment
        run["LD_LIBRARY_PATH"] = runpath.replacingOccurrences(of: "$ORIGIN", with: tree + "/usr/bin")
        let version = try await Subprocess.run(tree + "/usr/bin/syncd", ["--version"], environment: run)
        #expect(version.status == 0 && version.stdout == LogsyncVersion.current + "\n", "\(version)")
        let help = try await Subprocess.run(tree + "/usr/bin/syncctl", ["--help"], environment: run)
        #expect(help.status == 0 && help.stdout.contains("USAGE: syncctl"), "\(help)")
    }
}
