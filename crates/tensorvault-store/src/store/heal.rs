//! Reconstruction policies (ADR-018 sections 3.6, 3.12, 3.17 and 8.4): what a put of a
//! `Delta` or `Factor` block keeps besides the block, and how a read heals a block whose
//! checksum fails.
//!
//! * **Put.** A `Delta` block's delta is `(values its tier returns) - (values its lineage
//!   parent's block with the same index returns)`; a `Factor` block keeps rank-`r`
//!   factors `U`, `V` of its values viewed as an `m x n` matrix. Both are computed before
//!   the block is written and appended to `delta.dat` / `factor.dat` right after its
//!   Create record is logged, tagged with the block's `created_at` and payload CRC and,
//!   for deltas, the parent's `created_at` and payload CRC.
//! * **Read.** On a checksum mismatch of a block with a policy, the block is rebuilt
//!   (parent + delta, or `U * V`), re-encoded for its tier, written back into its slot in
//!   place and the repair is logged as a Migrate record with `old_tier == new_tier`, the
//!   same slot and the new checksum (replay applies it like any move). The read returns
//!   the repaired block. A corrupt parent of a `Delta` block is healed first (and
//!   repaired too), up to [`crate::lineage::LineageConfig::max_chain_depth`] corrupt
//!   ancestors; a cycle is detected with a set of visited tensor ids.
//! * **Refusals.** An entry is used only if it belongs to this version of the block
//!   (its `created_at` matches, and its CRC matches the block's checksum, the checksum of
//!   the corrupt bytes (a repair that was written but not logged), or the block has moved
//!   tiers since it was created) and, for deltas, the parent is the version the delta was
//!   taken against (same `created_at`). Otherwise, or if the entry, the parent or the
//!   delta is missing or corrupt, the read fails with the original `Corruption`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use tensorvault_core::checksum::crc32c;

use super::{BlockInfo, Prepared, TensorStore};
use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::codec;
use crate::config::Durability;
use crate::error::{Result, StoreErr};
use crate::lineage::format::{EntryHeader, EntryKind, EntryTag};
use crate::lineage::{payload, LineageStore, SideKind};
use crate::meta_log::{MetaLog, MetaRecord};
use crate::types::{BlockKey, BlockMeta, ReconstructPolicy};

/// A lineage entry computed before its block is written.
pub(crate) struct PendingEntry {
    key: BlockKey,
    side: SideKind,
    kind: EntryKind,
    payload: Vec<u8>,
    block_crc: u32,
    parent: Option<(u64, u32)>,
}

/// Why a block could not be rebuilt.
enum HealErr {
    /// No usable lineage: the caller reports the original corruption.
    Unusable(String),
    /// A typed error to return as is (chain limits, I/O).
    Fatal(StoreErr),
}

impl From<StoreErr> for HealErr {
    fn from(e: StoreErr) -> Self {
        HealErr::Fatal(e)
    }
}

type Heal<T> = std::result::Result<T, HealErr>;

fn unusable<T>(why: impl Into<String>) -> Heal<T> {
    Err(HealErr::Unusable(why.into()))
}

fn side_of(policy: ReconstructPolicy) -> Option<SideKind> {
    match policy {
        ReconstructPolicy::None => None,
        ReconstructPolicy::Delta => Some(SideKind::Delta),
        ReconstructPolicy::Factor => Some(SideKind::Factor),
    }
}

/// Decode a payload of `meta` (already trusted) into element bytes of its dtype.
fn decode(meta: &BlockMeta, payload: &[u8], max_elems: usize, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    if meta.tier.is_quantized() {
        let mut vals = Vec::new();
        codec::decode_quantized(payload, max_elems, &mut vals).map_err(|source| {
            StoreErr::Decode {
                key: meta.key,
                tier: meta.tier,
                source,
            }
        })?;
        codec::from_f32(meta.dtype, &vals, out)?;
    } else {
        out.extend_from_slice(payload);
    }
    Ok(())
}

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// The lineage files (deltas and factors) of this collection.
    #[must_use]
    pub fn lineage(&self) -> &LineageStore {
        &self.lineage
    }

    /// Use `lineage` instead of the empty in-memory lineage files
    /// [`TensorStore::open`] starts with: for in-memory stores whose host persisted the
    /// files ([`LineageStore::from_bytes`], [`LineageStore::set_persist_hook`]).
    /// Directory stores open `delta.dat` / `factor.dat` themselves.
    #[must_use]
    pub fn with_lineage_store(mut self, lineage: LineageStore) -> Self {
        self.lineage = lineage;
        self
    }

    /// Blocks repaired from their lineage since open.
    #[must_use]
    pub fn repairs(&self) -> u64 {
        self.counters.repairs.load(Ordering::Relaxed)
    }

    /// Elements block `key.block_index` of a tensor shaped like `meta` holds.
    fn block_len(&self, meta: &BlockMeta) -> usize {
        let numel = meta
            .shape()
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(u64::from(d)))
            .unwrap_or(u64::MAX);
        let be = u64::from(self.geo.block_elems);
        let start = u64::from(meta.key.block_index).saturating_mul(be);
        numel.saturating_sub(start).min(be) as usize
    }

    /// The f32 values a read of a prepared block will return.
    fn prepared_values(&self, p: &Prepared) -> Result<Vec<f32>> {
        let mut vals = Vec::new();
        if p.tier.is_quantized() {
            codec::decode_quantized(&p.enc.bytes, self.geo.block_elems as usize, &mut vals)?;
            let mut bytes = Vec::new();
            codec::from_f32(p.dtype, &vals, &mut bytes)?;
            codec::to_f32(p.dtype, &bytes, &mut vals)?;
        } else {
            codec::to_f32(p.dtype, &p.enc.bytes, &mut vals)?;
        }
        Ok(vals)
    }

    /// Compute the lineage entries of a batch about to be written (before the writer
    /// lock: a corrupt parent is healed on the way).
    pub(crate) fn lineage_prepare(&self, batch: &[Prepared]) -> Result<Vec<PendingEntry>> {
        let mut out = Vec::new();
        for p in batch {
            let Some(side) = side_of(p.reconstruct) else {
                continue;
            };
            let values = self.prepared_values(p)?;
            let block_crc = crc32c(&p.enc.bytes);
            let (kind, payload, parent) = match side {
                SideKind::Delta => {
                    if p.lineage_parent == 0 {
                        return Err(StoreErr::InvalidArgument {
                            field: "lineage_parent",
                            reason: format!("Delta block {} has no lineage parent", p.key),
                        });
                    }
                    let pkey = BlockKey::new(p.lineage_parent, p.key.block_index);
                    let mut visited = HashSet::from([p.key.tensor_id]);
                    let (pmeta, pvals) = self
                        .read_values(&pkey, None, &mut visited, 0, &p.key)
                        .map_err(|e| match e {
                            HealErr::Fatal(e) => e,
                            HealErr::Unusable(reason) => StoreErr::InvalidArgument {
                                field: "lineage_parent",
                                reason,
                            },
                        })?;
                    if pvals.len() != values.len() {
                        return Err(StoreErr::InvalidArgument {
                            field: "lineage_parent",
                            reason: format!(
                                "parent block {pkey} holds {} elements, block {} holds {}",
                                pvals.len(),
                                p.key,
                                values.len()
                            ),
                        });
                    }
                    let delta: Vec<f32> = values.iter().zip(&pvals).map(|(v, b)| v - b).collect();
                    let (kind, payload) = payload::encode_delta(&delta);
                    (kind, payload, Some((pmeta.created_at, pmeta.checksum)))
                }
                SideKind::Factor => {
                    let last = p.shape[..usize::from(p.ndim)].last().copied();
                    let (m, n) = payload::factor_dims(values.len(), last);
                    let rank = self.lineage.config().factor_rank;
                    let (payload, _) = payload::factorize(&values, m, n, rank)?;
                    (EntryKind::Factor, payload, None)
                }
            };
            out.push(PendingEntry {
                key: p.key,
                side,
                kind,
                payload,
                block_crc,
                parent,
            });
        }
        Ok(out)
    }

    /// Append the entries of a batch whose Create records are logged (called with the
    /// writer lock held), then collect garbage if it exceeds half a file.
    pub(crate) fn lineage_commit(&self, pending: Vec<PendingEntry>, created_at: u64) -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let mut touched = [false; 2];
        for e in pending {
            let (parent_created_at, parent_crc) = e.parent.unwrap_or((0, 0));
            let tag = EntryTag {
                block_created_at: created_at,
                block_crc: e.block_crc,
                parent_created_at,
                parent_crc,
            };
            self.lineage
                .file(e.side)?
                .append(e.key, e.kind, tag, &e.payload)?;
            touched[e.side as usize - 1] = true;
        }
        for side in [SideKind::Delta, SideKind::Factor] {
            if !touched[side as usize - 1] {
                continue;
            }
            let needs_gc = {
                let f = self.lineage.file(side)?;
                f.garbage() > f.len() / 2
            };
            if needs_gc {
                self.rewrite_lineage(side)?;
            }
            if self.cfg.durability == Durability::EveryWrite {
                self.lineage.file(side)?.sync()?;
            }
        }
        Ok(())
    }

    /// Rewrite one lineage file with the entries of live blocks only.
    fn rewrite_lineage(&self, side: SideKind) -> Result<()> {
        let live: HashMap<BlockKey, u64> = self
            .read_index()?
            .iter()
            .filter(|m| side_of(m.reconstruct) == Some(side))
            .map(|m| (m.key, m.created_at))
            .collect();
        self.lineage
            .file(side)?
            .rewrite(&|k, tag| live.get(k) == Some(&tag.block_created_at))
    }

    /// Drop the lineage entries of deleted, replaced or policy-less blocks by rewriting
    /// both files (atomically). [`TensorStore::compact`] calls it.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the old files are intact on error.
    pub fn compact_lineage(&self) -> Result<()> {
        self.rewrite_lineage(SideKind::Delta)?;
        self.rewrite_lineage(SideKind::Factor)
    }

    /// Called by the read path on a checksum mismatch of `meta`: rebuild the block from
    /// its lineage, repair its slot, log the repair, and put its elements in `out`.
    /// Returns the repaired metadata, or `err` if the block has no usable lineage.
    pub(crate) fn heal_block(
        &self,
        meta: &BlockMeta,
        err: StoreErr,
        out: &mut Vec<u8>,
    ) -> Result<BlockMeta> {
        let StoreErr::Corruption { actual, .. } = err else {
            return Err(err);
        };
        if meta.reconstruct == ReconstructPolicy::None {
            return Err(err);
        }
        let mut visited = HashSet::from([meta.key.tensor_id]);
        match self.heal(meta, actual, &mut visited, 0) {
            Ok((fixed, bytes)) => {
                *out = bytes;
                Ok(fixed)
            }
            Err(HealErr::Unusable(why)) => {
                tracing::warn!(key = %meta.key, reason = %why, "corrupt block has no usable lineage");
                Err(err)
            }
            Err(HealErr::Fatal(e)) => Err(e),
        }
    }

    /// The values of `key` as a read returns them; a corrupt block with a policy is
    /// healed (one level deeper than `depth`). `parent_created_at`: the version expected.
    fn read_values(
        &self,
        key: &BlockKey,
        parent_created_at: Option<u64>,
        visited: &mut HashSet<u128>,
        depth: usize,
        child: &BlockKey,
    ) -> Heal<(BlockMeta, Vec<f32>)> {
        let mut buf = Vec::new();
        let (meta, read) = {
            let idx = self.read_index()?;
            let Some(meta) = idx.get(key) else {
                return unusable(format!("lineage parent block {key} does not exist"));
            };
            if parent_created_at.is_some_and(|t| t != meta.created_at) {
                return unusable(format!(
                    "lineage parent block {key} was replaced after the delta was taken"
                ));
            }
            (meta, self.read_elements(&meta, &mut buf))
        };
        match read {
            Ok(()) => {}
            Err(StoreErr::Corruption { actual, .. })
                if meta.reconstruct != ReconstructPolicy::None =>
            {
                if !visited.insert(key.tensor_id) {
                    return Err(HealErr::Fatal(StoreErr::LineageCycle {
                        key: *child,
                        tensor_id: key.tensor_id,
                    }));
                }
                let limit = self.lineage.config().max_chain_depth;
                if depth + 1 > limit {
                    return Err(HealErr::Fatal(StoreErr::LineageTooDeep {
                        key: *child,
                        limit,
                    }));
                }
                buf = self.heal(&meta, actual, visited, depth + 1)?.1;
            }
            Err(e @ StoreErr::Corruption { .. }) => {
                return unusable(format!("lineage parent is corrupt: {e}"));
            }
            Err(e) => return Err(HealErr::Fatal(e)),
        }
        let mut vals = Vec::new();
        codec::to_f32(meta.dtype, &buf, &mut vals)?;
        Ok((meta, vals))
    }

    /// The latest entry of `meta`'s block, if it belongs to this version of the block.
    fn entry_for(
        &self,
        side: SideKind,
        meta: &BlockMeta,
        actual: u32,
    ) -> Heal<(EntryHeader, Vec<u8>)> {
        let got = self.lineage.file(side)?.read_entry(&meta.key);
        let (h, payload) = match got {
            Ok(Some(x)) => x,
            Ok(None) => return unusable(format!("no {} entry", side.file_name())),
            Err(e) if e.is_corruption() => return unusable(e.to_string()),
            Err(e) => return Err(HealErr::Fatal(e)),
        };
        let t = h.tag;
        let same_version = t.block_created_at == meta.created_at
            && (t.block_crc == meta.checksum
                || t.block_crc == actual
                || meta.tier_since != meta.created_at);
        if !same_version {
            return unusable(format!(
                "the {} entry belongs to another version of the block",
                side.file_name()
            ));
        }
        Ok((h, payload))
    }

    /// Rebuild `meta`'s block and repair its slot; returns the repaired metadata and the
    /// block's elements.
    fn heal(
        &self,
        meta: &BlockMeta,
        actual: u32,
        visited: &mut HashSet<u128>,
        depth: usize,
    ) -> Heal<(BlockMeta, Vec<u8>)> {
        let started = crate::time::Stopwatch::start();
        let n = self.block_len(meta);
        let (side, header, entry, values) = match meta.reconstruct {
            ReconstructPolicy::None => return unusable("the block has no reconstruction policy"),
            ReconstructPolicy::Factor => {
                let (h, p) = self.entry_for(SideKind::Factor, meta, actual)?;
                let (values, _residual) =
                    payload::expand_factors(&p, n).map_err(HealErr::Unusable)?;
                (SideKind::Factor, h, p, values)
            }
            ReconstructPolicy::Delta => {
                if meta.lineage_parent == 0 {
                    return unusable("the block has no lineage parent");
                }
                let (h, p) = self.entry_for(SideKind::Delta, meta, actual)?;
                let pkey = BlockKey::new(meta.lineage_parent, meta.key.block_index);
                let (_, base) = self.read_values(
                    &pkey,
                    Some(h.tag.parent_created_at),
                    visited,
                    depth,
                    &meta.key,
                )?;
                if base.len() != n {
                    return unusable(format!(
                        "parent block holds {} elements, the block {n}",
                        base.len()
                    ));
                }
                let delta = payload::decode_delta(h.kind, &p, n).map_err(HealErr::Unusable)?;
                let values = base.iter().zip(&delta).map(|(b, d)| b + d).collect();
                (SideKind::Delta, h, p, values)
            }
        };
        let mut elems = Vec::new();
        codec::from_f32(meta.dtype, &values, &mut elems)?;
        let shape = meta.shape;
        let info = BlockInfo {
            dtype: meta.dtype,
            shape: &shape[..usize::from(meta.shape_ndim)],
            lineage_parent: meta.lineage_parent,
            reconstruct: meta.reconstruct,
            kind: meta.kind,
        };
        let p = self.prepare(meta.key, meta.tier, &info, &elems)?;
        let new_crc = crc32c(&p.enc.bytes);
        let fixed = BlockMeta {
            bits: p.enc.bits,
            scale: p.enc.scale,
            checksum: new_crc,
            data_len: p.enc.bytes.len() as u32,
            ..*meta
        };
        let mut out = Vec::new();
        decode(
            &fixed,
            &p.enc.bytes,
            self.geo.block_elems as usize,
            &mut out,
        )?;
        let mut w = self.lock_writer()?;
        let unchanged = self.read_index()?.get(&meta.key).is_some_and(|c| {
            (c.tier, c.data_offset, c.checksum, c.created_at)
                == (meta.tier, meta.data_offset, meta.checksum, meta.created_at)
        });
        if !unchanged {
            // Moved, replaced or repaired by another thread meanwhile: return what was
            // rebuilt and leave the slot alone.
            return Ok((*meta, out));
        }
        // Slot, then the re-tagged entry, then the record: a crash in between leaves an
        // entry whose CRC matches the old checksum or the slot's new bytes, both usable.
        self.io
            .rewrite_block(meta.tier, meta.data_offset, &p.enc.bytes)?;
        let every_write = self.cfg.durability == Durability::EveryWrite;
        if every_write {
            self.io.sync()?;
        }
        if header.tag.block_crc != new_crc {
            let mut f = self.lineage.file(side)?;
            let tag = EntryTag {
                block_crc: new_crc,
                ..header.tag
            };
            f.append(meta.key, header.kind, tag, &entry)?;
            if every_write {
                f.sync()?;
            }
        }
        let rec = MetaRecord::Migrate {
            key: meta.key,
            old_tier: meta.tier,
            new_tier: meta.tier,
            new_bits: fixed.bits,
            new_scale: fixed.scale,
            new_checksum: new_crc,
            new_data_offset: meta.data_offset,
            new_data_len: fixed.data_len,
            // A repair does not move the block: its tier age is kept.
            at: meta.tier_since,
        };
        self.log_and_sync(&mut w, &[rec], 1, &[])?;
        self.write_index()?.set_tier(&meta.key, meta.tier, |x| {
            x.bits = fixed.bits;
            x.scale = fixed.scale;
            x.checksum = new_crc;
            x.data_len = fixed.data_len;
        });
        drop(w);
        self.counters.repairs.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            key = %meta.key,
            tier = %meta.tier,
            offset = meta.data_offset,
            policy = ?meta.reconstruct,
            depth,
            micros = started.elapsed_nanos() / 1000,
            "BLOCK_REPAIRED from lineage"
        );
        Ok((fixed, out))
    }
}
