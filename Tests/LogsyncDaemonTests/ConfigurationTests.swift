import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncDaemon
import LogsyncTestKit
import Testing

@Suite("syncd configuration")
struct ConfigurationTests {
    private func load(_ text: String, in directory: TemporaryDirectory) throws(ConfigError) -> DaemonConfiguration {
        let file = (try? directory.write("syncd.toml", text)) ?? directory.file("syncd.toml")
        return try DaemonConfiguration.load(file: file, environment: ["HOME": directory.path])
    }

    @Test("every key is read, relative paths resolve against the file's folder, defaults fill the rest")
    func readsKeys() throws {
        let directory = try TemporaryDirectory("cfg")
        try FileManager.default.createDirectory(atPath: directory.file("shared"), withIntermediateDirectories: false)
        let configuration = try load("""
            # a comment
            [store]
            path = "data/store.sqlite"   # trailing comment

            [sync]
            account = "alice"
            shared_folder = "shared"
            rescan_interval_ms = 5_000
            """, in: directory)
        #expect(configuration.storePath == directory.file("data/store.sqlite"))
        #expect(configuration.sharedFolder == directory.file("shared"))
        #expect(configuration.account == "alice")
        #expect(configuration.rescanIntervalMilliseconds == 5_000)
        #expect(configuration.segmentChanges == 2_000)
        #expect(configuration.source == directory.file("syncd.toml"))
    }

    @Test("errors name the file and the line", arguments: [
        ("[sync]\naccount = 42\n", 2, "must be a string, found an integer"),
        ("[sync]\nrescan_interval_ms = \"soon\"\n", 2, "must be an integer, found a string"),
        ("[sync]\nacount = \"x\"\n", 2, "unknown key 'sync.acount'"),
        ("[nope]\nx = 1\n", 2, "unknown key 'nope.x'"),
        ("\n\n[sync]\nshared_folder = \"/does/not/exist\"\n", 4, "shared folder /does/not/exist does not exist"),
        ("[sync]\naccount = \"a\"\naccount = \"b\"\n", 3, "set twice (first on line 2)"),
        ("[sync\n", 1, "closing ']'"),
        ("[sync]\naccount = unquoted\n", 2, "is not a value"),
        ("[sync]\nbatch_changes = 0\n", 2, "must be an integer between 1 and"),
        ("[control]\nsocket = \"/tmp/\(String(repeating: "x", count: 120))\"\n", 2, "Unix sockets allow 107"),
        ("[sync]\naccount = \"../../etc\"\n", 2, "'sync.account' has characters other than letters, digits"),
        ("[sync]\naccount = \"..\"\n", 2, "'sync.account' starts with '.' (it would name another folder)"),
        ("# a comment\n[sync]\naccount = \"\(String(repeating: "a", count: 129))\"\n", 3, "'sync.account' is 129 bytes long"),
    ])
    func errorsHaveLines(text: String, line: Int, message: String) throws {
        let directory = try TemporaryDirectory("cfg")
        let error = try #require(throws: ConfigError.self) { try load(text, in: directory) }
        #expect(error.file == directory.file("syncd.toml"))
        #expect(error.line == line, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }

    @Test("[syncthing]: the address, the API key from its file or systemd's credential, the folder id, the timeout")
    func syncthingTable() throws {
        let directory = try TemporaryDirectory("cfg")
        try directory.write("st.key", "abc123\n")
        let configuration = try load("""
            [syncthing]
            url = "http://127.0.0.1:8384"
            api_key_file = "st.key"
            folder_id = "logsync"
            timeout_ms = 500
            """, in: directory)
        let syncthing = try #require(configuration.syncthing)
        #expect(syncthing.url == "http://127.0.0.1:8384" && syncthing.apiKeyFile == directory.file("st.key"))
        #expect(syncthing.folderID == "logsync" && syncthing.timeoutMilliseconds == 500)
        #expect(try SyncthingConnection.apiKey.read(syncthing.apiKeyFile) == "abc123")

        // Without api_key_file: the credential systemd's LoadCredential=syncthing-api-key:FILE provides.
        try FileManager.default.createDirectory(atPath: directory.file("credentials"), withIntermediateDirectories: false)
        try directory.write("credentials/syncthing-api-key", "fromsystemd")
        let file = try directory.write("syncd.toml", "[syncthing]\nurl = \"http://127.0.0.1:8384\"\n")
        let credential = try DaemonConfiguration.load(file: file, environment: ["HOME": directory.path, "CREDENTIALS_DIRECTORY": directory.file("credentials")])
        #expect(credential.syncthing?.apiKeyFile == directory.file("credentials/syncthing-api-key") && credential.syncthing?.folderID == nil)
        #expect(credential.syncthing?.timeoutMilliseconds == 2_000)
        #expect(try load("[sync]\naccount = \"a\"\n", in: directory).syncthing == nil)
    }

    @Test("[syncthing] errors say what failed, where, and what to do", arguments: [
        ("[syncthing]\napi_key_file = \"k\"\n", 2, "needs 'url'"),
        ("[syncthing]\nurl = \"127.0.0.1:8384\"\n", 2, "must be http(s)://host[:port]"),
        ("[syncthing]\nurl = \"http://127.0.0.1:8384\"\napi_key = \"secret\"\n", 3, "never written in syncd.toml"),
        ("[syncthing]\nurl = \"http://127.0.0.1:8384\"\nfolder = \"x\"\n", 3, "unknown key 'syncthing.folder' (known keys in [syncthing]: url, api_key_file"),
        ("[syncthing]\nurl = \"http://127.0.0.1:8384\"\n", 2, "set 'syncthing.api_key_file' to a file holding it, or run under systemd with LoadCredential=syncthing-api-key:FILE"),
        ("[syncthing]\nurl = \"http://127.0.0.1:8384\"\ntimeout_ms = 0\n", 3, "must be an integer between 1 and"),
        ("[relay]\nurl = \"http://127.0.0.1:1\"\ntoken_file = \"k\"\n[syncthing]\nurl = \"http://127.0.0.1:8384\"\napi_key_file = \"k\"\n", 2, "remove one of the two tables"),
    ])
    func syncthingErrors(text: String, line: Int, message: String) throws {
        let directory = try TemporaryDirectory("cfg")
        try directory.write("k", "key")
        let error = try #require(throws: ConfigError.self) { try load(text, in: directory) }
        #expect(error.file == directory.file("syncd.toml") && error.line == line, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }

    @Test("a missing or malformed Syncthing API key file is named with what to put there")
    func syncthingKeyFile() throws {
        let directory = try TemporaryDirectory("cfg")
        let missing = try #require(throws: ConfigError.self) {
            try load("[syncthing]\nurl = \"http://127.0.0.1:8384\"\napi_key_file = \"none.key\"\n", in: directory)
        }
        #expect(missing.file == directory.file("none.key") && missing.message.contains("cannot read the Syncthing API key file"), "\(missing)")
        #expect(missing.message.contains("<apikey> in its config.xml"), "\(missing)")
        try directory.write("two.key", "two words")
        let malformed = try #require(throws: ConfigError.self) {
            try load("[syncthing]\nurl = \"http://127.0.0.1:8384\"\napi_key_file = \"two.key\"\n", in: directory)
        }
        #expect(malformed.message.contains("must hold one Syncthing API key"), "\(malformed)")
    }

    @Test("without a file: systemd's directories, else XDG, else the home directory")
    func defaultPaths() {
        let systemd = DaemonPaths(environment: ["STATE_DIRECTORY": "/var/lib/logsync:/other", "RUNTIME_DIRECTORY": "/run/logsync", "HOME": "/home/u"])
        #expect(systemd.state == "/var/lib/logsync")
        #expect(systemd.runtime == "/run/logsync")
        let xdg = DaemonPaths(environment: ["XDG_STATE_HOME": "/x/state", "XDG_RUNTIME_DIR": "/x/run", "XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"])
        #expect(xdg.state == "/x/state/logsync")
        #expect(xdg.runtime == "/x/run/logsync")
        #expect(xdg.defaultConfigFiles.first == "/x/cfg/logsync/syncd.toml")
    }

    @Test("a 10 MB value is refused with its file and line, and echoed in a few dozen characters, not 10 MB")
    func hugeValueIsTruncated() async throws {
        let directory = try TemporaryDirectory("cfg")
        let huge = String(repeating: "x", count: 10 << 20)
        let file = try directory.write("syncd.toml", "[store]\npath = \"store.sqlite\"\n[sync]\naccount = \"\(huge)\"\n")
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", file])
        #expect(result.status == 78, "\(result.stderr.prefix(500))")
        #expect(result.stderr.contains("\(file):4: 'sync.account' is \(10 << 20) bytes long"), "\(result.stderr.prefix(500))")
        #expect(result.stderr.contains("… (\(10 << 20) bytes)"), "\(result.stderr.prefix(500))")
        #expect(result.stderr.utf8.count < 1_000, "stderr is \(result.stderr.utf8.count) bytes")
        #expect(!FileManager.default.fileExists(atPath: directory.file("store.sqlite")))
    }

    /// Starts syncd on `config` with systemd's state and runtime folders in `directory` (`state`, `run`),
    /// and waits until it listens on its control socket.
    private func startSyncd(config: String, in directory: TemporaryDirectory) async throws -> Subprocess {
        var environment = ProcessInfo.processInfo.environment
        environment["STATE_DIRECTORY"] = directory.file("state")
        environment["RUNTIME_DIRECTORY"] = directory.file("run")
        let process = try Subprocess(Products.path("syncd"), ["--config", config], environment: environment)
        let socket = directory.file("run") + "/syncd.sock"
        do {
            try await eventually(within: .seconds(20), "syncd to listen on \(socket):\n\(process.stderr)") {
                FileManager.default.fileExists(atPath: socket) || !process.process.isRunning
            }
        } catch {
            process.process.terminate()
            throw error
        }
        #expect(process.process.isRunning, "\(process.stderr)")
        return process
    }

    @Test("the default shared folder is syncd's to create, with or without a file; one a file names is not")
    func sharedFolderOwnership() throws {
        let directory = try TemporaryDirectory("cfg")
        let environment = ["HOME": directory.path, "STATE_DIRECTORY": directory.file("state")]
        let unnamed = try DaemonConfiguration.load(file: try directory.write("a.toml", "[sync]\naccount = \"x\"\n"), environment: environment)
        #expect(unnamed.sharedFolder == directory.file("state") + "/shared")
        #expect(unnamed.ownsSharedFolder)
        try FileManager.default.createDirectory(atPath: directory.file("mnt"), withIntermediateDirectories: false)
        let named = try DaemonConfiguration.load(file: try directory.write("b.toml", "[sync]\nshared_folder = \"mnt\"\n"), environment: environment)
        #expect(!named.ownsSharedFolder)
        var defaults = try DaemonConfiguration.load(file: nil, environment: environment)
        #expect(defaults.ownsSharedFolder)
        defaults.sharedFolder = directory.file("mnt")
        #expect(!defaults.ownsSharedFolder, "a folder set in code is not the default either")
    }

    @Test("through a relay syncd creates no shared folder: its state folder holds only what it uses")
    func relayCreatesNoSharedFolder() async throws {
        let directory = try TemporaryDirectory("cfg")
        let token = try directory.write("relay.token", "relay-test-token\n")
        let file = try directory.write("syncd.toml", "[relay]\nurl = \"http://127.0.0.1:9\"\ntoken_file = \"\(token)\"\n")
        let process = try await startSyncd(config: file, in: directory)
        defer { process.process.terminate() }
        #expect(!FileManager.default.fileExists(atPath: directory.file("state") + "/shared"))
        #expect(try await process.terminate() == 0, "\(process.stderr)")
    }

    @Test("through a relay a shared_folder left in the file is not checked: it is not used")
    func relayIgnoresSharedFolder() throws {
        let directory = try TemporaryDirectory("cfg")
        let token = try directory.write("relay.token", "relay-test-token\n")
        let folder = "[sync]\nshared_folder = \"/does/not/exist\"\n"
        let relay = try directory.write("relay.toml", folder + "[relay]\nurl = \"http://127.0.0.1:9\"\ntoken_file = \"\(token)\"\n")
        #expect(try DaemonConfiguration.load(file: relay).relay != nil)
        let shared = try directory.write("shared.toml", folder)
        let refused = #expect(throws: ConfigError.self, "without [relay] the folder must exist") { try DaemonConfiguration.load(file: shared) }
        #expect(refused?.description.contains("shared folder /does/not/exist does not exist") == true, "\(String(describing: refused))")
    }

    @Test("syncd starts on the shipped config/syncd.toml as it is, creating its default shared folder")
    func startsOnShippedConfig() async throws {
        let directory = try TemporaryDirectory("cfg")
        let process = try await startSyncd(config: Products.packageRoot + "/config/syncd.toml", in: directory)
        defer { process.process.terminate() }
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: directory.file("state") + "/shared", isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(try await process.terminate() == 0, "\(process.stderr)")
    }

    @Test("syncd exits with the file and line of a malformed configuration, and creates nothing")
    func syncdReportsBadConfig() async throws {
        let directory = try TemporaryDirectory("cfg")
        let file = try directory.write("syncd.toml", "[store]\npath = \"store.sqlite\"\n[sync]\nshared_folder = 7\n")
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", file])
        #expect(result.status == 78)
        #expect(result.stderr.contains("\(file):4:"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("store.sqlite")))
    }

    @Test("config/syncd.toml documents every key, in its table, with its default")
    func exampleDocumentsEveryKey() throws {
        let root = Products.packageRoot
        let text = try String(contentsOfFile: root + "/config/syncd.toml", encoding: .utf8)
        var table = ""
        var documented: [String: String] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") { table = String(line.dropFirst().prefix { $0 != "]" }) }
            if line.hasPrefix("# "), let equals = line.firstIndex(of: "="), !line.dropFirst(2).contains(" ") || line.contains(" = ") {
                let name = line.dropFirst(2)[..<equals].trimmingCharacters(in: .whitespaces)
                if !name.contains(" ") { documented["\(table).\(name)"] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces) }
            }
        }
        func unquoted(_ value: String) -> String { value.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        for key in DaemonConfiguration.allKeys {
            let shown = documented["\(key.table).\(key.name)"]
            #expect(shown != nil, "[\(key.table)] \(key.name) is documented in config/syncd.toml")
            // A key without a default is shown with an example value.
            if key.defaultValue != "(none)", let shown {
                #expect(unquoted(shown) == unquoted(key.defaultValue), "[\(key.table)] \(key.name) = \(key.defaultValue) in config/syncd.toml, not \(shown)")
            }
        }
    }

    @Test("every key of syncd.toml is either applied by a reload or reported as needing a restart, as its entry in the key table says")
    func everyKeyReloadsOrNeedsRestart() throws {
        let directory = try TemporaryDirectory("cfg-reload")
        // Files the keys' example values name, and the tables some keys need beside them.
        for name in ["token", "relay-token", "ca.pem", "syncthing.key", "st.key", "seal.key", "account.key"] { try directory.write(name, "abc123\n") }
        try directory.write("schema.json", Schema.notes.json)
        try FileManager.default.createDirectory(atPath: directory.file("elsewhere"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.file("shared"), withIntermediateDirectories: true)
        let bases = [
            "relay": "[relay]\nurl = \"http://127.0.0.1:1\"\ntoken_file = \"relay-token\"\n",
            "syncthing": "[syncthing]\nurl = \"http://127.0.0.1:8384\"\napi_key_file = \"st.key\"\n",
            "seal": "[seal]\nkey_file = \"seal.key\"\n",
        ]
        var applied = 0, restart = 0
        for key in DaemonConfiguration.allKeys {
            let base = bases[key.table] ?? "[sync]\nshared_folder = \"shared\"\n"
            let old = try load(base, in: directory)
            // The key set to its example: its line in the base replaced, or added under its table.
            var lines = base.split(separator: "\n").map(String.init)
            if let index = lines.firstIndex(where: { $0.hasPrefix("\(key.name) = ") }), lines.contains("[\(key.table)]") {
                lines[index] = "\(key.name) = \(key.example)"
            } else if let header = lines.firstIndex(of: "[\(key.table)]") {
                lines.insert("\(key.name) = \(key.example)", at: header + 1)
            } else {
                lines += ["[\(key.table)]", "\(key.name) = \(key.example)"]
            }
            let new = try load(lines.joined(separator: "\n") + "\n", in: directory)
            #expect(key.differs(old, new), "\(key.fullName) = \(key.example) changes the configuration")
            let (result, needsRestart) = DaemonConfiguration.reloaded(from: old, to: new)
            switch key.reload {
            case .applies:
                applied += 1
                #expect(!key.differs(result, new) && !needsRestart.contains(key.fullName), "a reload applies \(key.fullName): \(needsRestart)")
            case .needsRestart:
                restart += 1
                #expect(needsRestart.contains(key.fullName) && !key.differs(result, old), "a reload reports \(key.fullName) as needing a restart: \(needsRestart)")
            }
            #expect(Set(needsRestart).isSubset(of: [key.fullName]), "changing \(key.fullName) alone touches no other key: \(needsRestart)")
        }
        #expect(applied + restart == DaemonConfiguration.allKeys.count && applied > 0 && restart > 0)
    }
}
