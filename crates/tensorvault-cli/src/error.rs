//! The CLI's error type: every failure becomes one line on stderr and exit code 2.

use tensorvault_core::CoreError;
use tensorvault_formats::FormatError;

/// Errors reported by the `tensorvault` command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A format error (bad or corrupt input file, bad options).
    #[error("{0}")]
    Format(#[from] FormatError),
    /// A core error (atomic writes).
    #[error("{0}")]
    Core(#[from] CoreError),
    /// A quantization codec error (bad settings or input values).
    #[error("{0}")]
    Quant(#[from] tensorvault_quant::QuantError),
    /// A weight registry error.
    #[error("{0}")]
    Registry(#[from] tensorvault_registry::RegistryError),
    /// An ONNX model that cannot be read or expressed as MOBI.
    #[error("{0}")]
    Onnx(#[from] tensorvault_onnx::OnnxError),
    /// A temporal tensor store error.
    #[error("{0}")]
    Store(#[from] tensorvault_store::StoreErr),
    /// The MOBI runtime refused a model or its inputs (`mobi run`).
    #[error("{0}")]
    MobiRun(#[from] tensorvault_mobi_runtime::RuntimeError),
    /// A `.npy` file that cannot be used.
    #[error("{path}: {reason}")]
    Npy {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A command-line value that does not parse.
    #[error("invalid {arg}: {reason}")]
    Usage {
        /// The argument.
        arg: &'static str,
        /// Why.
        reason: String,
    },
    /// A batch data file read without its index (`NAME.cgei` missing): the file holds more
    /// than one record, so it cannot be read as a single record either.
    #[error("{index}: the batch index of {data} does not exist ({reason})")]
    MissingIndex {
        /// The data file given.
        data: String,
        /// The index file that was looked for.
        index: String,
        /// What it was needed for.
        reason: String,
    },
    /// An input file whose content is refused: format errors name the field and offset,
    /// this names the file (a command may read several).
    #[error("{path}: {source}")]
    InFile {
        /// The input file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: Box<CliError>,
    },
    /// An I/O error with its path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl CliError {
    /// Opens input `path` for reading; it must be a regular file (a FIFO, socket, device or
    /// directory is `CoreError::NotRegularFile` naming it, without blocking).
    pub(crate) fn open_regular(path: &std::path::Path) -> Result<std::fs::File, Self> {
        tensorvault_core::regular::open_regular(path).map_err(|e| match e {
            CoreError::Io { op, path, source } => CliError::Io { op, path, source },
            other => CliError::Core(other),
        })
    }

    /// Reads input `path` whole; it must be a regular file (see [`Self::open_regular`]).
    pub(crate) fn read_regular(path: &std::path::Path) -> Result<Vec<u8>, Self> {
        use std::io::Read;
        let mut buf = Vec::new();
        Self::open_regular(path)?
            .read_to_end(&mut buf)
            .map_err(Self::io("read", path.display()))?;
        Ok(buf)
    }

    /// Names input `path` in an error about its content, unless the error names it
    /// already (I/O errors and file-type refusals carry their path).
    pub(crate) fn in_file<E: Into<CliError>>(path: &std::path::Path) -> impl FnOnce(E) -> Self {
        let path = path.display().to_string();
        move |e| {
            let e = e.into();
            if e.to_string().contains(&path) {
                e
            } else {
                CliError::InFile {
                    path,
                    source: Box::new(e),
                }
            }
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl std::fmt::Display,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_string();
        move |source| CliError::Io { op, path, source }
    }
}
