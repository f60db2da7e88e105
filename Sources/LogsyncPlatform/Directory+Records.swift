import Glibc

/// Files in a shared folder that are replaced or removed by their owner: a node's progress record (replaced
/// as a whole), its baselines and pruned segments (removed), and large files read in chunks. The same
/// rules as every access through ``Directory``: relative to the descriptor, never through a link, regular
/// files only.
extension Directory {
    /// Writes `bytes` to `temporaryName`, fsyncs it, renames it over `name` (replacing what is there, if
    /// it is a regular file), and fsyncs the directory: readers see the old content or the new, whole.
    public func replace(_ name: String, with bytes: [UInt8], temporaryName: String) throws(SystemError) {
        if let kind = kind(of: name), kind != .regular {
            throw SystemError(call: "rename", path: child(name), errno: EEXIST)
        }
        try writeTemporary(temporaryName, chunks: Self.single(bytes))
        guard renameat(descriptor, temporaryName, descriptor, name) == 0 else {
            let error = SystemError.last("rename", path: child(name))
            unlinkat(descriptor, temporaryName, 0)
            throw error
        }
        try sync()
    }

    /// Removes the regular file `name` (never anything else) and fsyncs the directory. A file already gone
    /// is not an error: removal is idempotent.
    public func removeFile(_ name: String) throws(SystemError) {
        guard let kind = kind(of: name) else { return }
        guard kind == .regular else { throw SystemError(call: "unlink", path: child(name), errno: EISDIR) }
        guard unlinkat(descriptor, name, 0) == 0 || errno == ENOENT else { throw .last("unlink", path: child(name)) }
        try sync()
    }

    /// A regular file opened for reading in chunks (opened `O_NONBLOCK | O_NOFOLLOW`, checked with `fstat`).
    public final class ChunkReader {
        private let fd: Int32
        public let path: String
        private let chunkSize: Int

        fileprivate init(fd: Int32, path: String, chunkSize: Int) {
            self.fd = fd
            self.path = path
            self.chunkSize = chunkSize
        }

        deinit { close(fd) }

        /// The next chunk, or nil at the end of the file.
        public func next() throws(SystemError) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: chunkSize)
            while true {
                let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw .last("read", path: path)
                }
                if count == 0 { return nil }
                bytes.removeLast(chunkSize - count)
                return bytes
            }
        }
    }

    /// What opening a file for chunked reading found.
    public enum ChunkOpen {
        case reader(ChunkReader)
        case tooLarge(Int)
        case notRegular(FileKind)
    }

    /// Opens the regular file `name` to be read in chunks of `chunkSize` bytes.
    public func openChunks(_ name: String, maximumBytes: Int, chunkSize: Int = 1 << 20) throws(SystemError) -> ChunkOpen {
        if let kind = kind(of: name), kind != .regular { return .notRegular(kind) }
        let fd = openat(descriptor, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if let kind = kind(of: name), kind != .regular { return .notRegular(kind) }
            throw .last("open", path: child(name))
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw .last("fstat", path: child(name))
        }
        let kind = FileKind(mode: info.st_mode)
        guard kind == .regular else {
            close(fd)
            return .notRegular(kind)
        }
        guard Int(info.st_size) <= maximumBytes else {
            close(fd)
            return .tooLarge(Int(info.st_size))
        }
        return .reader(ChunkReader(fd: fd, path: child(name), chunkSize: chunkSize))
    }
}

extension Directory {
    /// A private file written in chunks (created or truncated, mode 0600, never through a link), for local
    /// copies such as a baseline on its way in or out.
    public final class ChunkWriter {
        private let fd: Int32
        public let path: String

        fileprivate init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        deinit { close(fd) }

        public func write(_ bytes: [UInt8]) throws(SystemError) { try Directory.writeAll(bytes, to: fd, path: path) }
    }

    /// Creates (or empties) the file `name` for writing in chunks.
    public func createFile(_ name: String) throws(SystemError) -> ChunkWriter {
        let fd = openat(descriptor, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .last("open", path: child(name)) }
        return ChunkWriter(fd: fd, path: child(name))
    }
}
