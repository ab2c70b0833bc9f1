//! The error type of `tensorvault-core`.

use crate::DType;

/// Errors raised by the core types.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A shape's element count (or byte size) does not fit in `u64`/`usize`.
    #[error("shape {dims:?} overflows: element count does not fit in usize")]
    ShapeOverflow {
        /// The offending dimensions.
        dims: Vec<u64>,
    },
    /// A buffer's byte length does not match `numel * dtype.size()`.
    #[error("{what}: expected {expected} bytes for the shape and dtype, found {found}")]
    LengthMismatch {
        /// What was being built.
        what: &'static str,
        /// Bytes the shape and dtype require.
        expected: u64,
        /// Bytes actually present.
        found: u64,
    },
    /// Typed access with the wrong element type.
    #[error("tensor has dtype {actual}, requested {requested}")]
    DTypeMismatch {
        /// The tensor's dtype.
        actual: DType,
        /// The dtype asked for.
        requested: DType,
    },
    /// A borrowed byte slice is not aligned for its element type.
    #[error("tensor bytes are not aligned to {align} bytes for dtype {dtype}")]
    Misaligned {
        /// The dtype whose alignment is missing.
        dtype: DType,
        /// The required alignment.
        align: usize,
    },
    /// An unknown dtype name.
    #[error("unknown dtype name {name:?}")]
    UnknownDType {
        /// The name that was not recognised.
        name: String,
    },
    /// A path that must name a regular file names something else (a FIFO, a socket, a
    /// device, a directory): refused before anything is read from it.
    #[error("{path}: is {kind}, not a regular file", path = path.display())]
    NotRegularFile {
        /// The path.
        path: std::path::PathBuf,
        /// What it is.
        kind: crate::regular::FileKind,
    },
    /// An I/O error, with the path involved.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
