//! The error type of `tensorvault-formats`.

use tensorvault_core::CoreError;
use tensorvault_quant::QuantError;

/// Everything that can go wrong reading or writing a file format.
///
/// Variants are categories a caller can act on; each carries the format, the field or
/// structure involved and the byte offset in the file where that applies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The file does not start with the format's magic bytes.
    #[error("{format}: bad magic at offset 0: expected {expected:?}, found {found:?}")]
    BadMagic {
        /// Format name.
        format: &'static str,
        /// The magic the format requires.
        expected: &'static [u8],
        /// The bytes found (at most as many as expected).
        found: Vec<u8>,
    },
    /// A version this reader does not support.
    #[error("{format}: unsupported version {major}.{minor} at offset {offset}: {reason}")]
    UnsupportedVersion {
        /// Format name.
        format: &'static str,
        /// Major version found.
        major: u32,
        /// Minor version found.
        minor: u32,
        /// Offset of the version field.
        offset: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file ends before a structure that must be there.
    #[error("{format}: truncated: {what} needs bytes {offset}..{end} but the file has {file_len}")]
    Truncated {
        /// Format name.
        format: &'static str,
        /// The structure that does not fit.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Where it would end.
        end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// Bytes after the last structure the header describes.
    #[error("{format}: {count} unexpected trailing bytes at offset {offset} (after the last chunk the header lists)")]
    TrailingBytes {
        /// Format name.
        format: &'static str,
        /// Where the unexplained bytes start.
        offset: u64,
        /// How many there are.
        count: u64,
    },
    /// The JSON header does not parse.
    #[error("{format}: invalid JSON header at offset {offset}: {reason}")]
    InvalidJson {
        /// Format name.
        format: &'static str,
        /// File offset of the error (start of the JSON when unknown).
        offset: u64,
        /// The parser's message.
        reason: String,
    },
    /// A header field is missing.
    #[error("{format}: missing required field {field} (header at offset {offset})")]
    MissingField {
        /// Format name.
        format: &'static str,
        /// JSON path of the field, e.g. `chunks[3].min`.
        field: String,
        /// Offset of the header.
        offset: u64,
    },
    /// A header field has an unusable value.
    #[error("{format}: invalid field {field} (header at offset {offset}): {reason}")]
    InvalidField {
        /// Format name.
        format: &'static str,
        /// JSON path or name of the field.
        field: String,
        /// Offset of the header or field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A compression/encoding name this implementation does not support.
    #[error("{format}: unsupported compression {value:?} in field {field}")]
    UnsupportedCompression {
        /// Format name.
        format: &'static str,
        /// JSON path of the field.
        field: String,
        /// The value found.
        value: String,
    },
    /// Two counts that must agree do not.
    #[error("{format}: {what}: header says {expected}, found {found}")]
    CountMismatch {
        /// Format name.
        format: &'static str,
        /// What was counted.
        what: String,
        /// What the header (or the rule) requires.
        expected: u64,
        /// What was found.
        found: u64,
    },
    /// A stored length does not match the length implied by the header.
    #[error(
        "{format}: {what} at offset {offset}: length {found} but the header implies {expected}"
    )]
    LengthMismatch {
        /// Format name.
        format: &'static str,
        /// The structure.
        what: String,
        /// Offset of the length field.
        offset: u64,
        /// Expected length.
        expected: u64,
        /// Stored length.
        found: u64,
    },
    /// A checksum over stored bytes does not match.
    #[error("{format}: checksum mismatch in {what} at offset {offset}: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Format name.
        format: &'static str,
        /// The structure whose checksum failed.
        what: String,
        /// Offset of the checksummed bytes.
        offset: u64,
        /// Checksum stored in the file.
        stored: u64,
        /// Checksum computed over the bytes.
        computed: u64,
    },
    /// A caller-supplied argument is invalid (writer options, row ranges, ...).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A codec error (non-finite input, bad stored parameters).
    #[error("{context}: {source}")]
    Codec {
        /// Where it happened (e.g. `chunk 3`).
        context: String,
        /// The codec's error.
        #[source]
        source: QuantError,
    },
    /// A CGEB record or batch index that cannot be decoded or trusted (see
    /// [`crate::cgeb::CgebError`] for the field and offset).
    #[error(transparent)]
    Cgeb(#[from] crate::cgeb::CgebError),
    /// A MOBI model file that cannot be decoded, encoded or trusted (see
    /// [`crate::mobi::MobiError`] for the field and offset).
    #[error(transparent)]
    Mobi(#[from] crate::mobi::MobiError),
    /// A core error (atomic write, shapes).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// An I/O error.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved (may be empty for in-memory sources).
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl FormatError {
    pub(crate) fn io(
        op: &'static str,
        path: impl std::fmt::Display,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_string();
        move |source| FormatError::Io { op, path, source }
    }

    /// Opens input `path` for reading; it must be a regular file: a FIFO, socket, device or
    /// directory is `FormatError::Core(CoreError::NotRegularFile)` naming the path and its
    /// type, without blocking. Open failures stay [`FormatError::Io`] (kind kept).
    pub(crate) fn open_regular(path: &std::path::Path) -> Result<std::fs::File, Self> {
        tensorvault_core::regular::open_regular(path).map_err(|e| match e {
            CoreError::Io { op, path, source } => FormatError::Io { op, path, source },
            other => FormatError::Core(other),
        })
    }

    /// Reads input `path` whole; it must be a regular file (see [`Self::open_regular`]).
    pub(crate) fn read_regular(path: &std::path::Path) -> Result<Vec<u8>, Self> {
        use std::io::Read;
        let mut f = Self::open_regular(path)?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(Self::io("read", path.display()))?;
        Ok(buf)
    }
}
