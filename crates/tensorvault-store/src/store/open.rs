//! Open: replay the MetaLog into the index, drop blocks whose slots never reached the
//! medium, rebuild the slot allocation and authenticate the name catalog.

use std::sync::atomic::AtomicU32;
use std::sync::{Mutex, RwLock};

use crate::block_io::BlockIO;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::config::StoreConfig;
use crate::error::{Result, StoreErr};
use crate::index::IndexBuilder;
use crate::meta_log::{MetaLog, MetaRecord};
use crate::tensor::{ReplayDefect, MAX_DEFECT_ENTRIES};
use crate::types::{BlockKey, BlockMeta, Tier};

use super::tail::TailUndo;
use super::{Counters, TensorStore, Writer};

/// Most index entries reserved up front at open (about 100 MiB); see `open`.
const MAX_INDEX_RESERVE: u64 = 1 << 20;
/// Tensor rows reserved at open: one per this many records (the table grows past it).
const BLOCKS_PER_TENSOR_GUESS: usize = 16;

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
        // Every Create is one record: reserving for the record count avoids rehashing the
        // table while it doubles. The count comes from the file's length, which a sparse or
        // damaged file can inflate at no cost, so the reservation is capped (past the cap
        // the table grows as records really arrive).
        let records = usize::try_from(log.record_count().min(MAX_INDEX_RESERVE)).unwrap_or(0);
        let mut builder = IndexBuilder::with_capacity(records, records / BLOCKS_PER_TENSOR_GUESS);
        let mut ignored = 0u64;
        let mut defects = Vec::new();
        let mut defects_total = 0u64;
        let mut tail = TailUndo::new(log.record_count());
        let replay = log.replay_at(cfg.recovery, &mut |at, rec| {
            if tail.take_mark(&rec) {
                return Ok(());
            }
            tail.before_apply(&rec, &mut builder);
            if let Err(why) = builder.apply(rec, &geo) {
                // A valid CRC proves the record undamaged, not usable: each one replay
                // drops is a defect `verify` reports (with where it is and why).
                tracing::warn!(key = %rec.key(), offset = ?at, reason = %why, "ignoring a valid metalog record replay cannot use");
                if defects.len() < MAX_DEFECT_ENTRIES {
                    defects.push(ReplayDefect {
                        log_offset: at,
                        record: record_kind(&rec),
                        key: rec.key(),
                        reason: why.to_string(),
                    });
                }
                defects_total += 1;
                ignored += 1;
            }
            Ok(())
        })?;
        let mut index = builder.finish();
        // The last commit's records may be durable without its data (the two are synced
        // together): such blocks go back to what they were before it (store/tail.rs).
        let unconfirmed = !tail.saw_mark();
        // Not after a point-in-time stop: records cut there may have reused the slots of
        // the tail's blocks, so a mismatch is damage to report, not an unfinished commit.
        if replay.stopped_at.is_none() {
            ignored += tail.roll_back(&mut index, &io).len() as u64;
        }
        // A block whose slot lies beyond its tier's end never reached the medium (only
        // possible after power loss under a relaxed durability policy, or a crafted log):
        // drop it rather than let the backend allocate up to a forged offset.
        // (One `usage` per tier, not per block: it stats the tier file.)
        let tier_bytes = Tier::ALL.map(|t| io.usage(t).bytes);
        let mut lost: Vec<BlockMeta> = index
            .iter_where(|tier, offset, len| {
                offset.saturating_add(u64::from(len)) > tier_bytes[tier.index()]
            })
            .collect();
        lost.sort_by_key(|m| m.key);
        let mut dropped_on_open: Vec<(BlockMeta, String)> = Vec::with_capacity(lost.len());
        for m in lost {
            tracing::warn!(key = %m.key, "block's slot lies beyond its tier file: dropped as lost");
            index.remove(&m.key);
            ignored += 1;
            let why = format!(
                "lost: its {}-byte slot lies beyond the end of the {} file (missing, emptied or truncated)",
                m.data_len, m.tier
            );
            dropped_on_open.push((m, why));
        }
        let first = io.reset_allocation(&mut index.slots());
        if let Err(e) = first {
            // Two blocks on one slot (only after a lost record): keep the slot's occupant.
            // The dropped block is one a lost (corrupt, skipped) record would have deleted
            // or moved: that record is the defect `verify` reports (as skipped), the
            // dropped block is its recovery, not another defect.
            let units = Tier::ALL.map(|t| u64::from(geo.alloc_unit(t)));
            let shared = index.drop_shared_slots(&io, units);
            if shared.is_empty() {
                return Err(e);
            }
            ignored += shared.len() as u64;
            if let StoreErr::ExtentOverlap { .. } = e {
                // Extents: an overlap may also come from a forged record, which no
                // skipped record accounts for, so each dropped block is reported with
                // the first overlap found (its data_offset and the extent it hits).
                for m in shared {
                    let why = format!("dropped at open: {e}");
                    dropped_on_open.push((m, why));
                }
            }
            io.reset_allocation(&mut index.slots())?;
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
                unconfirmed,
                poisoned: None,
            }),
            reads_since_flush: AtomicU32::new(0),
            pending_access: Mutex::new(Vec::new()),
            counters: Counters::default(),
            replay,
            replay_nanos: started.elapsed_nanos(),
            replay_ignored: ignored,
            replay_defects: defects,
            replay_defects_total: defects_total,
            dropped_on_open,
            _lock: None,
            lineage: crate::lineage::LineageStore::in_memory(),
        }
        .compacted_if_needed()
    }

    /// Install a directory store's parts after [`TensorStore::open`]: its lineage side
    /// files (replacing the in-memory placeholder), the collection's held `LOCK` file(s),
    /// and then `compact_ratio` (so compaction at open also cleans the side files).
    #[cfg(feature = "mmap")]
    pub(crate) fn attach_directory(
        mut self,
        lineage: crate::lineage::LineageStore,
        lock: crate::dir_lock::DirLock,
        compact_ratio: u32,
    ) -> Result<Self> {
        self.lineage = lineage;
        self._lock = Some(Box::new(lock));
        self.cfg.compact_ratio = compact_ratio;
        self.compact_if_over(compact_ratio)?;
        Ok(self)
    }

    /// Apply `compact_ratio` right after open.
    fn compacted_if_needed(self) -> Result<Self> {
        self.compact_if_over(self.cfg.compact_ratio)?;
        Ok(self)
    }
}

/// The kind of `rec`, as [`ReplayDefect::record`] names it.
fn record_kind(rec: &MetaRecord) -> &'static str {
    match rec {
        MetaRecord::Create { .. } => "create",
        MetaRecord::Access { .. } => "access",
        MetaRecord::Migrate { .. } => "migrate",
        MetaRecord::Delete { .. } => "delete",
    }
}
