//! The registry's error type: one enum, variants that name what was wrong and where.

use std::path::PathBuf;

/// Everything the registry can report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// `registry.json` does not match its own checksum (`manifest_crc32c`): damaged or
    /// edited by hand. Nothing is read from it (it names the golden and current versions
    /// and what retention may delete).
    #[error("{path}: manifest checksum mismatch: stored {stored}, computed {computed}")]
    ManifestChecksum {
        /// The manifest.
        path: PathBuf,
        /// The stored value (`(missing)` in a format-2 manifest without one).
        stored: String,
        /// The checksum of what the file holds.
        computed: String,
    },
    /// A JSON document (`registry.json`, `metadata.json`) is larger than the registry
    /// reads: refused before anything is allocated for it.
    #[error("{path}: {size} bytes, more than the {limit} bytes a registry reads for this file")]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        size: u64,
        /// The most the registry reads.
        limit: u64,
    },
    /// A path the registry reads (a checkpoint file or shard, an index, `metadata.json`,
    /// `registry.json`) is a FIFO, socket, device or directory: refused without blocking.
    #[error("{path}: is {kind}, not a regular file", path = path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: tensorvault_core::regular::FileKind,
    },
    /// A filesystem operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON document (metadata.json, registry.json) could not be read or written.
    #[error("JSON error in {path}: {source}")]
    Json {
        /// The document.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// The safetensors file is malformed (truncated, offsets that lie, bad header, ...).
    #[error("invalid safetensors file {path}: field {field} at offset {offset}: {reason}", path = path.display())]
    Safetensors {
        /// The file (the source a checkpoint is read from, never a destination not yet
        /// written).
        path: PathBuf,
        /// The field the parser refused (`header length`, `header`, `tensor "x"
        /// data_offsets`, `data_offsets`, ...).
        field: String,
        /// Byte offset of that field in the file.
        offset: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// A field of `metadata.json` is impossible for the checkpoint it describes (e.g. a
    /// `config` with more values than the weights file holds).
    #[error("{path}: field {field}: {reason}")]
    InvalidMetadata {
        /// The metadata file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// `metadata.json` is missing from a checkpoint directory.
    #[error("checkpoint {dir} has no metadata.json")]
    MissingMetadata {
        /// The checkpoint directory.
        dir: PathBuf,
    },
    /// The weights file does not hash to the checksum recorded in the metadata.
    #[error("checksum mismatch for {path}: expected {expected}, computed {computed}")]
    ChecksumMismatch {
        /// The weights file.
        path: PathBuf,
        /// Checksum recorded in metadata.json.
        expected: String,
        /// Checksum of the bytes on disk.
        computed: String,
    },
    /// A checksum string is not of the form `sha256:<64 hex digits>`.
    #[error("malformed checksum {found:?} (expected sha256:<64 hex digits>)")]
    BadChecksumFormat {
        /// The string found.
        found: String,
    },
    /// An expected tensor is absent (strict load).
    #[error("tensor {name} missing from {path}")]
    MissingTensor {
        /// Dot-separated tensor name.
        name: String,
        /// The weights file.
        path: PathBuf,
    },
    /// The checkpoint holds a tensor the configuration does not expect (strict load).
    #[error("unexpected tensor {name} in {path}")]
    UnexpectedTensor {
        /// Dot-separated tensor name.
        name: String,
        /// The weights file.
        path: PathBuf,
    },
    /// A tensor's shape differs from the configuration.
    #[error("tensor {name}: shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        /// Dot-separated tensor name.
        name: String,
        /// Shape required by the configuration.
        expected: Vec<usize>,
        /// Shape found.
        found: Vec<usize>,
    },
    /// A tensor's dtype is not one the registry loads (F32, F16, BF16).
    #[error("tensor {name}: unsupported dtype {dtype}")]
    UnsupportedDtype {
        /// Dot-separated tensor name.
        name: String,
        /// The dtype as safetensors names it.
        dtype: String,
    },
    /// A data length does not match the shape.
    #[error("tensor {name}: {found} values for shape {shape:?}")]
    LengthMismatch {
        /// Tensor name.
        name: String,
        /// The shape.
        shape: Vec<usize>,
        /// Number of values found.
        found: usize,
    },
    /// A version string is not valid semver or could escape the registry directory.
    #[error("invalid version string {version:?}: {reason}")]
    InvalidVersion {
        /// The rejected string.
        version: String,
        /// Why.
        reason: String,
    },
    /// `registry.json` names a version that is not a valid version string (a crafted or
    /// damaged manifest; such a name could point outside the registry directory).
    #[error("{path}: field {field}: invalid version string {version:?}: {reason}")]
    ManifestInvalidVersion {
        /// The manifest file.
        path: PathBuf,
        /// The JSON field holding it (`versions[3].version`, `golden`, `current`).
        field: String,
        /// The rejected string.
        version: String,
        /// Why.
        reason: String,
    },
    /// `registry.json` lists one version string twice. Retention deletes by name, so a
    /// duplicate could make it delete a version inside the kept window: refused.
    #[error("{path}: versions[{second}] repeats version {version:?} of versions[{first}]")]
    ManifestDuplicateVersion {
        /// The manifest file.
        path: PathBuf,
        /// The repeated version string.
        version: String,
        /// Index of its first entry in `versions`.
        first: usize,
        /// Index of the repeat.
        second: usize,
    },
    /// `registry.json` names a version in `golden` or `current` that its `versions` list
    /// does not hold.
    #[error("{path}: field {field} names version {version:?}, which the manifest does not list")]
    ManifestUnlistedVersion {
        /// The manifest file.
        path: PathBuf,
        /// `golden` or `current`.
        field: &'static str,
        /// The version it names.
        version: String,
    },
    /// `registry.json` has a `format_version` newer than this build reads. Refused rather
    /// than read as an older format (and re-sealed as one: a silent downgrade).
    #[error("{path}: field format_version is {found}; this build reads up to {supported}")]
    ManifestFormatTooNew {
        /// The manifest file.
        path: PathBuf,
        /// The stored format version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// A version's checkpoint is intact by its own `metadata.json` but its checksum is not
    /// the one `registry.json` lists for the version: the directory was replaced or its
    /// metadata rewritten after the save.
    #[error("version {version}: {path}: checksum {found} differs from {listed} listed in registry.json", path = path.display())]
    ListedChecksumMismatch {
        /// The version.
        version: String,
        /// Its `metadata.json`.
        path: PathBuf,
        /// The checksum `registry.json` lists for it.
        listed: String,
        /// The checksum its metadata records (and its files hash to).
        found: String,
    },
    /// The version is not in the registry.
    #[error("version {version} not found in registry")]
    VersionNotFound {
        /// The requested version.
        version: String,
    },
    /// A version with this string already exists.
    #[error("version {version} already exists")]
    VersionExists {
        /// The duplicate version.
        version: String,
    },
    /// Fan-in/fan-out is undefined for this shape (fewer than 2 dimensions).
    #[error("strategy {strategy} needs a tensor with at least 2 dimensions, got shape {shape:?}")]
    FanUndefined {
        /// The strategy's name.
        strategy: &'static str,
        /// The shape.
        shape: Vec<usize>,
    },
    /// A parameter of an initialization strategy is out of range.
    #[error("invalid parameter for {strategy}: {reason}")]
    InvalidParameter {
        /// The strategy's name.
        strategy: &'static str,
        /// Why.
        reason: String,
    },
    /// The operation is not supported (e.g. a CUDA device, or `Checkpoint` passed to `initialize`).
    #[error("unsupported: {what}")]
    Unsupported {
        /// What was asked for.
        what: String,
    },
    /// A file name in a sharded checkpoint's index (`weight_map`) or in a version's
    /// `metadata.json` (`files[i].path`) is not a plain file name inside the checkpoint
    /// directory (`..`, an absolute path, a separator, a leading `.`, ...).
    #[error("{file}: {field}: unsafe file name {name:?}: {reason}")]
    UnsafeFileName {
        /// The index or metadata file naming it.
        file: PathBuf,
        /// Where it was named (`weight_map["bert.pooler.dense.weight"]`, `files[1].path`).
        field: String,
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },
    /// One chunk of a weights file does not hash to the BLAKE3 digest recorded for it.
    #[error("checksum mismatch for {path} bytes {offset}..{end}: expected blake3:{expected}, computed blake3:{computed}")]
    ChunkChecksumMismatch {
        /// The weights file.
        path: PathBuf,
        /// First byte of the chunk.
        offset: u64,
        /// One past its last byte.
        end: u64,
        /// The recorded digest (hex).
        expected: String,
        /// The digest of the bytes on disk (hex).
        computed: String,
    },
    /// A path given as a checkpoint is neither a safetensors file, an index JSON nor a
    /// directory holding `model.safetensors` or `model.safetensors.index.json`.
    #[error("{path}: not a safetensors checkpoint: {reason}")]
    NotACheckpoint {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A tensor's dtype differs from the one required (a hot swap must keep dtypes).
    #[error("tensor {name}: dtype {found}, expected {expected}")]
    DtypeMismatch {
        /// Tensor name.
        name: String,
        /// Required dtype.
        expected: String,
        /// Dtype found.
        found: String,
    },
    /// Two shards of one checkpoint hold a tensor of the same name.
    #[error("tensor {name} appears in both {first} and {second}")]
    DuplicateTensor {
        /// Tensor name.
        name: String,
        /// The first shard holding it.
        first: PathBuf,
        /// The second one.
        second: PathBuf,
    },
    /// Every step of the fallback chain failed.
    #[error("all {attempts} load attempts failed; last error: {last}")]
    FallbackExhausted {
        /// Number of attempts made.
        attempts: usize,
        /// The final error, rendered.
        last: String,
    },
}

/// Result alias for the registry.
pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

impl RegistryError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }

    /// Opens `path` for reading; it must be a regular file (never blocks on a FIFO). The
    /// outer error is an I/O error whose kind callers may test (`NotFound`).
    pub(crate) fn open_regular(
        path: &std::path::Path,
    ) -> std::io::Result<Result<std::fs::File, Self>> {
        match tensorvault_core::regular::open_regular(path) {
            Ok(f) => Ok(Ok(f)),
            Err(tensorvault_core::CoreError::NotRegularFile { path, kind }) => {
                Ok(Err(Self::NotRegularFile { path, kind }))
            }
            Err(tensorvault_core::CoreError::Io { source, .. }) => Err(source),
            Err(other) => Err(std::io::Error::other(other.to_string())),
        }
    }

    /// Read `path` whole if it holds at most `limit` bytes ([`RegistryError::FileTooLarge`]
    /// otherwise, checked before reading and again while reading, so a file that grows
    /// meanwhile cannot make the read unbounded). A FIFO, device or directory is
    /// [`RegistryError::NotRegularFile`].
    pub(crate) fn read_bounded(
        path: &std::path::Path,
        limit: u64,
    ) -> std::io::Result<Result<Vec<u8>, Self>> {
        use std::io::Read;
        let f = match Self::open_regular(path)? {
            Ok(f) => f,
            Err(e) => return Ok(Err(e)),
        };
        let size = f.metadata()?.len();
        let too_large = |size| Self::FileTooLarge {
            path: path.to_owned(),
            size,
            limit,
        };
        if size > limit {
            return Ok(Err(too_large(size)));
        }
        let mut buf = Vec::with_capacity(size as usize);
        f.take(limit + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > limit {
            return Ok(Err(too_large(buf.len() as u64)));
        }
        Ok(Ok(buf))
    }

    /// Wraps a JSON error with the document it concerns.
    pub(crate) fn json(path: impl Into<PathBuf>) -> impl FnOnce(serde_json::Error) -> Self {
        let path = path.into();
        move |source| Self::Json { path, source }
    }
}
