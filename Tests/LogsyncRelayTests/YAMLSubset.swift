/// The part of YAML docs/relay-openapi.yaml is written in, read without a YAML library: block mappings
/// and sequences by indentation, flow mappings and sequences (`{a: b}`, `[a, b]`, also over several
/// lines), plain, single- and double-quoted scalars, folded and literal block scalars (`>`, `|`), and
/// `#` comment lines. Anything else (anchors, tags, multi-document streams) is refused with an error,
/// never read wrong.
indirect enum YAMLNode: Equatable, CustomStringConvertible {
    case scalar(String)
    case map([String: YAMLNode])
    case list([YAMLNode])
    case null

    subscript(key: String) -> YAMLNode? {
        if case .map(let entries) = self { return entries[key] }
        return nil
    }

    var string: String? {
        if case .scalar(let text) = self { return text }
        return nil
    }

    var entries: [String: YAMLNode] {
        if case .map(let entries) = self { return entries }
        return [:]
    }

    var items: [YAMLNode] {
        if case .list(let items) = self { return items }
        return []
    }

    var description: String {
        switch self {
        case .scalar(let text): text.debugDescription
        case .map(let entries): "{" + entries.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .list(let items): "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .null: "null"
        }
    }
}

struct YAMLError: Error, CustomStringConvertible {
    var description: String
}

enum YAMLSubset {
    static func parse(_ text: String) throws -> YAMLNode {
        var lines: [(indent: Int, text: String, number: Int)] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            let content = line.drop { $0 == " " }
            if content.isEmpty || content.hasPrefix("#") { continue }
            if content.hasPrefix("\t") { throw YAMLError(description: "line \(number + 1): tabs do not indent YAML") }
            lines.append((line.count - content.count, String(content), number + 1))
        }
        guard !lines.isEmpty else { return .null }
        var reader = BlockReader(lines: lines)
        let node = try reader.block(indent: lines[0].indent)
        if reader.index < reader.lines.count {
            throw YAMLError(description: "line \(reader.lines[reader.index].number): not read (indentation?)")
        }
        return node
    }

    private struct BlockReader {
        var lines: [(indent: Int, text: String, number: Int)]
        var index = 0

        mutating func block(indent: Int) throws -> YAMLNode {
            let first = lines[index]
            if first.text == "-" || first.text.hasPrefix("- ") { return try sequence(indent: indent) }
            return try mapping(indent: indent)
        }

        mutating func sequence(indent: Int) throws -> YAMLNode {
            var items: [YAMLNode] = []
            while index < lines.count, lines[index].indent == indent, lines[index].text == "-" || lines[index].text.hasPrefix("- ") {
                let line = lines[index]
                let rest = line.text.dropFirst().drop { $0 == " " }
                if rest.isEmpty {
                    index += 1
                    guard index < lines.count, lines[index].indent > indent else { items.append(.null); continue }
                    items.append(try block(indent: lines[index].indent))
                } else {
                    // The item's content starts a block of its own, indented where the content starts.
                    let itemIndent = line.indent + (line.text.count - rest.count)
                    lines[index] = (itemIndent, String(rest), line.number)
                    if isMappingLine(String(rest)) {
                        items.append(try block(indent: itemIndent))
                    } else {
                        index += 1
                        items.append(try value(String(rest), line: line.number, indent: itemIndent))
                    }
                }
            }
            return .list(items)
        }

        mutating func mapping(indent: Int) throws -> YAMLNode {
            var entries: [String: YAMLNode] = [:]
            while index < lines.count, lines[index].indent >= indent {
                let line = lines[index]
                guard line.indent == indent else { throw YAMLError(description: "line \(line.number): indented more than its mapping") }
                guard let (key, rest) = try splitKey(line.text, line: line.number) else {
                    throw YAMLError(description: "line \(line.number): expected `key: value`, got \(line.text.debugDescription)")
                }
                guard entries[key] == nil else { throw YAMLError(description: "line \(line.number): the key \(key) appears twice") }
                index += 1
                if rest.isEmpty {
                    if index < lines.count, lines[index].indent > indent {
                        entries[key] = try block(indent: lines[index].indent)
                    } else if index < lines.count, lines[index].indent == indent, lines[index].text.hasPrefix("- ") {
                        entries[key] = try sequence(indent: indent)
                    } else {
                        entries[key] = .null
                    }
                } else {
                    entries[key] = try value(rest, line: line.number, indent: indent)
                }
            }
            return .map(entries)
        }

        /// The value after `key:` on a line already consumed: a block scalar, a flow collection (joined
        /// with the lines it continues on), a quoted or a plain scalar.
        mutating func value(_ text: String, line: Int, indent: Int) throws -> YAMLNode {
            if [">", "|", ">-", "|-"].contains(text) {
                var parts: [String] = []
                while index < lines.count, lines[index].indent > indent {
                    parts.append(lines[index].text)
                    index += 1
                }
                return .scalar(parts.joined(separator: text.hasPrefix(">") ? " " : "\n"))
            }
            if text.hasPrefix("{") || text.hasPrefix("[") {
                var whole = text
                while YAMLSubset.depth(whole) > 0 {
                    guard index < lines.count else { throw YAMLError(description: "line \(line): a flow collection never closes") }
                    whole += " " + lines[index].text
                    index += 1
                }
                var flow = FlowReader(text: Array(whole), line: line)
                let node = try flow.value()
                flow.skipSpaces()
                guard flow.position == flow.text.count else { throw YAMLError(description: "line \(line): text after a flow collection") }
                return node
            }
            if text.hasPrefix("&") || text.hasPrefix("*") || text.hasPrefix("!") {
                throw YAMLError(description: "line \(line): anchors, aliases and tags are not read")
            }
            var flow = FlowReader(text: Array(text), line: line)
            if text.hasPrefix("\"") || text.hasPrefix("'") {
                let node = try flow.value()
                flow.skipSpaces()
                guard flow.position == flow.text.count else { throw YAMLError(description: "line \(line): text after a quoted scalar") }
                return node
            }
            return .scalar(YAMLSubset.plain(text))
        }

        func isMappingLine(_ text: String) -> Bool { (try? splitKey(text, line: 0)) != nil }

        /// `key: rest` (rest possibly empty), or nil when the line is not a mapping entry.
        func splitKey(_ text: String, line: Int) throws -> (String, String)? {
            if text.hasPrefix("\"") || text.hasPrefix("'") {
                var flow = FlowReader(text: Array(text), line: line)
                guard case .scalar(let key) = try flow.value(), flow.position < flow.text.count, flow.text[flow.position] == ":" else { return nil }
                return (key, String(flow.text[(flow.position + 1)...]).trimmingSpaces)
            }
            if text.hasPrefix("{") || text.hasPrefix("[") { return nil }
            if let range = text.range(of: ": ") {
                return (String(text[..<range.lowerBound]), String(text[range.upperBound...]).trimmingSpaces)
            }
            if text.hasSuffix(":") { return (String(text.dropLast()), "") }
            return nil
        }
    }

    /// How many flow collections are open at the end of `text` (quoted text not counted).
    static func depth(_ text: String) -> Int {
        var depth = 0
        var quote: Character?
        var escaped = false
        for character in text {
            if let open = quote {
                if escaped { escaped = false } else if character == "\\" && open == "\"" { escaped = true } else if character == open { quote = nil }
                continue
            }
            switch character {
            case "\"", "'": quote = character
            case "{", "[": depth += 1
            case "}", "]": depth -= 1
            default: break
            }
        }
        return depth
    }

    /// A plain scalar, without a trailing ` # comment`.
    static func plain(_ text: String) -> String {
        if let range = text.range(of: " #") { return String(text[..<range.lowerBound]).trimmingSpaces }
        return text.trimmingSpaces
    }

    private struct FlowReader {
        let text: [Character]
        let line: Int
        var position = 0

        init(text: [Character], line: Int) {
            self.text = text
            self.line = line
        }

        mutating func skipSpaces() { while position < text.count, text[position] == " " { position += 1 } }

        func failure(_ what: String) -> YAMLError {
            YAMLError(description: "line \(line): \(what) at column \(position + 1) of \(String(text).debugDescription)")
        }

        mutating func value() throws -> YAMLNode {
            skipSpaces()
            guard position < text.count else { return .null }
            switch text[position] {
            case "{":
                position += 1
                var entries: [String: YAMLNode] = [:]
                while true {
                    skipSpaces()
                    guard position < text.count else { throw failure("a flow mapping never closes") }
                    if text[position] == "}" { position += 1; return .map(entries) }
                    guard case .scalar(let key) = try scalar(stoppingAt: [":", ",", "}"]) else { throw failure("a key is missing") }
                    skipSpaces()
                    if position < text.count, text[position] == ":" {
                        position += 1
                        entries[key] = try value()
                    } else {
                        entries[key] = .null
                    }
                    skipSpaces()
                    if position < text.count, text[position] == "," { position += 1 }
                }
            case "[":
                position += 1
                var items: [YAMLNode] = []
                while true {
                    skipSpaces()
                    guard position < text.count else { throw failure("a flow sequence never closes") }
                    if text[position] == "]" { position += 1; return .list(items) }
                    items.append(try value())
                    skipSpaces()
                    if position < text.count, text[position] == "," { position += 1 }
                }
            default:
                return try scalar(stoppingAt: [",", "}", "]"])
            }
        }

        mutating func scalar(stoppingAt stops: Set<Character>) throws -> YAMLNode {
            skipSpaces()
            guard position < text.count else { return .null }
            let open = text[position]
            if open == "\"" || open == "'" {
                position += 1
                var result = ""
                while true {
                    guard position < text.count else { throw failure("a quoted scalar never closes") }
                    let character = text[position]
                    position += 1
                    if open == "'" {
                        if character == "'" {
                            if position < text.count, text[position] == "'" { result.append("'"); position += 1; continue }
                            return .scalar(result)
                        }
                        result.append(character)
                    } else if character == "\"" {
                        return .scalar(result)
                    } else if character == "\\" {
                        guard position < text.count else { throw failure("an escape ends the line") }
                        let escaped = text[position]
                        position += 1
                        switch escaped {
                        case "n": result.append("\n")
                        case "t": result.append("\t")
                        case "\\", "\"", "/": result.append(escaped)
                        default: throw failure("the escape \\\(escaped) is not read")
                        }
                    } else {
                        result.append(character)
                    }
                }
            }
            let start = position
            // A colon ends a key only before a space (`http://host:port` is one scalar).
            while position < text.count,
                !stops.contains(text[position]) || (text[position] == ":" && position + 1 < text.count && text[position + 1] != " ")
            {
                position += 1
            }
            return .scalar(String(text[start..<position]).trimmingSpaces)
        }
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var text = self[...]
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
