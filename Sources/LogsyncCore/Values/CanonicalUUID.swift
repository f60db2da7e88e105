enum CanonicalUUID {
    /// The 128 bits of `text` when it is a canonical lowercase UUID (8-4-4-4-12 lowercase hex digits
    /// with dashes), or nil. Uppercase and other spellings are ordinary text: they must round-trip exactly.
    static func parse(_ text: String) -> (high: UInt64, low: UInt64)? {
        guard text.utf8.count == 36 else { return nil }
        var text = text
        return text.withUTF8 { utf8 -> (high: UInt64, low: UInt64)? in
            let dash = UInt8(ascii: "-")
            guard utf8[8] == dash, utf8[13] == dash, utf8[18] == dash, utf8[23] == dash else { return nil }
            var high: UInt64 = 0
            var low: UInt64 = 0
            var digits = 0
            for index in 0..<36 where index != 8 && index != 13 && index != 18 && index != 23 {
                let byte = utf8[index]
                let nibble: UInt8
                if byte &- UInt8(ascii: "0") < 10 {
                    nibble = byte &- UInt8(ascii: "0")
                } else if byte &- UInt8(ascii: "a") < 6 {
                    nibble = byte &- UInt8(ascii: "a") &+ 10
                } else {
                    return nil
                }
                if digits < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
                digits += 1
            }
            return (high, low)
        }
    }

    /// The canonical lowercase spelling of 16 bytes.
    static func format(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let hex: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { output in
            hex.withUTF8Buffer { digits in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        output[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    let byte = bytes[index]
                    output[position] = digits[Int(byte >> 4)]
                    output[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
            }
            return 36
        }
    }
}
