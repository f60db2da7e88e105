/// A configuration error that says which file, which line, and what is wrong.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    /// 1-based; 0 when the problem is not on one line (a missing file).
    public var line: Int
    public var message: String

    public init(file: String, line: Int, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// A value in the configuration file.
public enum ConfigValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case integer(Int64)
    case boolean(Bool)

    public var typeName: String {
        switch self {
        case .string: return "a string"
        case .integer: return "an integer"
        case .boolean: return "a boolean"
        }
    }

    public var description: String {
        switch self {
        case .string(let value): return "\"\(value.excerpt())\""
        case .integer(let value): return String(value)
        case .boolean(let value): return String(value)
        }
    }
}

/// The configuration file: a subset of TOML — `# comments`, `[table]` headers, and `key = value` lines
/// where a value is a double-quoted string (with `\"`, `\\`, `\n`, `\t` escapes), an integer (digits,
/// optional sign and `_` separators) or `true`/`false`. Every entry keeps its line for error messages.
public struct ConfigFile: Sendable {
    public struct Entry: Sendable, Hashable {
        public var table: String
        public var key: String
        public var value: ConfigValue
        public var line: Int
    }

    public let path: String
    public private(set) var entries: [Entry] = []

    public init(path: String, text: String) throws(ConfigError) {
        self.path = path
        var table = ""
        var seen: [String: Int] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard let close = line.firstIndex(of: "]") else {
                    throw ConfigError(file: path, line: number, "a table header needs a closing ']'")
                }
                let name = String(line[line.index(after: line.startIndex)..<close]).trimmingWhitespace()
                let rest = String(line[line.index(after: close)...]).trimmingWhitespace()
                guard Self.isBareKey(name) else { throw ConfigError(file: path, line: number, "'\(name.excerpt())' is not a valid table name") }
                guard rest.isEmpty || rest.hasPrefix("#") else { throw ConfigError(file: path, line: number, "unexpected text after the table header") }
                table = name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError(file: path, line: number, "expected 'key = value', a '[table]' header or a '# comment'")
            }
            let key = String(line[..<equals]).trimmingWhitespace()
            guard Self.isBareKey(key) else { throw ConfigError(file: path, line: number, "'\(key.excerpt())' is not a valid key") }
            let value = try Self.value(String(line[line.index(after: equals)...]), file: path, line: number)
            let qualified = table.isEmpty ? key : "\(table).\(key)"
            if let first = seen[qualified] {
                throw ConfigError(file: path, line: number, "'\(qualified)' is set twice (first on line \(first))")
            }
            seen[qualified] = number
            entries.append(Entry(table: table, key: key, value: value, line: number))
        }
    }

    private static func isBareKey(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-") }
    }

    private static func value(_ raw: String, file: String, line: Int) throws(ConfigError) -> ConfigValue {
        let text = raw.trimmingWhitespace()
        if text.hasPrefix("\"") {
            var result = ""
            var escaped = false
            var rest: Substring?
            for (offset, character) in text.dropFirst().enumerated() {
                if escaped {
                    switch character {
                    case "\"": result.append("\"")
                    case "\\": result.append("\\")
                    case "n": result.append("\n")
                    case "t": result.append("\t")
                    default: throw ConfigError(file: file, line: line, "unknown escape '\\\(character)' in a string")
                    }
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    rest = text.dropFirst(offset + 2)
                    break
                } else {
                    result.append(character)
                }
            }
            guard let rest else { throw ConfigError(file: file, line: line, "a string is missing its closing '\"'") }
            let after = String(rest).trimmingWhitespace()
            guard after.isEmpty || after.hasPrefix("#") else {
                throw ConfigError(file: file, line: line, "unexpected text after the string")
            }
            return .string(result)
        }
        let token = String(text.split(separator: "#", maxSplits: 1).first ?? "").trimmingWhitespace()
        if token == "true" { return .boolean(true) }
        if token == "false" { return .boolean(false) }
        let digits = token.replacingUnderscores()
        if let number = Int64(digits) { return .integer(number) }
        if token.isEmpty { throw ConfigError(file: file, line: line, "missing value after '='") }
        throw ConfigError(
            file: file, line: line,
            "'\(token.excerpt())' is not a value: use \"quotes\" for text, digits for numbers, or true/false")
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let end = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars[start...end])
        return String(result)
    }

    func replacingUnderscores() -> String { String(filter { $0 != "_" }) }

    /// The text as an error message quotes it: at most `limit` characters, then how long it really is, so
    /// that a 10 MB value does not come back whole on stderr.
    func excerpt(_ limit: Int = 60) -> String {
        guard count > limit else { return String(self) }
        return "\(prefix(limit))… (\(utf8.count) bytes)"
    }
}
