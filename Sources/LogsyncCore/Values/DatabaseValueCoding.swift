/// `DatabaseValue` in JSON, for the commands' `--json` output: exact and unambiguous in both directions.
///
/// | value | JSON |
/// |---|---|
/// | NULL | `null` |
/// | integer | a number (exact to 64 bits) |
/// | real | `{"real": 0.5}`; `{"real": "inf"}`, `"-inf"` or `"nan"` for what JSON numbers cannot hold |
/// | text | a string (NUL characters as `\u0000`) |
/// | text that is not UTF-8 | `{"text_hex": "66ff"}` |
/// | blob | `{"blob": "00ff"}` |
extension DatabaseValue: Codable {
    private enum Key: String, CodingKey {
        case real, blob
        case textHex = "text_hex"
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .integer(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .text(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .real(let value):
            var container = encoder.container(keyedBy: Key.self)
            if value.isFinite {
                try container.encode(value, forKey: .real)
            } else {
                try container.encode(value.isNaN ? "nan" : (value > 0 ? "inf" : "-inf"), forKey: .real)
            }
        case .blob(let bytes):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(hexString(bytes), forKey: .blob)
        case .nonUTF8Text(let bytes):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(hexString(bytes), forKey: .textHex)
        }
    }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer() {
            if single.decodeNil() {
                self = .null
                return
            }
            if let integer = try? single.decode(Int64.self) {
                self = .integer(integer)
                return
            }
            if let text = try? single.decode(String.self) {
                self = .text(text)
                return
            }
        }
        let container = try decoder.container(keyedBy: Key.self)
        if let hex = try container.decodeIfPresent(String.self, forKey: .blob) {
            guard let bytes = bytes(hex: hex) else {
                throw DecodingError.dataCorruptedError(forKey: .blob, in: container, debugDescription: "not hexadecimal digits")
            }
            self = .blob(bytes)
        } else if let hex = try container.decodeIfPresent(String.self, forKey: .textHex) {
            guard let bytes = bytes(hex: hex) else {
                throw DecodingError.dataCorruptedError(forKey: .textHex, in: container, debugDescription: "not hexadecimal digits")
            }
            self = DatabaseValue(textBytes: bytes)
        } else if let word = try? container.decode(String.self, forKey: .real) {
            switch word {
            case "inf": self = .real(.infinity)
            case "-inf": self = .real(-.infinity)
            case "nan": self = .real(.nan)
            default: throw DecodingError.dataCorruptedError(forKey: .real, in: container, debugDescription: "'\(word)' is not a real")
            }
        } else {
            self = .real(try container.decode(Double.self, forKey: .real))
        }
    }
}
