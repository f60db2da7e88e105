import Foundation
import LogsyncPlatform
import LogsyncSyncthing
import Synchronization

/// Two real Syncthing instances (Debian's `syncthing`, 1.19) on 127.0.0.1 for tests and benches, each
/// with its own home and folder in `directory`, sharing one folder (``folderID``) with each other only:
/// devices introduced by id at `tcp://127.0.0.1:PORT`, the GUI/REST API on a loopback port with a known
/// API key, global and local discovery, relays, NAT traversal, usage reports and upgrades off.
///
/// Ports are picked free (bound to port 0, then released) and picked again, with both configurations
/// rewritten, if an instance cannot listen. Every wait has a deadline; the calls block their thread (a
/// test runs them with ``onOwnThread(_:)``). Instances still running when the pair is deinitialized are
/// killed.
public final class SyncthingPair: Sendable {
    /// The Syncthing folder both instances share.
    public static let folderID = "logsync"

    /// The `.stignore` docs/carriers.md recommends for a folder that carries logsync's shared folder:
    /// segments being written (moved into place once complete) never travel. Syncthing's own temporary
    /// files are never synced anyway.
    public static let stignore = """
        // logsync: segments being written; each is moved into place once complete
        .*.lseg.*.tmp

        """

    public struct Instance: Sendable {
        public let name: String
        public let home: String
        /// The folder this instance shares (``SyncthingPair/folderID``).
        public let folder: String
        public let deviceID: String
        public let apiKey: String
        public fileprivate(set) var listenPort = 0
        public fileprivate(set) var guiPort = 0

        /// The REST address, `http://127.0.0.1:PORT`.
        public var url: String { "http://127.0.0.1:\(guiPort)" }
    }

    public let directory: TemporaryDirectory
    /// Syncthing's `fsWatcherDelayS` and `rescanIntervalS` in the shared folder's configuration.
    public let watcherDelaySeconds: Int
    public let rescanIntervalSeconds: Int
    private let state: Mutex<State>

    private struct State {
        var instances: [Instance]
        var processes: [Subprocess?] = [nil, nil]
        var previousLogs = ["", ""]
    }

    /// Makes both homes (keys, certificates, device ids) and folders; nothing runs yet. `.stignore` is
    /// written in each folder.
    public init(
        directory: TemporaryDirectory, watcherDelaySeconds: Int = 1, rescanIntervalSeconds: Int = 3_600, executable: String = "syncthing"
    ) throws {
        self.directory = directory
        self.watcherDelaySeconds = watcherDelaySeconds
        self.rescanIntervalSeconds = rescanIntervalSeconds
        var instances: [Instance] = []
        for name in ["a", "b"] {
            let home = directory.file("syncthing-\(name)")
            let folder = directory.file("shared-\(name)")
            try FileManager.default.createDirectory(atPath: folder + "/.stfolder", withIntermediateDirectories: true)
            try Self.stignore.write(toFile: folder + "/.stignore", atomically: true, encoding: .utf8)
            let generated = try Self.runToEnd(
                executable, ["generate", "--home", home, "--no-default-folder", "--skip-port-probing"], timeout: .seconds(30))
            guard let line = generated.split(separator: "\n").first(where: { $0.contains("Device ID:") }),
                let id = line.split(separator: " ").last.map(String.init)
            else { throw SyncthingPairError("`syncthing generate` printed no device id:\n\(generated)") }
            instances.append(Instance(name: name, home: home, folder: folder, deviceID: id, apiKey: "logsync-test-\(name)-" + UUID().uuidString.prefix(8)))
        }
        state = Mutex(State(instances: instances))
    }

    deinit {
        for process in state.withLock({ $0.processes }) {
            process?.process.terminate(SIGKILL)
        }
    }

    public var instances: [Instance] { state.withLock { $0.instances } }
    public func instance(_ index: Int) -> Instance { instances[index] }

    /// A client of instance `index`'s REST API.
    package func client(_ index: Int, timeoutMilliseconds: Int = 2_000) -> SyncthingClient {
        let instance = instance(index)
        return SyncthingClient(url: instance.url, apiKey: instance.apiKey, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Writes instance `index`'s API key to an owner-only file in `directory` and returns its path.
    public func apiKeyFile(_ index: Int) throws -> String {
        let path = try directory.write("syncthing-\(instance(index).name).key", instance(index).apiKey + "\n")
        try DurableFiles.setPermissions(of: path, to: 0o600)
        return path
    }

    /// Everything instance `index` logged so far.
    public func log(_ index: Int) -> String {
        state.withLock { $0.previousLogs[index] + ($0.processes[index]?.stdout ?? "") + ($0.processes[index]?.stderr ?? "") }
    }

    /// Starts both instances and waits until each answers and sees the other connected; picks new
    /// ports and starts again (up to three times) when one cannot listen.
    public func start(timeout: Duration = .seconds(30)) throws {
        var attempt = 0
        while true {
            attempt += 1
            try choosePorts()
            do {
                try start(0)
                try start(1)
                try awaitConnected(timeout: timeout)
                return
            } catch let error as SyncthingPairError where error.portTaken && attempt < 3 {
                stop(0)
                stop(1)
            }
        }
    }

    /// Starts instance `index` on the ports it had (a restart) and waits until its REST API answers.
    public func start(_ index: Int, timeout: Duration = .seconds(20)) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["STNOUPGRADE"] = "1"
        environment["STMONITORED"] = "yes"
        environment["STHASHING"] = "minio"
        environment["STNODEFAULTFOLDER"] = "1"
        let home = instance(index).home
        let process = try Subprocess(
            Tools.find("syncthing") ?? "/usr/bin/syncthing", ["serve", "--no-browser", "--no-restart", "--home", home], environment: environment)
        try process.closeInput()
        state.withLock { $0.processes[index] = process }
        let client = client(index, timeoutMilliseconds: 500)
        try Self.wait(timeout: timeout, "Syncthing \(instance(index).name)'s REST API to answer", log: { self.log(index) }) {
            guard process.process.isRunning else {
                let log = self.log(index)
                throw SyncthingPairError("Syncthing \(self.instance(index).name) exited (status \(process.process.terminationStatus)):\n\(log)", portTaken: log.contains("address already in use"))
            }
            return (try? client.ping()) != nil
        }
    }

    /// Waits until each instance sees the other connected.
    public func awaitConnected(timeout: Duration = .seconds(30)) throws {
        let (a, b) = (instance(0), instance(1))
        try Self.wait(timeout: timeout, "the two Syncthing instances to connect", log: { "a:\n\(self.log(0))\nb:\n\(self.log(1))" }) {
            for index in 0..<2 where self.state.withLock({ $0.processes[index]?.process.isRunning != true }) {
                let log = self.log(index)
                throw SyncthingPairError("Syncthing \(self.instance(index).name) is not running:\n\(log)", portTaken: log.contains("address already in use"))
            }
            let seenByA = (try? self.client(0).connections())?[b.deviceID] == true
            let seenByB = (try? self.client(1).connections())?[a.deviceID] == true
            return seenByA && seenByB
        }
    }

    /// SIGTERM to instance `index`, then waits (10 s, then SIGKILL) for its exit.
    public func stop(_ index: Int) {
        guard let process = state.withLock({ $0.processes[index] }) else { return }
        process.process.stop(grace: .seconds(10))
        state.withLock { state in
            state.previousLogs[index] += process.stdout + process.stderr
            state.processes[index] = nil
        }
    }

    public func stopAll() {
        stop(0)
        stop(1)
    }

    // MARK: - Configuration

    private func choosePorts() throws {
        let ports = try Self.freePorts(4)
        state.withLock { state in
            for index in 0..<2 {
                state.instances[index].listenPort = ports[index]
                state.instances[index].guiPort = ports[2 + index]
            }
        }
        for index in 0..<2 {
            try configuration(for: index).write(toFile: instance(index).home + "/config.xml", atomically: true, encoding: .utf8)
        }
    }

    /// Instance `index`'s `config.xml`: the shared folder with both devices, both devices by address,
    /// the GUI on loopback with the API key, and everything that reaches beyond this machine off.
    private func configuration(for index: Int) -> String {
        let me = instance(index)
        let all = instances
        let devices = all.map { "        <device id=\"\($0.deviceID)\"></device>" }.joined(separator: "\n")
        let addresses = all.map {
            "    <device id=\"\($0.deviceID)\" name=\"\($0.name)\" compression=\"metadata\"><address>tcp://127.0.0.1:\($0.listenPort)</address><autoAcceptFolders>false</autoAcceptFolders></device>"
        }.joined(separator: "\n")
        return """
            <configuration version="36">
                <folder id="\(Self.folderID)" label="\(Self.folderID)" path="\(me.folder)" type="sendreceive" rescanIntervalS="\(rescanIntervalSeconds)" fsWatcherEnabled="true" fsWatcherDelayS="\(watcherDelaySeconds)" ignorePerms="false" autoNormalize="true">
            \(devices)
                </folder>
            \(addresses)
                <gui enabled="true" tls="false"><address>127.0.0.1:\(me.guiPort)</address><apikey>\(me.apiKey)</apikey></gui>
                <options>
                    <listenAddress>tcp://127.0.0.1:\(me.listenPort)</listenAddress>
                    <globalAnnounceEnabled>false</globalAnnounceEnabled>
                    <localAnnounceEnabled>false</localAnnounceEnabled>
                    <relaysEnabled>false</relaysEnabled>
                    <natEnabled>false</natEnabled>
                    <startBrowser>false</startBrowser>
                    <urAccepted>-1</urAccepted>
                    <autoUpgradeIntervalH>0</autoUpgradeIntervalH>
                    <crashReportingEnabled>false</crashReportingEnabled>
                </options>
            </configuration>

            """
    }

    // MARK: - Helpers

    /// `count` distinct TCP ports free on 127.0.0.1 now: each bound to port 0 and released together.
    static func freePorts(_ count: Int) throws -> [Int] {
        var listeners: [UnixSocket] = []  // held until all are bound, so that the ports differ
        var ports: [Int] = []
        for _ in 0..<count {
            do {
                let (listener, port) = try LoopbackListener.listen(at: .init(host: "127.0.0.1", port: 0))
                listeners.append(listener)
                ports.append(port)
            } catch {
                throw SyncthingPairError("cannot bind a free port on 127.0.0.1: \(error)")
            }
        }
        withExtendedLifetime(listeners) {}
        return ports
    }

    /// Runs a command to its end (bounded) on this thread; its stdout and stderr.
    static func runToEnd(_ executable: String, _ arguments: [String], timeout: Duration) throws -> String {
        let process = try Subprocess(Tools.find(executable) ?? executable, arguments)
        try process.closeInput()
        let deadline = ContinuousClock.now + timeout
        while process.process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.process.terminate(SIGKILL)
                throw SyncthingPairError("\(executable) \(arguments.joined(separator: " ")) did not end within \(timeout)")
            }
            Pause.microseconds(5_000)
        }
        guard process.process.terminationStatus == 0 else {
            throw SyncthingPairError("\(executable) \(arguments.joined(separator: " ")) failed (\(process.process.terminationStatus)):\n\(process.stdout)\(process.stderr)")
        }
        // Its output, read to the end (bounded, in case something it started holds the pipes).
        let drained = ContinuousClock.now + .seconds(5)
        while !process.outputEnded, ContinuousClock.now < drained { Pause.microseconds(2_000) }
        return process.stdout + process.stderr
    }

    /// Checks `condition` every 10 ms until it holds, or throws naming `what` with `log()` once
    /// `timeout` has passed.
    static func wait(timeout: Duration, _ what: String, log: () -> String, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try condition() { return }
            guard ContinuousClock.now < deadline else { throw SyncthingPairError("not within \(timeout): \(what)\n\(log())") }
            Pause.microseconds(10_000)
        }
    }
}

public struct SyncthingPairError: Error, CustomStringConvertible {
    public let description: String
    /// The instance could not listen on a port chosen for it (taken meanwhile): worth another try.
    public let portTaken: Bool

    init(_ description: String, portTaken: Bool = false) {
        self.description = description
        self.portTaken = portTaken
    }
}
