import Foundation

// Two builds of one target. Built with `-sanitize=fuzzer -DLOGSYNC_FUZZING` (scripts/decoder-fuzz.sh),
// there is no @main: libFuzzer's driver runs (logsync_fuzz_main below is only the symbol SwiftPM links as
// main), and LLVMFuzzerInitialize prepares the fixtures (and writes the seeds when asked). Built plainly
// (`swift build`), the @main below replays the files named on the command line through the same entry
// point, one line per file: what a crash's reproducer does, without libFuzzer.
//
//     logsync-fuzz FILE…               replay each file
//     logsync-fuzz --write-seeds DIR   write one valid input per mode (and a few more) into DIR
//
// Both builds take --write-seeds (the fuzzing build before libFuzzer reads its flags), and both honour
// LOGSYNC_FUZZ_MODE=NAME, which holds a run to one mode (Harness.pinnedMode).
//
// No file is named main.swift, so no file is top-level code and either build may have an entry point or
// not; SwiftPM compiles an executable's entry point as `logsync_fuzz_main` and links `main` to it.

enum Tool {
    static let usage = """
        usage: logsync-fuzz FILE...             replay inputs through the fuzz entry point
               logsync-fuzz --write-seeds DIR   write a seed corpus (one valid input per mode)
        """

    /// `--write-seeds DIR` among the arguments: writes the seeds and says so; nil when not asked.
    static func writeSeedsIfAsked(_ arguments: [String]) -> Int32? {
        guard let index = arguments.firstIndex(of: "--write-seeds") else { return nil }
        guard index + 1 < arguments.count else {
            printError("logsync-fuzz: --write-seeds needs a folder\n\(usage)")
            return 2
        }
        let folder = arguments[index + 1]
        do {
            let names = try Seeds.write(into: folder)
            print("logsync-fuzz: wrote \(names.count) seeds into \(folder)")
            return 0
        } catch {
            printError("logsync-fuzz: cannot write the seeds into \(folder): \(error)")
            return 1
        }
    }

    static func printError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

#if LOGSYNC_FUZZING

/// libFuzzer's driver (compiler-rt, FuzzerDriver.cpp): `int LLVMFuzzerRunDriver(int *argc, char ***argv,
/// int (*callback)(const uint8_t *, size_t))`. Declared by its symbol: a C declaration would need a C
/// target, and these arguments (three pointers) and the int result are passed alike by Swift's and C's
/// calling conventions.
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The executable's main. SwiftPM compiles an executable target's entry point under the name
/// `<module>_main` and links it with `--defsym main=logsync_fuzz_main`, so the target must define that
/// symbol even when libFuzzer brings its own main; this one runs libFuzzer's driver exactly as
/// libFuzzer's main does.
@_cdecl("logsync_fuzz_main")
public func logsyncFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return llvmFuzzerRunDriver(&argc, &argv) { data, size in logsyncFuzzTestOneInput(data, size) }
}

/// Called by libFuzzer before it reads its flags.
@_cdecl("LLVMFuzzerInitialize")
public func logsyncFuzzInitialize(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    let count = Int(argc.pointee)
    let arguments = (0..<count).compactMap { index in argv.pointee?[index].map { String(cString: $0) } }
    if let status = Tool.writeSeedsIfAsked(arguments) { exit(status) }
    _ = Harness.pinnedMode
    Fixtures.prepare()
    return 0
}

#else

@main
struct Replay {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let status = Tool.writeSeedsIfAsked(arguments) { exit(status) }
        guard !arguments.isEmpty, !arguments.contains("--help"), !arguments.contains("-h") else {
            Tool.printError(Tool.usage)
            exit(arguments.isEmpty ? 2 : 0)
        }
        Fixtures.prepare()
        var unreadable = 0
        for path in arguments {
            guard let bytes = Seeds.read(path) else {
                Tool.printError("\(path): cannot read it")
                unreadable += 1
                continue
            }
            let result = bytes.withUnsafeBufferPointer { logsyncFuzzTestOneInput($0.baseAddress, $0.count) }
            let (mode, outcome) = Harness.run(bytes)
            let what: String
            switch outcome {
            case .empty: what = "empty input"
            case .accepted(let description): what = "accepted: \(description)"
            case .refused(let error): what = "refused: \(error)"
            }
            print("\(path): \(bytes.count) bytes, mode \(mode.map(String.init(describing:)) ?? "-"), \(what) (returned \(result))")
        }
        exit(unreadable == 0 ? 0 : 1)
    }
}

#endif
