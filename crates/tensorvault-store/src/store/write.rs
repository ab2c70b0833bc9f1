//! The write path: encode, write data slots, make them durable, log, publish to the
//! index; deletion; the durability policy and deferred slot frees.

use std::sync::atomic::Ordering;

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::centre::{Centre, CENTRE_BLOCK_INDEX};
use crate::clock::Clock;
use crate::codec;
use crate::config::Durability;
use crate::error::{Result, StoreErr};
use crate::meta_log::{MetaLog, MetaRecord};
use crate::types::{BlockKey, BlockMeta, TensorKind, Tier, MAX_NDIM, STORE_DTYPES};

use super::tail::COMMIT_MARK;
use super::{BlockInfo, Prepared, TensorStore, Writer};

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Encode `data` (little-endian elements of `info.dtype`, at most `block_elems` of
    /// them) for `tier`.
    pub(crate) fn prepare(
        &self,
        key: BlockKey,
        tier: Tier,
        info: &BlockInfo<'_>,
        data: &[u8],
    ) -> Result<Prepared> {
        self.prepare_centred(key, tier, info, data, None)
    }

    /// [`TensorStore::prepare`] of a block of a centred tensor: at a quantized tier the
    /// values less `centre`'s mean row are coded, with row gains against the original
    /// values; Tier0 keeps the values as given. The block records the mean's fingerprint.
    pub(crate) fn prepare_centred(
        &self,
        key: BlockKey,
        tier: Tier,
        info: &BlockInfo<'_>,
        data: &[u8],
        centre: Option<&Centre>,
    ) -> Result<Prepared> {
        if key == COMMIT_MARK {
            return Err(StoreErr::InvalidArgument {
                field: "key",
                reason: format!("{key} is reserved (the log's commit mark)"),
            });
        }
        if self.geo.centre && key.block_index == CENTRE_BLOCK_INDEX {
            return Err(StoreErr::InvalidArgument {
                field: "key",
                reason: format!(
                    "{key}: block index {CENTRE_BLOCK_INDEX} is reserved for the side record of centred tensors"
                ),
            });
        }
        if !STORE_DTYPES.contains(&info.dtype) {
            return Err(StoreErr::UnsupportedDType { dtype: info.dtype });
        }
        let size = info.dtype.size();
        if data.is_empty() || !data.len().is_multiple_of(size) {
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
                if let Some(bad) = crate::finite::scan_f32(&vals) {
                    return Err(StoreErr::NonFiniteBlock {
                        key,
                        tier,
                        count: bad.count,
                        first: u64::from(key.block_index) * u64::from(self.geo.block_elems)
                            + bad.first,
                    });
                }
                let place = codec::BlockPlace {
                    kind: info.kind,
                    shape: info.shape,
                    block_index: key.block_index,
                    len: vals.len(),
                };
                match centre {
                    Some(c) => {
                        let reference = vals.clone();
                        let start = u64::from(key.block_index) * u64::from(self.geo.block_elems);
                        c.subtract(&mut vals, start);
                        codec::encode_for_tier_against(&self.geo, tier, &place, &vals, &reference)?
                    }
                    None => codec::encode_for_tier(&self.geo, tier, &place, &vals)?,
                }
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
            centre: centre.map(|c| c.fp),
        })
    }

    /// Write one block (replacing any block with the same key). `data` holds the
    /// block's elements as little-endian `info.dtype` values (at most `block_elems`);
    /// quantized tiers convert them to f32 and quantize.
    ///
    /// Returns once the block is as durable as the durability policy promises.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for bad data/shape/dtype; [`StoreErr::NonFiniteBlock`]
    /// for NaN or infinite values in a quantized tier (Tier0 keeps them bit-exact);
    /// [`StoreErr::Quant`] if the codec refuses the values otherwise; [`StoreErr::CapacityExceeded`];
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
                    if idx.get(&p.key).is_none_or(|m| m.tier != p.tier) {
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
                centre: p.centre,
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

    /// Append `recs` (whose data slots `new_slots` are written) and make data and records
    /// durable per the policy: under `EveryWrite` (and `EveryN` when due) the data files
    /// and the log are synced together, one wait instead of two in a row. A power cut
    /// during that wait may keep the records without the data; replay rolls such a last
    /// commit back (`store/tail.rs`), and nothing was acknowledged. On an append failure
    /// the new slots are freed; any failure poisons the writer (the log may end in a torn
    /// or unsynced record).
    pub(crate) fn log_and_sync(
        &self,
        w: &mut Writer<M>,
        recs: &[MetaRecord],
        writes: u32,
        new_slots: &[(Tier, u64)],
    ) -> Result<()> {
        if let Err(e) = w.log.append(recs) {
            for (t, off) in new_slots {
                let _ = self.io.free_block(*t, *off);
            }
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        w.unsynced = w.unsynced.saturating_add(writes);
        w.unconfirmed = true;
        let sync_now = match self.cfg.durability {
            Durability::EveryWrite => true,
            Durability::EveryN(n) => w.unsynced >= n.max(1),
            Durability::Os => false,
        };
        if sync_now {
            let data = !new_slots.is_empty() || self.cfg.durability != Durability::EveryWrite;
            if let Err(e) = sync_together(&self.io, &mut w.log, data) {
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
}

/// fdatasync the data files (if `data`) and the log, concurrently where threads exist:
/// the caller waits once, for the slower of the two.
fn sync_together<B: BlockIO, M: MetaLog>(io: &B, log: &mut M, data: bool) -> Result<()> {
    if !data {
        return log.sync();
    }
    #[cfg(feature = "threads")]
    {
        std::thread::scope(|s| {
            let data = s.spawn(|| io.sync());
            let logged = log.sync();
            let data = data.join().unwrap_or(Err(StoreErr::Poisoned {
                lock: "data sync thread",
            }));
            data.and(logged)
        })
    }
    #[cfg(not(feature = "threads"))]
    {
        io.sync()?;
        log.sync()
    }
}
