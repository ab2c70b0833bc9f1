//! The engine (ADR-018 section 3.15): replay on open, the write path (data slot, then
//! log record, then index), the read path (index, slot, CRC32C, decode, access
//! tracking), migration between tiers, deletion and log compaction.
//!
//! Concurrency: the index sits behind a `RwLock`; readers hold the read lock from lookup
//! until their bytes are checksummed, so a slot can never be freed and reused under a
//! reader. Writers are serialized by one `Mutex` and take the index write lock only to
//! publish. A slot freed by a delete, migration or replacement is reused only after the
//! log record that freed it is durable (or immediately under `Durability::Os`, where the
//! page cache keeps write order for kill -9).

//!
//! The engine is split by concern: `open` (replay), `write` (put, delete, the
//! durability policy), `read` (verified reads), `migrate` (moves between tiers), `access`
//! (access tracking), `compact` (flush, close, log compaction); `tensor` (whole tensors),
//! `report` (verify, stats, metrics), `tiering` (capacity, pins, maintain) and `heal`
//! (lineage repair) build on them. The store's fields are private to this module tree.

mod access;
mod centre;
mod compact;
mod heal;
mod migrate;
mod open;
mod read;
mod report;
mod tail;
mod tensor;
mod tiering;
mod write;

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::block_io::BlockIO;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::codec;
use crate::config::{CollectionConfig, StoreConfig};
use crate::error::{Result, StoreErr};
use crate::index::BlockIndex;
use crate::meta_log::{MetaLog, ReplayStats};
use crate::types::{BlockKey, BlockMeta, DType, ReconstructPolicy, TensorKind, Tier, MAX_NDIM};

/// What a block is, besides its values.
#[derive(Clone, Copy, Debug)]
pub struct BlockInfo<'a> {
    /// Element type of the values.
    pub dtype: DType,
    /// The whole tensor's shape (at most 8 dimensions).
    pub shape: &'a [u32],
    /// Lineage parent tensor id (0: none).
    pub lineage_parent: u128,
    /// Reconstruction policy.
    pub reconstruct: ReconstructPolicy,
    /// What the tensor holds (selects the quantized tiers' codec settings).
    pub kind: TensorKind,
}

impl<'a> BlockInfo<'a> {
    /// A self-contained generic block of `dtype` belonging to a tensor of `shape`.
    #[must_use]
    pub fn new(dtype: DType, shape: &'a [u32]) -> Self {
        Self {
            dtype,
            shape,
            lineage_parent: 0,
            reconstruct: ReconstructPolicy::None,
            kind: TensorKind::Generic,
        }
    }

    /// The same block declared as holding `kind`.
    #[must_use]
    pub fn with_kind(mut self, kind: TensorKind) -> Self {
        self.kind = kind;
        self
    }
}

/// Monotonic counters since open.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub migrations: AtomicU64,
    pub deletes: AtomicU64,
    pub checksum_failures: AtomicU64,
    /// Blocks rehydrated from their lineage and repaired in place.
    pub repairs: AtomicU64,
    /// Migrations per `[from tier][to tier]` (their sum is `migrations`).
    pub migrations_by_tier: [[AtomicU64; 4]; 4],
}

/// Writer-side state, behind the writer mutex.
pub(crate) struct Writer<M> {
    pub log: M,
    pub catalog: Catalog,
    /// Slots freed by records that are not yet durable.
    pending_free: Vec<(Tier, u64)>,
    /// Writes since the last sync (for `Durability::EveryN`).
    unsynced: u32,
    /// Records were appended since the last commit mark (`store/tail.rs`): the next
    /// flush ends the log with one.
    unconfirmed: bool,
    /// Set after a failed log append: the log may end in a torn record, so no further
    /// write is accepted until the store is reopened (replay cuts the tail).
    poisoned: Option<String>,
}

/// A block payload ready to be written.
pub(crate) struct Prepared {
    pub key: BlockKey,
    pub tier: Tier,
    pub enc: codec::Encoded,
    pub dtype: DType,
    pub shape: [u32; MAX_NDIM],
    pub ndim: u8,
    pub lineage_parent: u128,
    pub reconstruct: ReconstructPolicy,
    pub kind: TensorKind,
    /// Fingerprint of the mean row a centred block is coded against (`BlockMeta::centre`).
    pub centre: Option<u32>,
}

/// The temporal tensor store over one collection.
pub struct TensorStore<C: Clock, B: BlockIO, M: MetaLog> {
    tenant: String,
    collection: String,
    clock: C,
    io: B,
    geo: CollectionConfig,
    cfg: StoreConfig,
    index: RwLock<BlockIndex>,
    writer: Mutex<Writer<M>>,
    reads_since_flush: AtomicU32,
    /// Accesses not yet applied to the index (see `note_access`).
    pending_access: Mutex<Vec<(BlockKey, u64)>>,
    counters: Counters,
    replay: ReplayStats,
    replay_nanos: u64,
    replay_ignored: u64,
    /// Valid log records replay could not use (the first `MAX_DEFECT_ENTRIES`): reported
    /// by `verify`.
    replay_defects: Vec<crate::tensor::ReplayDefect>,
    /// Their number.
    replay_defects_total: u64,
    /// Blocks dropped at open, with why: their slot lies beyond the end of their tier file
    /// (a missing, emptied or truncated tier file). Reported by `verify`.
    dropped_on_open: Vec<(BlockMeta, String)>,
    /// The collection's locks (the `LOCK` file, the directory) and its claim in this
    /// process's table of open collections, held while open and released on drop
    /// (directory stores only; `crate::fs::DirLock`).
    _lock: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Deltas and factors of `Delta` / `Factor` blocks (src/reconstruct.rs).
    lineage: crate::lineage::LineageStore,
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned { lock: "store" }
}

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// The collection geometry (from the log header).
    #[must_use]
    pub fn geometry(&self) -> &CollectionConfig {
        &self.geo
    }

    /// The store's configuration (durability, recovery, limits) as opened.
    #[must_use]
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// The tenant and collection names this store was opened with.
    #[must_use]
    pub fn names(&self) -> (&str, &str) {
        (&self.tenant, &self.collection)
    }

    /// The clock.
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The block backend.
    #[must_use]
    pub fn block_io(&self) -> &B {
        &self.io
    }

    /// What replay found on open, and how many records it ignored as not applicable.
    #[must_use]
    pub fn replay_stats(&self) -> (&ReplayStats, u64) {
        (&self.replay, self.replay_ignored)
    }

    pub(crate) fn read_index(&self) -> Result<RwLockReadGuard<'_, BlockIndex>> {
        self.index.read().map_err(poisoned)
    }

    pub(crate) fn write_index(&self) -> Result<RwLockWriteGuard<'_, BlockIndex>> {
        self.index.write().map_err(poisoned)
    }

    /// The writer's state for reading only (the name catalog): available even after a
    /// failed write stopped the writer.
    pub(crate) fn lock_writer_for_read(&self) -> Result<MutexGuard<'_, Writer<M>>> {
        self.writer.lock().map_err(poisoned)
    }

    pub(crate) fn lock_writer(&self) -> Result<MutexGuard<'_, Writer<M>>> {
        let w = self.writer.lock().map_err(poisoned)?;
        if let Some(why) = &w.poisoned {
            return Err(StoreErr::WriterFailed { cause: why.clone() });
        }
        Ok(w)
    }

    /// Metadata of one block.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn meta(&self, key: &BlockKey) -> Result<Option<BlockMeta>> {
        self.apply_pending_access()?;
        Ok(self.read_index()?.get(key))
    }

    /// Every live block's metadata, sorted by key.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn blocks(&self) -> Result<Vec<BlockMeta>> {
        self.apply_pending_access()?;
        Ok(self.read_index()?.sorted())
    }

    /// Number of live blocks per tier.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn tier_counts(&self) -> Result<[usize; 4]> {
        let idx = self.read_index()?;
        Ok(Tier::ALL.map(|t| idx.tier_count(t)))
    }

    /// Call `f` with the MetaLog (e.g. to persist a [`crate::MemMetaLog`]'s bytes).
    ///
    /// # Errors
    /// Only if a thread panicked while holding the writer lock.
    pub fn with_log<R>(&self, f: impl FnOnce(&M) -> R) -> Result<R> {
        Ok(f(&self.writer.lock().map_err(poisoned)?.log))
    }

    /// Number of records in the log.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the writer lock.
    pub fn log_records(&self) -> Result<u64> {
        Ok(self.writer.lock().map_err(poisoned)?.log.record_count())
    }
}

impl<C: Clock, B: BlockIO, M: MetaLog> Drop for TensorStore<C, B, M> {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!(error = %e, "flush on drop failed");
        }
    }
}
