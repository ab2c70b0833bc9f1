//! The store's one error type.

use std::path::PathBuf;

use crate::types::{BlockKey, Tier};

/// Errors returned by the storage engine. Every variant names what was wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreErr {
    /// No live block with this key (in this tier, when one is named).
    #[error("block {key} not found{}", tier.map(|t| format!(" in {t}")).unwrap_or_default())]
    NotFound {
        /// The key looked up.
        key: BlockKey,
        /// The tier searched, if the lookup was tier-specific.
        tier: Option<Tier>,
    },
    /// The collection `<root>/<tenant>/<collection>` does not exist (no `meta.log`), and
    /// the open was not asked to create it.
    #[error("no such collection {tenant}/{collection} ({} does not exist)", path.display())]
    CollectionNotFound {
        /// The tenant name.
        tenant: String,
        /// The collection name.
        collection: String,
        /// The collection's MetaLog that is missing.
        path: PathBuf,
    },
    /// A write to a store or log opened read-only (a snapshot reader), or after an
    /// earlier write of this log failed part-way (`poisoned`: reopen to recover).
    #[error("{op} {}: {}", path.display(), if *poisoned { "an earlier write failed; reopen the log to recover" } else { "opened read-only" })]
    NotWritable {
        /// What was attempted (`append`, `fsync`, `grow`).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Whether an earlier failed write stopped it (else it was opened read-only).
        poisoned: bool,
    },
    /// No tensor with this logical name in the collection.
    #[error("tensor {name:?} not found")]
    TensorNotFound {
        /// The logical name.
        name: String,
    },
    /// A tenant or collection directory, or a file inside a collection, is a symbolic
    /// link: the store never follows links out of its root.
    #[error("{} is a symbolic link; the store does not follow links out of its root", path.display())]
    SymlinkRefused {
        /// The link.
        path: std::path::PathBuf,
    },
    /// A file of a collection (`meta.log`, `names.log`, a tier file) is a FIFO, socket,
    /// device or directory: refused without blocking (a FIFO open would wait forever).
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: tensorvault_core::regular::FileKind,
    },
    /// Some blocks of a tensor are missing (an interrupted put, a lost or forged log
    /// record): the tensor cannot be read whole.
    #[error("tensor {name:?} is incomplete: {present} of its {expected} blocks are present")]
    TensorIncomplete {
        /// The tensor's name (or its id in hex).
        name: String,
        /// Blocks present.
        present: u64,
        /// Blocks its shape needs.
        expected: u64,
    },
    /// A block's payload does not match its checksum (and could not be rebuilt).
    #[error("block {key} in {tier} at offset {offset} is corrupt: crc32c {actual:#010x}, expected {expected:#010x}")]
    Corruption {
        /// The block.
        key: BlockKey,
        /// Its tier.
        tier: Tier,
        /// Byte offset of its slot in the tier file.
        offset: u64,
        /// The checksum recorded in the MetaLog.
        expected: u32,
        /// The checksum of the bytes read.
        actual: u32,
    },
    /// A block's payload passed its checksum but does not decode (a codec error).
    #[error("block {key} in {tier} does not decode: {source}")]
    Decode {
        /// The block.
        key: BlockKey,
        /// Its tier.
        tier: Tier,
        /// The codec's error.
        source: tensorvault_quant::QuantError,
    },
    /// An operating-system I/O error on a named file.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done ("open", "write", "fsync", ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A storage backend other than local files (an object store, ...) failed. `source`
    /// is the backend's own typed error: [`StoreErr::backend_source`] gets it back (e.g.
    /// `tensorvault_store_object::ObjectErr`).
    #[error("{op} {path}: {source}")]
    Backend {
        /// What was being done (`get`, `put`, `commit`, ...).
        op: &'static str,
        /// What it was done to (an object's URL, a prefix); empty when nothing in
        /// particular.
        path: String,
        /// The backend's error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A MetaLog record (or the log header) is malformed.
    #[error("metalog record at offset {offset}: {reason}")]
    InvalidRecord {
        /// Byte offset of the record in the log.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A file of the store has the wrong magic, version or a bad header field.
    #[error("{file}: field {field} at offset {offset}: {reason}")]
    BadHeader {
        /// The file (`meta.log`, `collection.json`, ...).
        file: String,
        /// The field.
        field: &'static str,
        /// Its byte offset (0 for whole-file problems).
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A tier is full (`max_blocks_per_tier`) or a payload is larger than the tier's slot.
    #[error("{tier} capacity exceeded: {reason}")]
    CapacityExceeded {
        /// The tier.
        tier: Tier,
        /// Why.
        reason: String,
    },
    /// Two live blocks claim overlapping bytes of a tier file (extent allocation; a
    /// consistent log never produces it: only a lost or forged record does). Field
    /// `data_offset` of the block whose extent starts at `offset`.
    #[error("{tier}: the extent at data_offset {offset} overlaps the live extent at {other} ({other_len} bytes)")]
    ExtentOverlap {
        /// The tier.
        tier: Tier,
        /// Start of the later extent.
        offset: u64,
        /// Start of the extent it overlaps.
        other: u64,
        /// Allocated length of that extent in bytes.
        other_len: u64,
    },
    /// A tenant, collection or tensor name that could escape the store root or is empty.
    #[error("invalid {field} name {name:?}: {reason}")]
    InvalidName {
        /// Which name (`tenant`, `collection`, `tensor`).
        field: &'static str,
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// An argument is out of range or inconsistent.
    #[error("invalid argument {field}: {reason}")]
    InvalidArgument {
        /// The argument.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A KV cache was opened with a RoPE spec other than the one its collection was
    /// created with (keys stored before RoPE need the same rotation at every read; a
    /// cache of post-RoPE keys has none).
    #[error(
        "KV cache RoPE mismatch: the collection stores {}, the open asked for {}",
        fmt_rope(stored),
        fmt_rope(requested)
    )]
    RopeMismatch {
        /// The persisted spec (`None`: post-RoPE keys).
        stored: Option<crate::rope::RopeSpec>,
        /// The spec the open asked for.
        requested: Option<crate::rope::RopeSpec>,
    },
    /// Rebuilding a corrupt block would need more corrupt `Delta` ancestors rebuilt
    /// first than `LineageConfig::max_chain_depth` allows.
    #[error("block {key}: lineage chain deeper than {limit} corrupt ancestors")]
    LineageTooDeep {
        /// The block whose parent would exceed the limit.
        key: BlockKey,
        /// The configured limit.
        limit: usize,
    },
    /// Rebuilding a corrupt block leads back to a tensor already being rebuilt.
    #[error("block {key}: lineage cycle through tensor {tensor_id:032x}")]
    LineageCycle {
        /// The block whose parent closes the cycle.
        key: BlockKey,
        /// The tensor met twice.
        tensor_id: u128,
    },
    /// The collection is held by another process: by another writer (never waited for),
    /// or by readers or a writer for longer than the open was willing to wait.
    #[error("{path} is {held}{waited}")]
    Locked {
        /// The collection directory.
        path: PathBuf,
        /// Who holds it: "open for writing in another process" or "open in another
        /// process (readers or a writer)".
        held: &'static str,
        /// How long the open waited, as text (empty when it did not wait).
        waited: String,
    },
    /// A thread panicked while holding one of the store's locks; the state it guarded may
    /// be half-updated. Reopen the store (replay rebuilds everything from the log).
    #[error("a thread panicked while holding the {lock} lock; reopen the store")]
    Poisoned {
        /// Which lock (`store`, `index`, `writer`, `lineage`, `kv cache`).
        lock: &'static str,
    },
    /// An earlier write failed part-way (e.g. an fsync error): the store refuses further
    /// writes until it is reopened, which replays the log to a consistent state.
    #[error("an earlier write failed ({cause}); reopen the store")]
    WriterFailed {
        /// The failure that stopped the writer.
        cause: String,
    },
    /// A tensor of an element type the store does not keep (see
    /// [`crate::types::STORE_DTYPES`]).
    #[error("dtype {dtype} cannot be stored: use f32, f16, bf16, i8 or u8")]
    UnsupportedDType {
        /// The refused dtype.
        dtype: tensorvault_core::DType,
    },
    /// A prefix cache was opened for a model whose stored identity or geometry differs
    /// (`field`: `model`, `layers`, `kv_heads`, `head_dim`, `chunk_tokens`, `block_elems`).
    #[error("prefix cache: {field} is {stored} in the store, {given} given")]
    ModelMismatch {
        /// The field that differs.
        field: &'static str,
        /// Its stored value.
        stored: String,
        /// The value given.
        given: String,
    },
    /// A KV value given to the prefix cache is NaN or infinite.
    #[error("{field}: layer {layer} head {head} token {token} is not finite")]
    NonFiniteKv {
        /// `keys` or `values`.
        field: &'static str,
        /// Its layer.
        layer: u32,
        /// Its KV head.
        head: u32,
        /// Its token position.
        token: u64,
    },
    /// A block's values include NaN or infinity, which a quantized tier cannot hold
    /// (`crate::finite`: Tier0 keeps them bit-exact).
    #[error("block {key}: {count} values are NaN or infinite (the first at element {first} of the tensor); {tier} quantizes and cannot hold them")]
    NonFiniteBlock {
        /// The block.
        key: BlockKey,
        /// The quantized tier it was being encoded for.
        tier: Tier,
        /// How many values of the block are not finite.
        count: u64,
        /// Index of the first one in the whole tensor (row-major).
        first: u64,
    },
    /// A write (`op`) through a prefix cache opened read-only.
    #[error("{op}: the prefix cache is open read-only")]
    ReadOnly {
        /// The refused operation.
        op: &'static str,
    },
    /// A quantized block of a centred embedding tensor (`CollectionConfig::centre`) was
    /// coded against a mean row other than the one the tensor's side record holds (a put
    /// interrupted between its new side record and its blocks, an old block left from an
    /// earlier version), or the side record is missing (`found: None`): the block is
    /// never decoded with the wrong mean. Put the tensor again.
    #[error("tensor {tensor}: block {block} was coded against mean row {expected:#010x}, {}: a put was interrupted", found.map_or("and the tensor has no side record (mean row)".to_owned(), |f| format!("but the side record holds {f:#010x}")))]
    CentreMismatch {
        /// The tensor's name (or its id in hex).
        tensor: String,
        /// The block's index.
        block: u32,
        /// The fingerprint the block's record carries.
        expected: u32,
        /// The fingerprint of the side record, if there is one.
        found: Option<u32>,
    },
    /// The side record (mean row) of a centred embedding tensor is unusable: `field` of
    /// its MetaLog record (`side.tier`, `side.dtype`, `side.data_len`, `side.centre_fp`,
    /// `shape`) or of its payload (`mean`, at byte `offset` of the payload) breaks the
    /// rules of `docs/formats/store.md`, "Centred embedding tensors".
    #[error("tensor {tensor}: side record (mean row) field {field} at offset {offset}: {reason}")]
    BadCentre {
        /// The tensor's name (or its id in hex).
        tensor: String,
        /// The offending field.
        field: &'static str,
        /// Byte offset of the field (in the record for record fields, in the payload for
        /// `mean`).
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The codec refused to encode.
    #[error("quantization: {0}")]
    Quant(#[from] tensorvault_quant::QuantError),
}

fn fmt_rope(r: &Option<crate::rope::RopeSpec>) -> String {
    match r {
        Some(r) => format!("pre-RoPE keys ({r})"),
        None => "post-RoPE keys (no RoPE spec)".to_owned(),
    }
}

/// The `field` of a [`StoreErr::BadHeader`] whose header checksum fails.
pub const HEADER_CRC_FIELD: &str = "crc32c";

/// Result alias for the store.
pub type Result<T, E = StoreErr> = std::result::Result<T, E>;

impl StoreErr {
    /// An [`StoreErr::Io`] for `path`.
    /// Opens `path` with `opts`; it must be a regular file (never blocks on a FIFO).
    /// Errors keep the `io::Error` kind (`NotFound`) in [`StoreErr::Io`] under `op`.
    ///
    /// # Errors
    /// [`StoreErr::NotRegularFile`], [`StoreErr::Io`].
    pub fn open_regular(
        op: &'static str,
        path: &std::path::Path,
        opts: &std::fs::OpenOptions,
    ) -> Result<std::fs::File, Self> {
        use tensorvault_core::CoreError;
        tensorvault_core::regular::open_regular_with(path, opts).map_err(|e| match e {
            CoreError::NotRegularFile { path, kind } => StoreErr::NotRegularFile { path, kind },
            CoreError::Io { source, .. } => StoreErr::io(op, path, source),
            other => StoreErr::io(op, path, std::io::Error::other(other.to_string())),
        })
    }

    /// A [`StoreErr::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreErr::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A [`StoreErr::Backend`] carrying the backend's typed error `source`.
    pub fn backend(
        op: &'static str,
        path: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreErr::Backend {
            op,
            path: path.into(),
            source: Box::new(source),
        }
    }

    /// The backend error of type `E` inside a [`StoreErr::Backend`], if this is one and
    /// its source is an `E`.
    #[must_use]
    pub fn backend_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            StoreErr::Backend { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// Whether this error reports corrupt data (as opposed to a missing block or bad input).
    #[must_use]
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            StoreErr::Corruption { .. }
                | StoreErr::Decode { .. }
                | StoreErr::InvalidRecord { .. }
                | StoreErr::TensorIncomplete { .. }
                | StoreErr::LineageTooDeep { .. }
                | StoreErr::LineageCycle { .. }
                | StoreErr::ExtentOverlap { .. }
                | StoreErr::CentreMismatch { .. }
                | StoreErr::BadCentre { .. }
        ) || self.is_header_checksum()
    }

    /// Whether this is a file header whose own checksum fails (corrupt), as opposed to a
    /// header of another format or version.
    #[must_use]
    pub fn is_header_checksum(&self) -> bool {
        matches!(self, StoreErr::BadHeader { field, .. } if *field == HEADER_CRC_FIELD)
    }
}
