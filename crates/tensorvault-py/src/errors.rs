//! Rust errors to Python exceptions.
//!
//! The exception classes are defined in Python (`tensorvault/_errors.py`) so that each can
//! derive from both `TensorvaultError` and the builtin a caller expects (`ValueError`,
//! `FileNotFoundError`, ...); this module looks them up once and raises them with the Rust
//! error's message.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tensorvault_core::CoreError;
use tensorvault_formats::cgeb::CgebError;
use tensorvault_formats::mobi::MobiError;
use tensorvault_formats::FormatError;
use tensorvault_registry::RegistryError;

/// The exception classes of `tensorvault._errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `NotFoundError`.
    NotFound,
    /// `InvalidFormatError`.
    InvalidFormat,
    /// `UnsupportedFormatError`.
    UnsupportedFormat,
    /// `CorruptionError`.
    Corruption,
    /// `InvalidArgumentError`.
    InvalidArgument,
    /// `StorageError`.
    Storage,
    /// `CapacityError` (a `StorageError`).
    Capacity,
    /// `LockedError` (a `StorageError`).
    Locked,
    /// `UnsupportedError`.
    Unsupported,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::NotFound => "NotFoundError",
            Kind::InvalidFormat => "InvalidFormatError",
            Kind::UnsupportedFormat => "UnsupportedFormatError",
            Kind::Corruption => "CorruptionError",
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::Storage => "StorageError",
            Kind::Capacity => "CapacityError",
            Kind::Locked => "LockedError",
            Kind::Unsupported => "UnsupportedError",
        }
    }
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn class<'py>(py: Python<'py>, kind: Kind) -> PyResult<Bound<'py, PyType>> {
    let module = ERRORS_MODULE
        .get_or_try_init(py, || py.import("tensorvault._errors").map(Bound::unbind))?;
    Ok(module
        .bind(py)
        .getattr(kind.class_name())?
        .cast_into::<PyType>()?)
}

/// A Python exception of class `kind` with `msg`.
pub fn err(kind: Kind, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| match class(py, kind) {
        Ok(cls) => PyErr::from_type(cls, msg),
        Err(e) => e,
    })
}

/// Shorthand for an `InvalidArgumentError`.
pub fn arg_err(msg: impl Into<String>) -> PyErr {
    err(Kind::InvalidArgument, msg)
}

/// Whether a codec error came from reading a file (corrupt stored parameters) or from the
/// caller's input (non-finite values to encode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Decoding a file.
    Read,
    /// Encoding caller data.
    Write,
}

fn io_kind(e: &std::io::Error) -> Kind {
    if e.kind() == std::io::ErrorKind::NotFound {
        Kind::NotFound
    } else {
        Kind::Storage
    }
}

fn core_kind(e: &CoreError, dir: Dir) -> Kind {
    match e {
        CoreError::Io { source, .. } => io_kind(source),
        _ if dir == Dir::Read => Kind::InvalidFormat,
        _ => Kind::InvalidArgument,
    }
}

fn cgeb_kind(e: &CgebError, dir: Dir) -> Kind {
    match e {
        _ if dir == Dir::Write => Kind::InvalidArgument,
        CgebError::HashMismatch { .. }
        | CgebError::AuxCorrupt { .. }
        | CgebError::DataFileHashMismatch { .. } => Kind::Corruption,
        CgebError::IndexOutOfRange { .. } => Kind::InvalidArgument,
        CgebError::UnsupportedVersion { .. } | CgebError::UnsupportedCompression { .. } => {
            Kind::UnsupportedFormat
        }
        _ => Kind::InvalidFormat,
    }
}

fn mobi_kind(e: &MobiError, dir: Dir) -> Kind {
    match e {
        MobiError::ChecksumMismatch { .. } => Kind::Corruption,
        MobiError::UnsupportedVersion { .. } => Kind::UnsupportedFormat,
        _ if dir == Dir::Write => Kind::InvalidArgument,
        _ => Kind::InvalidFormat,
    }
}

/// The exception class for a format error.
pub fn format_kind(e: &FormatError, dir: Dir) -> Kind {
    match e {
        FormatError::Io { source, .. } => io_kind(source),
        FormatError::ChecksumMismatch { .. } => Kind::Corruption,
        FormatError::UnsupportedVersion { .. } | FormatError::UnsupportedCompression { .. } => {
            Kind::UnsupportedFormat
        }
        FormatError::InvalidArgument { .. } => Kind::InvalidArgument,
        FormatError::Codec { .. } if dir == Dir::Write => Kind::InvalidArgument,
        FormatError::Cgeb(c) => cgeb_kind(c, dir),
        FormatError::Mobi(m) => mobi_kind(m, dir),
        FormatError::Core(c) => core_kind(c, dir),
        _ => Kind::InvalidFormat,
    }
}

/// A format error as a Python exception.
pub fn format_err(e: FormatError, dir: Dir) -> PyErr {
    err(format_kind(&e, dir), e.to_string())
}

/// A format error raised while reading a file.
pub fn read_err(e: FormatError) -> PyErr {
    format_err(e, Dir::Read)
}

/// A format error raised while writing caller data.
pub fn write_err(e: FormatError) -> PyErr {
    format_err(e, Dir::Write)
}

/// A MOBI error as a Python exception.
pub fn mobi_err(e: MobiError, dir: Dir) -> PyErr {
    err(mobi_kind(&e, dir), e.to_string())
}

/// A registry error as a Python exception.
pub fn registry_err(e: RegistryError) -> PyErr {
    let kind = match &e {
        RegistryError::Io { source, .. } => io_kind(source),
        RegistryError::VersionNotFound { .. }
        | RegistryError::MissingMetadata { .. }
        | RegistryError::MissingTensor { .. } => Kind::NotFound,
        RegistryError::ChecksumMismatch { .. }
        | RegistryError::ChunkChecksumMismatch { .. }
        | RegistryError::ListedChecksumMismatch { .. } => Kind::Corruption,
        RegistryError::Json { .. }
        | RegistryError::Safetensors { .. }
        | RegistryError::BadChecksumFormat { .. }
        | RegistryError::UnexpectedTensor { .. }
        | RegistryError::ManifestInvalidVersion { .. }
        | RegistryError::ManifestDuplicateVersion { .. }
        | RegistryError::ManifestUnlistedVersion { .. }
        | RegistryError::InvalidMetadata { .. }
        | RegistryError::UnsafeFileName { .. }
        | RegistryError::NotACheckpoint { .. }
        | RegistryError::DuplicateTensor { .. } => Kind::InvalidFormat,
        RegistryError::UnsupportedDtype { .. } | RegistryError::ManifestFormatTooNew { .. } => {
            Kind::UnsupportedFormat
        }
        RegistryError::Unsupported { .. } => Kind::Unsupported,
        _ => Kind::InvalidArgument,
    };
    err(kind, e.to_string())
}
