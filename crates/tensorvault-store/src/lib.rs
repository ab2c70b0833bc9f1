//! The tensorvault temporal tensor store (ADR-018): tensors split into fixed-size blocks,
//! each stored raw (Tier0) or groupwise-quantized at 8, 5 (or 7) and 3 bits (Tiers 1-3)
//! in per-tier slot files, with every state change recorded in an append-only,
//! CRC32C-protected metadata log that is replayed on open.
//!
//! Layers, bottom up:
//! - [`types`]: block identity, tiers, [`BlockMeta`] with the ADR's access tracking;
//! - [`meta_log`]: the [`MetaLog`] trait, [`FileMetaLog`] and [`MemMetaLog`];
//! - [`block_io`]: the [`BlockIO`] trait, [`MmapBlockIO`] (feature `mmap`) and
//!   [`BufferBlockIO`] (in memory, with a host persistence hook: the WASM path);
//! - [`TensorStore`]: replay, the read/write/migrate paths and whole-tensor helpers.
//!
//! The on-disk format is specified byte by byte in `docs/formats/store.md`.

pub mod block_io;
pub mod clock;
pub mod config;
mod error;
pub mod meta_log;
pub mod types;

pub use block_io::{BlockIO, BufferBlockIO};
#[cfg(feature = "mmap")]
pub use block_io::MmapBlockIO;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{CollectionConfig, Durability, RecoveryMode, StoreConfig};
pub use error::{Result, StoreErr};
pub use meta_log::{FileMetaLog, MemMetaLog, MetaLog, MetaRecord, ReplayStats};
pub use types::{tensor_id, BlockKey, BlockMeta, DType, ReconstructPolicy, Tier};
