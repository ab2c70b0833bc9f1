//! Building the index from a replayed log without a random hash-table access per record.
//!
//! A Create appends its block to the arena and defers the hash-table insert; pending
//! blocks are inserted in one pass when a record needs a lookup (a Delete, or an Access /
//! Migrate for another block than the last Create's) and at the end. A large pass inserts
//! in the order of the blocks' hash-table buckets (one counting-sort pass over the bucket
//! numbers' high bits), so the table is written front to back instead of at a random
//! bucket per record: on a 1M-block log that is a sequential sweep over a 10 MB table
//! where per-record inserts took a cache and TLB miss each (~0.7 us on the project's
//! machine). A log written by compaction (Create, then that block's Access) never needs a
//! lookup before the end.

use std::hash::BuildHasher;

use crate::config::CollectionConfig;
use crate::meta_log::MetaRecord;
use crate::types::{BlockKey, BlockMeta, Tier};

use super::tensors::TensorAttrs;
use super::{check_slot, shape_problem, BlockIndex, Entry, Ignored};

/// Pending blocks below this count are inserted in arena order (no partition pass).
const SORTED_INSERT_MIN: usize = 4096;
/// Partitions of the bucket range for a sorted insert (the high bits of the bucket number).
const PARTITION_BITS: u32 = 12;

/// Replays records into a [`BlockIndex`]: the same result as [`BlockIndex::apply`] on every
/// record, in less time. Call [`IndexBuilder::finish`] to get the index.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    idx: BlockIndex,
    /// Arena entries `..indexed` are in the hash table; the rest are pending.
    indexed: usize,
    /// Allocation unit and longest payload per tier, from the geometry of the first
    /// Create.
    slot_lens: Option<([u64; 4], [u64; 4])>,
}

impl IndexBuilder {
    /// A builder whose index has room for `blocks` blocks of about `tensors` tensors.
    #[must_use]
    pub fn with_capacity(blocks: usize, tensors: usize) -> Self {
        let mut idx = BlockIndex::default();
        idx.reserve(blocks, tensors);
        advise_huge_pages(&idx.entries);
        Self {
            idx,
            indexed: 0,
            slot_lens: None,
        }
    }

    /// Apply one replayed record, as [`BlockIndex::apply`] does (with the same geometry
    /// on every call: the builder keeps its slot lengths).
    ///
    /// # Errors
    /// [`Ignored`] when the record does not apply; the caller logs and counts it.
    pub fn apply(&mut self, rec: MetaRecord, geo: &CollectionConfig) -> Result<(), Ignored> {
        match rec {
            MetaRecord::Create { meta } => {
                let (units, caps) = *self.slot_lens.get_or_insert_with(|| {
                    (
                        Tier::ALL.map(|t| u64::from(geo.alloc_unit(t))),
                        Tier::ALL.map(|t| u64::from(geo.max_block_len(t))),
                    )
                });
                let (unit, cap) = (units[meta.tier.index()], caps[meta.tier.index()]);
                let len = u64::from(meta.data_len);
                if len == 0 || len > cap || unit == 0 || meta.data_offset % unit != 0 {
                    check_slot(geo, meta.tier, meta.data_offset, meta.data_len)?;
                }
                let attrs = TensorAttrs::of(&meta);
                // The shape of the tensor row used last was checked when it was made.
                let last = if self.idx.tensors.is_last(&attrs) {
                    self.idx.tensors.acquire_last()
                } else {
                    None
                };
                let tensor = match last {
                    Some(id) => id,
                    None => {
                        if let Some(why) = shape_problem(geo, meta.shape()) {
                            return Err(Ignored::BadShape(why));
                        }
                        self.idx.tensors.acquire(&attrs)
                    }
                };
                self.idx.tier_counts[meta.tier.index()] += 1;
                self.idx.entries.push(Entry::new(&meta, tensor));
                Ok(())
            }
            MetaRecord::Access { key, .. } | MetaRecord::Migrate { key, .. }
                if self.idx.entries.len() > self.indexed
                    && self.idx.entries.last().is_some_and(|e| e.is(&key)) =>
            {
                // The newest pending block is the key's live one: if an earlier Create of the
                // same key is pending too, the flush keeps this (later) one.
                let last = self.idx.entries.len() - 1;
                self.idx.apply_at(last, &rec, geo)
            }
            // A commit mark (store/tail.rs) names no block: nothing to look up.
            MetaRecord::Delete { key } if key == crate::meta_log::COMMIT_MARK_KEY => Ok(()),
            _ => {
                self.flush();
                let r = self.idx.apply(rec, geo);
                // Applied to a fully indexed index, which it leaves fully indexed (a Delete
                // shrinks the arena).
                self.indexed = self.idx.entries.len();
                r
            }
        }
    }

    /// Metadata of `key` as replayed so far (inserts the pending blocks first).
    pub fn get(&mut self, key: &BlockKey) -> Option<BlockMeta> {
        self.flush();
        self.idx.get(key)
    }

    /// The index, with every pending block inserted.
    #[must_use]
    pub fn finish(mut self) -> BlockIndex {
        self.flush();
        // The reservation follows the record count, which overshoots the live blocks of
        // a log of many updates: give the excess back.
        let idx = &mut self.idx;
        let live = idx.entries.len();
        if idx.entries.capacity() > live + live / 4 + 1024 {
            idx.entries.shrink_to_fit();
        }
        if idx.table.capacity() > 2 * live + 1024 {
            let (entries, hasher) = (&idx.entries, &idx.hasher);
            idx.table
                .shrink_to_fit(|&i| hasher.hash_one(entries[i as usize].key()));
        }
        self.idx
    }

    /// Insert every pending block into the hash table; a pending block whose key is
    /// already live (indexed, or pending earlier) replaces it.
    fn flush(&mut self) {
        let (start, end) = (self.indexed, self.idx.entries.len());
        if start == end {
            return;
        }
        let idx = &mut self.idx;
        {
            let (entries, hasher) = (&idx.entries, &idx.hasher);
            idx.table
                .reserve(end - start, |&i| hasher.hash_one(entries[i as usize].key()));
        }
        let hashes: Vec<(u64, u32)> = (start..end)
            .map(|i| {
                // Arena indexes fit u32 (see `upsert`).
                let i = u32::try_from(i).unwrap_or(u32::MAX);
                (idx.hasher.hash_one(idx.entries[i as usize].key()), i)
            })
            .collect();
        let order = if hashes.len() >= SORTED_INSERT_MIN {
            by_bucket(hashes, idx.table.capacity())
        } else {
            hashes
        };
        let mut dead: Vec<u32> = Vec::new();
        for (hash, i) in order {
            let (entries, hasher) = (&idx.entries, &idx.hasher);
            // The pending entry itself is read only on a control-byte match (a live key,
            // or 1 in 128 by chance): bucket order is not arena order.
            match idx.table.entry(
                hash,
                |&j| entries[j as usize].same_key(&entries[i as usize]),
                |&j| hasher.hash_one(entries[j as usize].key()),
            ) {
                hashbrown::hash_table::Entry::Occupied(o) => {
                    // A later Create of a live key: it replaces the live block in place.
                    let live = *o.get() as usize;
                    let new = idx.entries[i as usize];
                    let old = std::mem::replace(&mut idx.entries[live], new);
                    idx.tensors.release(old.tensor);
                    idx.tier_counts[old.tier.index()] -= 1;
                    dead.push(i);
                }
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(i);
                }
            }
        }
        // Drop the replaced pending copies, highest first, so the last entry moved into
        // each hole is always a live (indexed) one.
        dead.sort_unstable_by(|a, b| b.cmp(a));
        for i in dead {
            let i = i as usize;
            let last = idx.entries.len() - 1;
            if i != last {
                let moved = idx.entries[last].key();
                let h = idx.hasher.hash_one(moved);
                if let Some(b) = idx.table.find_mut(h, |&j| j as usize == last) {
                    // i < last < 2^32.
                    *b = u32::try_from(i).unwrap_or(u32::MAX);
                }
            }
            idx.entries.swap_remove(i);
        }
        self.indexed = idx.entries.len();
    }
}

/// Ask for transparent huge pages under the arena's reserved (untouched) memory: filling
/// a 1M-block arena (88 MB) otherwise takes ~21,000 page faults, the largest part of
/// building it. A hint: where the kernel does not do it, nothing changes.
#[cfg(all(target_os = "linux", feature = "mmap"))]
fn advise_huge_pages(entries: &Vec<Entry>) {
    const HUGE: usize = 2 << 20;
    let bytes = entries.capacity() * std::mem::size_of::<Entry>();
    if bytes < 4 * HUGE {
        return;
    }
    let start = entries.as_ptr() as usize;
    // The whole 2 MiB pages inside the allocation.
    let first = start.next_multiple_of(HUGE);
    let end = (start + bytes) / HUGE * HUGE;
    if end > first {
        // SAFETY: madvise only changes how the kernel backs pages of this process's own
        // allocation (the range lies inside the arena's reserved capacity); MADV_HUGEPAGE
        // never changes their contents, and an error leaves everything as it was.
        unsafe {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(all(target_os = "linux", feature = "mmap")))]
fn advise_huge_pages(_entries: &Vec<Entry>) {}

/// `hashes` reordered by the hash-table bucket each lands in (hashbrown starts probing at
/// `hash & (buckets - 1)`), by one stable counting-sort pass over the bucket number's top
/// [`PARTITION_BITS`] bits: each partition spans a few hundred buckets, which stay in
/// cache while its blocks go in. Stable, so blocks of one key keep their log order.
fn by_bucket(hashes: Vec<(u64, u32)>, capacity: usize) -> Vec<(u64, u32)> {
    // hashbrown keeps 7/8 of a power-of-two bucket count usable.
    let buckets = (capacity.saturating_mul(8) / 7).next_power_of_two().max(1);
    let bucket_bits = buckets.trailing_zeros();
    let shift = bucket_bits.saturating_sub(PARTITION_BITS);
    let parts = 1usize << bucket_bits.min(PARTITION_BITS);
    let mask = (buckets - 1) as u64;
    // Below `parts`, so the cast is lossless.
    let part = |h: u64| ((h & mask) >> shift) as usize;
    let mut starts = vec![0usize; parts + 1];
    for &(h, _) in &hashes {
        starts[part(h) + 1] += 1;
    }
    for p in 0..parts {
        starts[p + 1] += starts[p];
    }
    let mut out = vec![(0u64, 0u32); hashes.len()];
    for (h, i) in hashes {
        let p = part(h);
        out[starts[p]] = (h, i);
        starts[p] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DType, ReconstructPolicy, TensorKind, MAX_NDIM};

    fn meta(id: u128, block: u32, offset: u64, rows: u32) -> BlockMeta {
        let geo = CollectionConfig::default();
        let mut shape = [0; MAX_NDIM];
        shape[0] = rows;
        shape[1] = 1024;
        BlockMeta {
            key: BlockKey::new(id, block),
            shape,
            shape_ndim: 2,
            dtype: DType::F32,
            tier: Tier::Tier1,
            bits: 8,
            scale: 0.5,
            zero_point: 0,
            created_at: offset,
            last_access_at: offset,
            access_count: 0,
            ema_access_rate: 0.0,
            access_window: 1,
            checksum: u32::try_from(offset % 1000).unwrap_or(0),
            lineage_parent: 0,
            reconstruct: ReconstructPolicy::None,
            kind: TensorKind::Generic,
            tier_since: offset,
            data_offset: offset * u64::from(geo.slot_len(Tier::Tier1)),
            data_len: 100,
            centre: None,
        }
    }

    /// A log mixing every case: many distinct Creates (a sorted insert), replacing
    /// Creates of indexed and of pending keys, Access / Migrate right after their Create
    /// and for other blocks, Deletes, records for unknown blocks.
    fn log(n: u32) -> Vec<MetaRecord> {
        let geo = CollectionConfig::default();
        let slot3 = u64::from(geo.slot_len(Tier::Tier3));
        let mut v = Vec::new();
        let mut off = 0u64;
        for b in 0..n {
            let id = u128::from(b / 7) * 0x9e37_79b9_7f4a_7c15_f39c;
            v.push(MetaRecord::Create {
                meta: meta(id, b % 7, off, 70),
            });
            off += 1;
            match b % 11 {
                0 => v.push(MetaRecord::Access {
                    key: BlockKey::new(id, b % 7),
                    last_access_at: 9,
                    access_count: 3,
                    ema_access_rate: 0.25,
                    access_window: 0b101,
                }),
                1 => v.push(MetaRecord::Migrate {
                    key: BlockKey::new(id, b % 7),
                    old_tier: Tier::Tier1,
                    new_tier: Tier::Tier3,
                    new_bits: 3,
                    new_scale: 1.5,
                    new_checksum: 77,
                    new_data_offset: u64::from(b) * slot3,
                    new_data_len: 50,
                    at: 12,
                }),
                // A second Create of the same key (pending duplicate), other shape.
                2 => {
                    v.push(MetaRecord::Create {
                        meta: meta(id, b % 7, off, 71),
                    });
                    off += 1;
                }
                _ => {}
            }
        }
        // Replace and touch indexed blocks, delete some, and refer to unknown ones.
        for b in (0..n).step_by(5) {
            let id = u128::from(b / 7) * 0x9e37_79b9_7f4a_7c15_f39c;
            let key = BlockKey::new(id, b % 7);
            match b % 3 {
                0 => v.push(MetaRecord::Delete { key }),
                1 => {
                    v.push(MetaRecord::Create {
                        meta: meta(id, b % 7, off, 72),
                    });
                    off += 1;
                }
                _ => v.push(MetaRecord::Access {
                    key,
                    last_access_at: 40,
                    access_count: 8,
                    ema_access_rate: 0.5,
                    access_window: 3,
                }),
            }
        }
        v.push(MetaRecord::Delete {
            key: BlockKey::new(5, 5),
        });
        v
    }

    #[test]
    fn builder_gives_the_same_index_as_apply() {
        let geo = CollectionConfig::default();
        for n in [0, 1, 50, 3000, 20_000] {
            let recs = log(n);
            let mut want = BlockIndex::default();
            let mut b = IndexBuilder::with_capacity(recs.len() / 2, 4);
            for r in &recs {
                let w = want.apply(*r, &geo);
                let g = b.apply(*r, &geo);
                assert_eq!(w, g, "record {r:?}");
            }
            let got = b.finish();
            assert_eq!(got.len(), want.len(), "n {n}");
            assert_eq!(got.sorted(), want.sorted(), "n {n}");
            for t in Tier::ALL {
                assert_eq!(got.tier_count(t), want.tier_count(t));
            }
            assert_eq!(got.tensor_rows(), want.tensor_rows());
            for m in want.iter() {
                assert_eq!(got.get(&m.key), Some(m));
            }
        }
    }
}
