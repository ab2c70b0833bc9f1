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

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::codec;
use crate::config::{CollectionConfig, Durability, StoreConfig};
use crate::error::{Result, StoreErr};
use crate::index::{BlockIndex, Ignored};

/// Most index entries reserved up front at open (about 100 MiB of table); see `open`.
const MAX_INDEX_RESERVE: u64 = 1 << 20;
use crate::meta_log::{MetaLog, MetaRecord, ReplayStats};
use crate::types::{BlockKey, BlockMeta, DType, ReconstructPolicy, TensorKind, Tier, MAX_NDIM};

/// Blocks re-encoded and moved per batch by [`TensorStore::migrate_blocks`].
const MIGRATE_BATCH_BLOCKS: usize = 512;

/// Queued accesses that trigger an apply to the index.
const PENDING_ACCESS_MAX: usize = 4096;

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
}

/// The temporal tensor store over one collection.
pub struct TensorStore<C: Clock, B: BlockIO, M: MetaLog> {
    pub(crate) tenant: String,
    pub(crate) collection: String,
    pub(crate) clock: C,
    pub(crate) io: B,
    pub(crate) geo: CollectionConfig,
    pub(crate) cfg: StoreConfig,
    pub(crate) index: RwLock<BlockIndex>,
    pub(crate) writer: Mutex<Writer<M>>,
    reads_since_flush: AtomicU32,
    /// Accesses not yet applied to the index (see `note_access`).
    pending_access: Mutex<Vec<(BlockKey, u64)>>,
    pub(crate) counters: Counters,
    pub(crate) replay: ReplayStats,
    pub(crate) replay_nanos: u64,
    pub(crate) replay_ignored: u64,
    /// Blocks dropped at open because their slot lies beyond the end of their tier file (a
    /// missing, emptied or truncated tier file): reported by `verify`.
    pub(crate) lost_on_open: Vec<BlockMeta>,
    /// The collection's `LOCK` file, held while open (directory stores only).
    pub(crate) _lock: Option<Vec<std::fs::File>>,
    /// Deltas and factors of `Delta` / `Factor` blocks (src/reconstruct.rs).
    pub(crate) lineage: crate::lineage::LineageStore,
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned { lock: "store" }
}

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Open a collection: replay `log` into the index (applying `cfg.recovery`), rebuild
    /// the free slot lists of `io`. `io` must have been built with `log.collection()`.
    ///
    /// # Errors
    /// Replay and I/O errors of the log and block backends.
    pub fn open(
        tenant: &str,
        collection: &str,
        clock: C,
        io: B,
        mut log: M,
        mut catalog: Catalog,
        cfg: StoreConfig,
    ) -> Result<Self> {
        let geo = log.collection();
        geo.validate()?;
        let started = crate::time::Stopwatch::start();
        let mut index = BlockIndex::default();
        // Every Create is one record: reserving for the record count avoids rehashing the
        // table while it doubles. The count comes from the file's length, which a sparse or
        // damaged file can inflate at no cost, so the reservation is capped (past the cap
        // the table grows as records really arrive).
        index
            .map
            .reserve(usize::try_from(log.record_count().min(MAX_INDEX_RESERVE)).unwrap_or(0));
        let mut ignored = 0u64;
        let replay = log.replay(cfg.recovery, &mut |rec| {
            if let Err(why) = index.apply(rec, &geo) {
                match &why {
                    Ignored::BadSlot(reason) => {
                        tracing::warn!(key = %rec.key(), reason, "ignoring metalog record with an impossible slot");
                    }
                    Ignored::BadShape(reason) => {
                        tracing::warn!(key = %rec.key(), reason, "ignoring metalog record with an impossible shape");
                    }
                    Ignored::UnknownBlock | Ignored::StaleMigrate => {}
                }
                ignored += 1;
            }
            Ok(())
        })?;
        // A block whose slot lies beyond its tier's end never reached the medium (only
        // possible after power loss under a relaxed durability policy, or a crafted log):
        // drop it rather than let the backend allocate up to a forged offset.
        // (One `usage` per tier, not per block: it stats the tier file.)
        let tier_bytes = Tier::ALL.map(|t| io.usage(t).bytes);
        let mut lost: Vec<BlockMeta> = index
            .map
            .values()
            .filter(|m| {
                m.data_offset.saturating_add(u64::from(m.data_len)) > tier_bytes[m.tier.index()]
            })
            .copied()
            .collect();
        lost.sort_by_key(|m| m.key);
        for m in &lost {
            tracing::warn!(key = %m.key, "block's slot lies beyond its tier file: dropped as lost");
            index.remove(&m.key);
            ignored += 1;
        }
        if let Err(e) =
            io.reset_allocation(&mut index.map.values().map(|m| (m.tier, m.data_offset)))
        {
            // Two blocks on one slot (only after a lost record): keep the slot's occupant.
            let dropped = index.drop_shared_slots(&io);
            if dropped == 0 {
                return Err(e);
            }
            ignored += dropped;
            io.reset_allocation(&mut index.map.values().map(|m| (m.tier, m.data_offset)))?;
        }
        if replay.skipped_total > 0 {
            tracing::warn!(
                skipped = replay.skipped_total,
                "metalog replay skipped corrupt records"
            );
        }
        // A tensor's id is derived from its name (and lineage parent): a names.log record
        // whose name does not derive its id is forged or damaged, and would list a tensor
        // under another's name. Checked against block 0 of each named tensor.
        catalog.authenticate(|id, name| {
            index
                .get(&BlockKey::new(id, 0))
                .map(|m| crate::types::tensor_id(tenant, collection, name, m.lineage_parent) == id)
        });
        Self {
            tenant: tenant.to_owned(),
            collection: collection.to_owned(),
            clock,
            io,
            geo,
            cfg,
            index: RwLock::new(index),
            writer: Mutex::new(Writer {
                log,
                catalog,
                pending_free: Vec::new(),
                unsynced: 0,
                poisoned: None,
            }),
            reads_since_flush: AtomicU32::new(0),
            pending_access: Mutex::new(Vec::new()),
            counters: Counters::default(),
            replay,
            replay_nanos: started.elapsed_nanos(),
            replay_ignored: ignored,
            lost_on_open: lost,
            _lock: None,
            lineage: crate::lineage::LineageStore::in_memory(),
        }
        .compacted_if_needed()
    }

    /// Apply `compact_ratio` right after open.
    fn compacted_if_needed(self) -> Result<Self> {
        self.compact_if_over(self.cfg.compact_ratio)?;
        Ok(self)
    }

    /// [`TensorStore::compact`] if the log holds more than `ratio` records per live block
    /// (0: never); returns whether it compacted.
    ///
    /// # Errors
    /// As [`TensorStore::compact`].
    pub fn compact_if_over(&self, ratio: u32) -> Result<bool> {
        if ratio == 0 {
            return Ok(false);
        }
        let live = self.read_index()?.len().max(1) as u64;
        if self.log_records()? <= u64::from(ratio).saturating_mul(live) {
            return Ok(false);
        }
        self.compact()?;
        Ok(true)
    }

    /// The collection geometry (from the log header).
    #[must_use]
    pub fn geometry(&self) -> &CollectionConfig {
        &self.geo
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
        Ok(self.read_index()?.get(key).copied())
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

    // ---------------------------------------------------------------- write path

    /// Encode `data` (little-endian elements of `info.dtype`, at most `block_elems` of
    /// them) for `tier`.
    pub(crate) fn prepare(
        &self,
        key: BlockKey,
        tier: Tier,
        info: &BlockInfo<'_>,
        data: &[u8],
    ) -> Result<Prepared> {
        let size = info.dtype.size();
        if data.is_empty() || data.len() % size != 0 {
            return Err(StoreErr::InvalidArgument {
                field: "data",
                reason: format!(
                    "{} bytes is not a non-empty whole number of {} elements",
                    data.len(),
                    info.dtype
                ),
            });
        }
        let n = data.len() / size;
        if n > self.geo.block_elems as usize {
            return Err(StoreErr::InvalidArgument {
                field: "data",
                reason: format!(
                    "{n} elements exceed the collection's block of {}",
                    self.geo.block_elems
                ),
            });
        }
        if info.shape.len() > MAX_NDIM {
            return Err(StoreErr::InvalidArgument {
                field: "shape",
                reason: format!("{} dimensions, at most {MAX_NDIM}", info.shape.len()),
            });
        }
        if let Some(reason) = crate::index::shape_problem(&self.geo, info.shape) {
            // Replay would ignore such a block: refuse it rather than acknowledge a write
            // that a reopen loses.
            return Err(StoreErr::InvalidArgument {
                field: "shape",
                reason,
            });
        }
        let mut shape = [0u32; MAX_NDIM];
        shape[..info.shape.len()].copy_from_slice(info.shape);
        let enc = match self.geo.bits(tier) {
            None => {
                if size > usize::from(self.geo.tier0_elem_bytes) {
                    return Err(StoreErr::InvalidArgument {
                        field: "dtype",
                        reason: format!(
                            "{} elements do not fit this collection's {}-byte Tier0 slots",
                            info.dtype, self.geo.tier0_elem_bytes
                        ),
                    });
                }
                codec::Encoded {
                    bytes: data.to_vec(),
                    bits: (size * 8) as u8,
                    scale: 0.0,
                }
            }
            Some(_) => {
                let mut vals = Vec::new();
                codec::to_f32(info.dtype, data, &mut vals)?;
                let place = codec::BlockPlace {
                    kind: info.kind,
                    shape: info.shape,
                    block_index: key.block_index,
                    len: vals.len(),
                };
                codec::encode_for_tier(&self.geo, tier, &place, &vals)?
            }
        };
        Ok(Prepared {
            key,
            tier,
            enc,
            dtype: info.dtype,
            shape,
            ndim: info.shape.len() as u8,
            lineage_parent: info.lineage_parent,
            reconstruct: info.reconstruct,
            // A codec v1 collection encodes every kind alike and keeps its records
            // readable by builds from before kinds (which require byte 112 to be zero).
            kind: if self.geo.codec == crate::config::CODEC_V1 {
                TensorKind::Generic
            } else {
                info.kind
            },
        })
    }

    /// Write one block (replacing any block with the same key). `data` holds the
    /// block's elements as little-endian `info.dtype` values (at most `block_elems`);
    /// quantized tiers convert them to f32 and quantize.
    ///
    /// Returns once the block is as durable as the durability policy promises.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for bad data/shape/dtype; [`StoreErr::Quant`] for
    /// non-finite values in a quantized tier; [`StoreErr::CapacityExceeded`];
    /// [`StoreErr::Io`].
    pub fn put_block(
        &self,
        key: BlockKey,
        tier: Tier,
        info: &BlockInfo<'_>,
        data: &[u8],
    ) -> Result<()> {
        let p = self.prepare(key, tier, info, data)?;
        self.write_prepared(vec![p])
    }

    /// Write prepared payloads as one batch: data slots, one data sync, one log append,
    /// one log sync (per the durability policy), then publish to the index.
    pub(crate) fn write_prepared(&self, batch: Vec<Prepared>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // Accesses made before this write belong to the block being replaced.
        self.apply_pending_access()?;
        if self
            .cfg
            .max_blocks_per_tier
            .iter()
            .any(|&l| l != usize::MAX)
        {
            let mut incoming = [0usize; 4];
            {
                let idx = self.read_index()?;
                for p in &batch {
                    if idx.get(&p.key).map_or(true, |m| m.tier != p.tier) {
                        incoming[p.tier.index()] += 1;
                    }
                }
            }
            let keys: Vec<BlockKey> = batch.iter().map(|p| p.key).collect();
            self.make_room(incoming, &keys)?;
        }
        let lineage = self.lineage_prepare(&batch)?;
        let mut w = self.lock_writer()?;
        self.check_capacity(&batch)?;
        let now = self.clock.now_ticks();
        let mut metas = Vec::with_capacity(batch.len());
        for p in &batch {
            let written = self.io.write_block(p.tier, p.key, &p.enc.bytes);
            let (data_offset, data_len) = match written {
                Ok(v) => v,
                Err(e) => {
                    for m in &metas {
                        let m: &BlockMeta = m;
                        let _ = self.io.free_block(m.tier, m.data_offset);
                    }
                    return Err(e);
                }
            };
            metas.push(BlockMeta {
                key: p.key,
                shape: p.shape,
                shape_ndim: p.ndim,
                dtype: p.dtype,
                tier: p.tier,
                bits: p.enc.bits,
                scale: p.enc.scale,
                zero_point: 0,
                created_at: now,
                last_access_at: now,
                access_count: 0,
                ema_access_rate: 0.0,
                access_window: 1,
                checksum: crc32c(&p.enc.bytes),
                lineage_parent: p.lineage_parent,
                reconstruct: p.reconstruct,
                kind: p.kind,
                tier_since: now,
                data_offset,
                data_len,
            });
        }
        let recs: Vec<MetaRecord> = metas
            .iter()
            .map(|m| MetaRecord::Create { meta: *m })
            .collect();
        let new_slots: Vec<(Tier, u64)> = metas.iter().map(|m| (m.tier, m.data_offset)).collect();
        self.log_and_sync(&mut w, &recs, batch.len() as u32, &new_slots)?;
        {
            let mut idx = self.write_index()?;
            for m in metas {
                if let Some(old) = idx.upsert(m) {
                    w.pending_free.push((old.tier, old.data_offset));
                }
                idx.dirty.remove(&m.key);
            }
        }
        let lineage = self.lineage_commit(lineage, now);
        let bytes: usize = batch.iter().map(|p| p.enc.bytes.len()).sum();
        self.counters
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.counters
            .bytes_written
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.release_frees(&mut w)?;
        lineage
    }

    fn check_capacity(&self, batch: &[Prepared]) -> Result<()> {
        let limits = self.cfg.max_blocks_per_tier;
        if limits.iter().all(|&l| l == usize::MAX) {
            return Ok(());
        }
        let idx = self.read_index()?;
        let mut counts = Tier::ALL.map(|t| idx.tier_count(t));
        for p in batch {
            if let Some(old) = idx.get(&p.key) {
                counts[old.tier.index()] -= 1;
            }
            counts[p.tier.index()] += 1;
            if counts[p.tier.index()] > limits[p.tier.index()] {
                return Err(StoreErr::CapacityExceeded {
                    tier: p.tier,
                    reason: format!("max_blocks_per_tier is {}", limits[p.tier.index()]),
                });
            }
        }
        Ok(())
    }

    /// Make freshly written data durable (per policy), append `recs`, make them durable
    /// (per policy). On failure the new slots are freed and, if the append itself failed,
    /// the writer is poisoned.
    pub(crate) fn log_and_sync(
        &self,
        w: &mut Writer<M>,
        recs: &[MetaRecord],
        writes: u32,
        new_slots: &[(Tier, u64)],
    ) -> Result<()> {
        let undo = |io: &B| {
            for (t, off) in new_slots {
                let _ = io.free_block(*t, *off);
            }
        };
        if self.cfg.durability == Durability::EveryWrite && !new_slots.is_empty() {
            if let Err(e) = self.io.sync() {
                undo(&self.io);
                return Err(e);
            }
        }
        if let Err(e) = w.log.append(recs) {
            undo(&self.io);
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        w.unsynced = w.unsynced.saturating_add(writes);
        let sync_now = match self.cfg.durability {
            Durability::EveryWrite => true,
            Durability::EveryN(n) => w.unsynced >= n.max(1),
            Durability::Os => false,
        };
        if sync_now {
            if self.cfg.durability != Durability::EveryWrite {
                self.io.sync()?;
            }
            if let Err(e) = w.log.sync() {
                w.poisoned = Some(e.to_string());
                return Err(e);
            }
            w.unsynced = 0;
        }
        Ok(())
    }

    /// Hand freed slots back to the backend once the records freeing them are durable.
    pub(crate) fn release_frees(&self, w: &mut Writer<M>) -> Result<()> {
        if w.unsynced == 0 || self.cfg.durability == Durability::Os {
            for (t, off) in std::mem::take(&mut w.pending_free) {
                self.io.free_block(t, off)?;
            }
        }
        Ok(())
    }

    /// Delete one block. Returns whether it existed.
    ///
    /// # Errors
    /// [`StoreErr::Io`] from the log.
    pub fn delete_block(&self, key: &BlockKey) -> Result<bool> {
        self.delete_blocks(std::slice::from_ref(key))
            .map(|n| n == 1)
    }

    /// Delete several blocks with one log append; returns how many existed.
    ///
    /// # Errors
    /// [`StoreErr::Io`] from the log.
    pub fn delete_blocks(&self, keys: &[BlockKey]) -> Result<usize> {
        self.apply_pending_access()?;
        let mut w = self.lock_writer()?;
        let live: Vec<BlockKey> = {
            let idx = self.read_index()?;
            keys.iter()
                .filter(|k| idx.get(k).is_some())
                .copied()
                .collect()
        };
        if live.is_empty() {
            return Ok(0);
        }
        let recs: Vec<MetaRecord> = live.iter().map(|&key| MetaRecord::Delete { key }).collect();
        self.log_and_sync(&mut w, &recs, live.len() as u32, &[])?;
        {
            let mut idx = self.write_index()?;
            for k in &live {
                if let Some(old) = idx.remove(k) {
                    w.pending_free.push((old.tier, old.data_offset));
                }
            }
        }
        self.counters
            .deletes
            .fetch_add(live.len() as u64, Ordering::Relaxed);
        self.release_frees(&mut w)?;
        Ok(live.len())
    }

    /// Re-encode one block for `new_tier` (from its current payload, checksum verified),
    /// write it, log the move, free the old slot. Moving to a lower-precision tier loses
    /// precision for good: a later promotion re-encodes what is stored, it cannot restore
    /// what was rounded away.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`]; [`StoreErr::Corruption`] if the current payload is
    /// corrupt; [`StoreErr::CapacityExceeded`]; [`StoreErr::Io`].
    pub fn migrate_block(&self, key: &BlockKey, new_tier: Tier) -> Result<()> {
        if self.read_index()?.get(key).is_none() {
            return Err(StoreErr::NotFound {
                key: *key,
                tier: None,
            });
        }
        self.migrate_blocks(std::slice::from_ref(key), new_tier)
            .map(|_| ())
    }

    /// [`TensorStore::migrate_block`] for many blocks, batched: one data sync, one log
    /// append and one log sync per batch of up to 512 blocks. Keys that are not live or
    /// already in `new_tier` are skipped; returns how many blocks moved.
    ///
    /// # Errors
    /// As [`TensorStore::migrate_block`]; blocks of earlier batches stay moved.
    pub fn migrate_blocks(&self, keys: &[BlockKey], new_tier: Tier) -> Result<usize> {
        let mut moved = 0;
        for chunk in keys.chunks(MIGRATE_BATCH_BLOCKS) {
            moved += self.migrate_batch(chunk, new_tier)?;
        }
        Ok(moved)
    }

    fn migrate_batch(&self, keys: &[BlockKey], new_tier: Tier) -> Result<usize> {
        if self.cfg.max_blocks_per_tier[new_tier.index()] != usize::MAX {
            let incoming = {
                let idx = self.read_index()?;
                keys.iter()
                    .filter(|k| idx.get(k).is_some_and(|m| m.tier != new_tier))
                    .count()
            };
            let mut need = [0usize; 4];
            need[new_tier.index()] = incoming;
            self.make_room(need, keys)?;
        }
        let mut w = self.lock_writer()?;
        let metas: Vec<BlockMeta> = {
            let idx = self.read_index()?;
            keys.iter()
                .filter_map(|k| idx.get(k).copied())
                .filter(|m| m.tier != new_tier)
                .collect()
        };
        if metas.is_empty() {
            return Ok(0);
        }
        let limit = self.cfg.max_blocks_per_tier[new_tier.index()];
        let have = self.read_index()?.tier_count(new_tier);
        if have.saturating_add(metas.len()) > limit {
            return Err(StoreErr::CapacityExceeded {
                tier: new_tier,
                reason: format!("max_blocks_per_tier is {limit}"),
            });
        }
        // Decode each current payload (checksum verified) to element bytes of its dtype,
        // re-encode for the new tier and write it to a free slot.
        let mut elems = Vec::new();
        let mut moved: Vec<(BlockMeta, codec::Encoded, u64, u32)> = Vec::with_capacity(metas.len());
        let undo = |moved: &[(BlockMeta, codec::Encoded, u64, u32)]| {
            for (_, _, off, _) in moved {
                let _ = self.io.free_block(new_tier, *off);
            }
        };
        for meta in &metas {
            let step = (|| {
                self.read_elements(meta, &mut elems)?;
                let shape = meta.shape;
                let info = BlockInfo {
                    dtype: meta.dtype,
                    shape: &shape[..usize::from(meta.shape_ndim)],
                    lineage_parent: meta.lineage_parent,
                    reconstruct: meta.reconstruct,
                    kind: meta.kind,
                };
                let p = self.prepare(meta.key, new_tier, &info, &elems)?;
                let (off, len) = self.io.write_block(new_tier, meta.key, &p.enc.bytes)?;
                Ok::<_, StoreErr>((p.enc, off, len))
            })();
            match step {
                Ok((enc, off, len)) => moved.push((*meta, enc, off, len)),
                Err(e) => {
                    undo(&moved);
                    return Err(e);
                }
            }
        }
        let at = self.clock.now_ticks();
        let recs: Vec<MetaRecord> = moved
            .iter()
            .map(|(m, enc, off, len)| MetaRecord::Migrate {
                key: m.key,
                old_tier: m.tier,
                new_tier,
                new_bits: enc.bits,
                new_scale: enc.scale,
                new_checksum: crc32c(&enc.bytes),
                new_data_offset: *off,
                new_data_len: *len,
                at,
            })
            .collect();
        let new_slots: Vec<(Tier, u64)> = moved
            .iter()
            .map(|(_, _, off, _)| (new_tier, *off))
            .collect();
        self.log_and_sync(&mut w, &recs, moved.len() as u32, &new_slots)?;
        {
            let mut idx = self.write_index()?;
            for ((m, enc, off, len), rec) in moved.iter().zip(&recs) {
                let MetaRecord::Migrate { new_checksum, .. } = rec else {
                    continue;
                };
                idx.set_tier(&m.key, new_tier, |x| {
                    x.bits = enc.bits;
                    x.scale = enc.scale;
                    x.checksum = *new_checksum;
                    x.data_offset = *off;
                    x.data_len = *len;
                    x.tier_since = at;
                });
                w.pending_free.push((m.tier, m.data_offset));
            }
        }
        self.counters
            .migrations
            .fetch_add(moved.len() as u64, Ordering::Relaxed);
        for (m, ..) in &moved {
            self.counters.migrations_by_tier[m.tier.index()][new_tier.index()]
                .fetch_add(1, Ordering::Relaxed);
        }
        self.release_frees(&mut w)?;
        Ok(moved.len())
    }

    // ---------------------------------------------------------------- read path

    /// Read and verify the stored payload of `meta`, then call `f` with it.
    fn with_verified<R>(&self, meta: &BlockMeta, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let mut f = Some(f);
        let mut out: Option<Result<R>> = None;
        self.io.with_block(
            meta.tier,
            meta.key,
            meta.data_offset,
            meta.data_len,
            &mut |b| {
                let actual = crc32c(b);
                out = Some(if actual != meta.checksum {
                    Err(StoreErr::Corruption {
                        key: meta.key,
                        tier: meta.tier,
                        offset: meta.data_offset,
                        expected: meta.checksum,
                        actual,
                    })
                } else if let Some(f) = f.take() {
                    f(b)
                } else {
                    Err(StoreErr::InvalidArgument {
                        field: "block_io",
                        reason: "with_block called its callback twice".into(),
                    })
                });
            },
        )?;
        let r = out.unwrap_or_else(|| {
            Err(StoreErr::InvalidArgument {
                field: "block_io",
                reason: "with_block never called its callback".into(),
            })
        });
        if matches!(r, Err(StoreErr::Corruption { .. })) {
            self.counters
                .checksum_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(key = %meta.key, tier = %meta.tier, offset = meta.data_offset, "CHECKSUM_MISMATCH");
        }
        r
    }

    /// Decode a verified payload into little-endian element bytes of the block's dtype.
    fn decode_payload(&self, meta: &BlockMeta, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        if meta.tier.is_quantized() {
            let mut vals = Vec::new();
            codec::decode_quantized(payload, self.geo.block_elems as usize, &mut vals).map_err(
                |source| StoreErr::Decode {
                    key: meta.key,
                    tier: meta.tier,
                    source,
                },
            )?;
            codec::from_f32(meta.dtype, &vals, out);
        } else {
            if payload.len() % meta.dtype.size() != 0 {
                return Err(StoreErr::Decode {
                    key: meta.key,
                    tier: meta.tier,
                    source: tensorvault_quant::QuantError::LengthMismatch {
                        what: "raw block (not a whole number of elements)",
                        input: payload.len(),
                        output: payload.len() / meta.dtype.size() * meta.dtype.size(),
                    },
                });
            }
            out.extend_from_slice(payload);
        }
        Ok(())
    }

    /// Verified, decoded element bytes of a block, without access tracking.
    pub(crate) fn read_elements(&self, meta: &BlockMeta, out: &mut Vec<u8>) -> Result<()> {
        self.with_verified(meta, |b| self.decode_payload(meta, b, out))
    }

    /// Read one block: verify its CRC32C, decode it to little-endian elements of its
    /// dtype (dequantizing quantized tiers) into `out` (replaced), record the access.
    /// Returns the block's metadata as of the read. A `Delta` / `Factor` block whose
    /// checksum fails is rebuilt from its lineage and repaired in place (see
    /// `src/reconstruct.rs`); the metadata returned is then the repaired one.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`]; [`StoreErr::Corruption`] (checksum mismatch, and no
    /// usable lineage); [`StoreErr::LineageTooDeep`] / [`StoreErr::LineageCycle`];
    /// [`StoreErr::Decode`]; [`StoreErr::Io`].
    pub fn get_block(&self, key: &BlockKey, out: &mut Vec<u8>) -> Result<BlockMeta> {
        let (meta, read) = {
            let idx = self.read_index()?;
            let meta = *idx.get(key).ok_or(StoreErr::NotFound {
                key: *key,
                tier: None,
            })?;
            (meta, self.read_elements(&meta, out))
        };
        let meta = match read {
            Ok(()) => meta,
            // Rehydrate from the lineage and repair the slot (src/reconstruct.rs).
            Err(e @ StoreErr::Corruption { .. }) => self.heal_block(&meta, e, out)?,
            Err(e) => return Err(e),
        };
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_read
            .fetch_add(u64::from(meta.data_len), Ordering::Relaxed);
        self.note_access(key)?;
        Ok(meta)
    }

    /// Read one block's stored payload (the raw slot bytes, checksum verified) without
    /// decoding it; records the access.
    ///
    /// # Errors
    /// As [`TensorStore::get_block`].
    pub fn get_payload(&self, key: &BlockKey, out: &mut Vec<u8>) -> Result<BlockMeta> {
        let meta = {
            let idx = self.read_index()?;
            let meta = *idx.get(key).ok_or(StoreErr::NotFound {
                key: *key,
                tier: None,
            })?;
            self.with_verified(&meta, |b| {
                out.clear();
                out.extend_from_slice(b);
                Ok(())
            })?;
            meta
        };
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.note_access(key)?;
        Ok(meta)
    }

    /// Record one access. Readers never take the index write lock for this: the access
    /// is queued and applied in batches ([`TensorStore::apply_pending_access`]), so
    /// concurrent readers only share the index read lock. Every `access_flush_every`
    /// reads, the accumulated Access records are logged.
    fn note_access(&self, key: &BlockKey) -> Result<()> {
        let now = self.clock.now_ticks();
        let queued = {
            let mut q = self.pending_access.lock().map_err(poisoned)?;
            q.push((*key, now));
            q.len()
        };
        if queued >= PENDING_ACCESS_MAX {
            self.apply_pending_access()?;
        }
        let every = self.cfg.access_flush_every;
        if every > 0 && (self.reads_since_flush.fetch_add(1, Ordering::Relaxed) + 1) % every == 0 {
            match self.flush_access() {
                // A stopped writer cannot log statistics; the read itself succeeded.
                Err(StoreErr::WriterFailed { .. }) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Apply queued accesses to the index, in the order they happened (deterministic for
    /// a single reader). Called before anything reads access statistics.
    ///
    /// # Errors
    /// Only if a thread panicked while holding a store lock.
    pub(crate) fn apply_pending_access(&self) -> Result<()> {
        let batch = std::mem::take(&mut *self.pending_access.lock().map_err(poisoned)?);
        if batch.is_empty() {
            return Ok(());
        }
        let mut idx = self.write_index()?;
        for (key, now) in batch {
            if let Some(m) = idx.map.get_mut(&key) {
                m.record_access(now);
                idx.dirty.insert(key);
            }
        }
        Ok(())
    }

    /// Append Access records for every block read since its last one (sorted by key).
    ///
    /// # Errors
    /// [`StoreErr::Io`] from the log.
    pub fn flush_access(&self) -> Result<()> {
        self.apply_pending_access()?;
        let mut w = self.lock_writer()?;
        let recs = {
            let mut idx = self.write_index()?;
            let mut keys: Vec<BlockKey> = idx.dirty.drain().collect();
            keys.sort();
            keys.iter()
                .filter_map(|k| idx.get(k))
                .map(|m| MetaRecord::Access {
                    key: m.key,
                    last_access_at: m.last_access_at,
                    access_count: m.access_count,
                    ema_access_rate: m.ema_access_rate,
                    access_window: m.access_window,
                })
                .collect::<Vec<_>>()
        };
        if recs.is_empty() {
            return Ok(());
        }
        if let Err(e) = w.log.append(&recs) {
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }

    /// Log pending access statistics and make everything durable (data, log, names).
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn flush(&self) -> Result<()> {
        self.flush_access()?;
        let mut w = self.lock_writer()?;
        self.io.sync()?;
        w.log.sync()?;
        w.catalog.sync()?;
        self.lineage.sync()?;
        w.unsynced = 0;
        self.release_frees(&mut w)
    }

    /// Flush and close.
    ///
    /// # Errors
    /// As [`TensorStore::flush`].
    pub fn close(self) -> Result<()> {
        self.flush()
    }

    /// Rewrite the log as a snapshot of the live index (Create + Access per block, in key
    /// order) and drop names of tensors without blocks. Crash-safe: the log is replaced
    /// atomically.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; on error the old log is intact.
    pub fn compact(&self) -> Result<()> {
        self.apply_pending_access()?;
        let mut w = self.lock_writer()?;
        self.io.sync()?;
        let (snapshot, live_ids) = {
            let mut idx = self.write_index()?;
            idx.dirty.clear();
            let metas = idx.sorted();
            let ids: std::collections::HashSet<u128> =
                metas.iter().map(|m| m.key.tensor_id).collect();
            (metas, ids)
        };
        let mut it = snapshot.iter().flat_map(|m| {
            let create = MetaRecord::Create { meta: *m };
            let fresh =
                m.access_count == 0 && m.access_window == 1 && m.last_access_at == m.created_at;
            let access = (!fresh).then_some(MetaRecord::Access {
                key: m.key,
                last_access_at: m.last_access_at,
                access_count: m.access_count,
                ema_access_rate: m.ema_access_rate,
                access_window: m.access_window,
            });
            std::iter::once(create).chain(access)
        });
        w.log.compact(&mut it)?;
        w.catalog.compact(&|id| live_ids.contains(&id))?;
        w.unsynced = 0;
        self.release_frees(&mut w)?;
        self.compact_lineage()
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
