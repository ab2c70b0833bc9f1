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
//! - [`TensorStore`]: replay, the read/write/migrate paths and whole-tensor helpers;
//! - [`lineage`] (`delta.dat` / `factor.dat`) and `store/heal.rs`: the reconstruction
//!   policies: what a `Delta` / `Factor` put keeps besides its block, and how a read
//!   rebuilds a block whose checksum fails and repairs its slot in place;
//! - [`kv`]: the attention KV-cache workload: per-(layer, head, key|value) tensors with
//!   Tier0 tail appends and tier-demoted older blocks;
//! - [`prefix`]: a KV prefix cache: prompt chunks named by a token hash chain, reused
//!   across requests and processes.
//!
//! The on-disk format is specified byte by byte in `docs/formats/store.md`.

pub mod block_io;
mod builder;
pub mod catalog;
pub mod centre;
pub mod clock;
mod codec;
mod codec_kv_keys;
mod codec_weights;
pub mod config;
#[cfg(feature = "mmap")]
mod dir_lock;
mod error;
pub mod finite;
#[cfg(feature = "mmap")]
pub mod fs;
mod index;
pub mod kv;
pub mod kv_age;
pub mod lineage;
#[cfg(feature = "threads")]
pub mod maintainer;
pub mod meta_log;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod prefix;
mod rope;
mod store;
mod tensor;
pub mod tiering;
mod time;
pub mod types;

#[cfg(feature = "mmap")]
pub use block_io::MmapBlockIO;
pub use block_io::{BlockIO, BufferBlockIO};
pub use builder::StoreBuilder;
#[cfg(feature = "mmap")]
pub use builder::{DirStoreBuilder, OpenMode};
pub use catalog::Catalog;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    CollectionConfig, Durability, RecoveryMode, StoreConfig, CODEC_V1, CODEC_V2, CODEC_V3,
    CODEC_V4, ECSQ_BITS, ECSQ_BLOCK_LOG2, ECSQ_LANES_LOG2, EXTENT_CAP_SLOTS,
    KV_ECSQ_STEP_SIXTEENTHS, KV_ECSQ_TIER2_BITS, KV_ECSQ_TIER2_STEPS_SIXTEENTHS,
};
pub use error::{Result, StoreErr};
pub use finite::{HeldBlock, HoldReason};
#[cfg(feature = "mmap")]
pub use fs::DirStore;
pub use index::{BlockIndex, IndexBuilder};
pub use kv::{KvCache, KvKind, KvSlot};
pub use kv_age::KvAgePolicy;
pub use lineage::{LineageConfig, LineageStats, LineageStore};
#[cfg(feature = "threads")]
pub use maintainer::Maintainer;
pub use meta_log::{FileMetaLog, MemMetaLog, MetaLog, MetaRecord, ReplayStats, COMMIT_MARK_KEY};
#[cfg(feature = "mmap")]
pub use prefix::PrefixCache;
pub use store::{BlockInfo, TensorStore};
pub use tensor::{
    BlockProblem, ReplayDefect, StoreStats, StoredTensor, TensorInfo, VerifyReport,
    MAX_DEFECT_ENTRIES,
};
pub use tiering::{MaintainReport, TierPolicy};
pub use types::{
    store_dtype, tensor_id, BlockKey, BlockMeta, DType, ReconstructPolicy, TensorKind, Tier,
    STORE_DTYPES,
};
