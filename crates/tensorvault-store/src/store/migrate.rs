//! Migration between tiers: re-encode from the verified current payload, write, log the
//! move, free the old slot once the move is durable.

use std::sync::atomic::Ordering;

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::codec;
use crate::error::{Result, StoreErr};
use crate::finite::HeldBlock;
use crate::index::BlockIndex;
use crate::meta_log::{MetaLog, MetaRecord};
use crate::types::{BlockKey, BlockMeta, Tier};

use super::{BlockInfo, TensorStore};

/// Blocks re-encoded and moved per batch by [`TensorStore::migrate_blocks`].
const MIGRATE_BATCH_BLOCKS: usize = 512;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Re-encode one block for `new_tier` (from its current payload, checksum verified),
    /// write it, log the move, free the old slot. Moving to a lower-precision tier loses
    /// precision for good: a later promotion re-encodes what is stored, it cannot restore
    /// what was rounded away.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`]; [`StoreErr::Corruption`] if the current payload is
    /// corrupt; [`StoreErr::NonFiniteBlock`] if it holds NaN or infinity and `new_tier`
    /// quantizes; [`StoreErr::CapacityExceeded`]; [`StoreErr::Io`].
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
            moved += self.migrate_batch(chunk, new_tier, None)?;
        }
        Ok(moved)
    }

    /// [`TensorStore::migrate_blocks`] for tiering: a block whose values cannot be encoded
    /// for `new_tier` (NaN or infinity, [`StoreErr::NonFiniteBlock`], or another codec
    /// refusal) is *held* instead of failing the batch: it stays where it is, the other
    /// blocks move, and it is remembered so later steps leave it alone until it is
    /// rewritten (`crate::finite`). Blocks held already are skipped without being read.
    /// Returns the blocks moved and the blocks newly held.
    ///
    /// # Errors
    /// As [`TensorStore::migrate_blocks`], except encode refusals.
    pub fn migrate_blocks_or_hold(
        &self,
        keys: &[BlockKey],
        new_tier: Tier,
    ) -> Result<(usize, Vec<HeldBlock>)> {
        let mut moved = 0;
        let mut held = Vec::new();
        for chunk in keys.chunks(MIGRATE_BATCH_BLOCKS) {
            moved += self.migrate_batch(chunk, new_tier, Some(&mut held))?;
        }
        Ok((moved, held))
    }

    /// Whether a migration of `key` to `new_tier` would hold the block (see
    /// [`TensorStore::migrate_blocks_or_hold`]), found by reading and encoding it without
    /// writing anything and without counting an access: what a dry run of `maintain`
    /// uses to say which planned moves would not happen. `None` for a block that would
    /// move (or is not live, or is in `new_tier` already).
    ///
    /// # Errors
    /// The read errors of the block ([`StoreErr::Corruption`], [`StoreErr::Io`], ...).
    pub fn would_hold(&self, key: &BlockKey, new_tier: Tier) -> Result<Option<HeldBlock>> {
        let mut elems = Vec::new();
        let meta = {
            // Hold the index lock so the slot cannot be freed and reused under the read.
            let idx = self.read_index()?;
            let meta = match idx.get(key) {
                Some(m) if m.tier != new_tier && !self.is_side_key(&m.key) => m,
                _ => return Ok(None),
            };
            let centre = if meta.centre.is_some() {
                Some(self.load_centre(&idx, &meta)?)
            } else {
                None
            };
            self.read_elements_centred(&meta, &mut elems, centre.as_ref())?;
            (meta, centre)
        };
        let (meta, centre) = meta;
        let shape = meta.shape;
        let info = BlockInfo {
            dtype: meta.dtype,
            shape: &shape[..usize::from(meta.shape_ndim)],
            lineage_parent: meta.lineage_parent,
            reconstruct: meta.reconstruct,
            kind: meta.kind,
        };
        Ok(
            match self.prepare_centred(meta.key, new_tier, &info, &elems, centre.as_ref()) {
                Ok(_) => None,
                Err(e) => match HeldBlock::from_err(meta.key, meta.tier, new_tier, &e) {
                    Some(h) => Some(h),
                    None => return Err(e),
                },
            },
        )
    }

    fn migrate_batch(
        &self,
        keys: &[BlockKey],
        new_tier: Tier,
        mut held: Option<&mut Vec<HeldBlock>>,
    ) -> Result<usize> {
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
                .filter_map(|k| idx.get(k))
                .filter(|m| m.tier != new_tier)
                // A side record (a centred tensor's mean row) stays raw at Tier0.
                .filter(|m| !self.is_side_key(&m.key))
                .filter(|m| held.is_none() || !is_held(&idx, m))
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
                // A centred block is decoded with its mean and re-centred with the same
                // one: its fingerprint stays valid.
                let centre = match meta.centre {
                    Some(_) => Some(self.load_centre(&*self.read_index()?, meta)?),
                    None => None,
                };
                self.read_elements_centred(meta, &mut elems, centre.as_ref())?;
                let shape = meta.shape;
                let info = BlockInfo {
                    dtype: meta.dtype,
                    shape: &shape[..usize::from(meta.shape_ndim)],
                    lineage_parent: meta.lineage_parent,
                    reconstruct: meta.reconstruct,
                    kind: meta.kind,
                };
                let p = self.prepare_centred(meta.key, new_tier, &info, &elems, centre.as_ref())?;
                let (off, len) = self.io.write_block(new_tier, meta.key, &p.enc.bytes)?;
                Ok::<_, StoreErr>((p.enc, off, len))
            })();
            match step {
                Ok((enc, off, len)) => moved.push((*meta, enc, off, len)),
                Err(e) => {
                    let hold = held
                        .as_deref_mut()
                        .zip(HeldBlock::from_err(meta.key, meta.tier, new_tier, &e));
                    if let Some((list, h)) = hold {
                        tracing::warn!(block = %meta.key, reason = %h.reason, "held in {}", meta.tier);
                        self.write_index()?
                            .held
                            .insert(meta.key, (meta.checksum, h.clone()));
                        list.push(h);
                        continue;
                    }
                    undo(&moved);
                    return Err(e);
                }
            }
        }
        if moved.is_empty() {
            return Ok(0);
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
}

/// Whether `m` is held (`crate::finite`) with the payload it has now.
pub(crate) fn is_held(idx: &BlockIndex, m: &BlockMeta) -> bool {
    idx.held
        .get(&m.key)
        .is_some_and(|(crc, _)| *crc == m.checksum)
}
