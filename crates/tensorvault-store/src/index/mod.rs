//! The in-memory index (ADR-018 section 3.11): BlockKey -> block metadata, per-tier
//! counts and the set of blocks whose access statistics are not yet in the log. Rebuilt
//! by replay.
//!
//! Layout (issue 15): the blocks live in a dense arena of compact 88-byte entries (the
//! key once, the slot, checksum, tier, bits, scale and access statistics); what a block
//! shares with its tensor (shape, dtype, lineage parent, reconstruction policy, kind) is
//! interned once per tensor in [`tensors::TensorTable`]; the hash table holds only `u32`
//! arena indexes (5 bytes a bucket with its control byte). A block's [`BlockMeta`] is
//! built on demand from its entry and its tensor row. At 1M blocks that is ~100 heap
//! bytes a block, where a `HashMap<BlockKey, BlockMeta>` took 405.

mod apply;
mod replay;
mod tensors;

pub use apply::Ignored;
pub(crate) use apply::{check_slot, shape_problem};
pub use replay::IndexBuilder;

use std::collections::HashSet;
use std::hash::BuildHasher;

use hashbrown::HashTable;

/// The index's hasher: foldhash (seeded per process, ~4x faster than SipHash on a
/// 20-byte key; keys are blake3-derived, so flooding needs a blake3 preimage search).
pub(crate) type FastHash = foldhash::fast::RandomState;

use crate::types::{AccessStats, BlockKey, BlockMeta, Tier};

use tensors::{TensorAttrs, TensorTable};

/// One block in the arena: everything of its [`BlockMeta`] that is not shared with its
/// tensor. The tensor id is kept as two `u64` halves so the entry is 8-byte aligned (a
/// `u128` would pad it to 96 bytes).
#[derive(Clone, Copy, Debug)]
struct Entry {
    tensor_id: [u64; 2],
    data_offset: u64,
    tier_since: u64,
    stats: AccessStats,
    block_index: u32,
    /// Row of the tensor table.
    tensor: u32,
    data_len: u32,
    checksum: u32,
    scale: f32,
    zero_point: i16,
    tier: Tier,
    bits: u8,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 88);

fn split(id: u128) -> [u64; 2] {
    // Truncations by design: the low and the high half.
    #[allow(clippy::cast_possible_truncation)]
    [id as u64, (id >> 64) as u64]
}

impl Entry {
    fn key(&self) -> BlockKey {
        BlockKey::new(
            u128::from(self.tensor_id[0]) | (u128::from(self.tensor_id[1]) << 64),
            self.block_index,
        )
    }

    fn is(&self, key: &BlockKey) -> bool {
        self.block_index == key.block_index && self.tensor_id == split(key.tensor_id)
    }

    fn same_key(&self, other: &Entry) -> bool {
        self.block_index == other.block_index && self.tensor_id == other.tensor_id
    }

    fn new(m: &BlockMeta, tensor: u32) -> Self {
        Self {
            tensor_id: split(m.key.tensor_id),
            data_offset: m.data_offset,
            tier_since: m.tier_since,
            stats: m.access_stats(),
            block_index: m.key.block_index,
            tensor,
            data_len: m.data_len,
            checksum: m.checksum,
            scale: m.scale,
            zero_point: m.zero_point,
            tier: m.tier,
            bits: m.bits,
        }
    }

    fn meta(&self, t: &TensorAttrs) -> BlockMeta {
        BlockMeta {
            key: self.key(),
            shape: t.shape,
            shape_ndim: t.shape_ndim,
            dtype: t.dtype,
            tier: self.tier,
            bits: self.bits,
            scale: self.scale,
            zero_point: self.zero_point,
            created_at: self.stats.created_at,
            last_access_at: self.stats.last_access_at,
            access_count: self.stats.access_count,
            ema_access_rate: self.stats.ema_access_rate,
            access_window: self.stats.access_window,
            checksum: self.checksum,
            lineage_parent: t.lineage_parent,
            reconstruct: t.reconstruct,
            kind: t.kind,
            tier_since: self.tier_since,
            data_offset: self.data_offset,
            data_len: self.data_len,
            centre: t.centre,
        }
    }
}

/// The index. Every field is derived from the MetaLog except `dirty`, `pinned` and `held`.
#[derive(Debug, Default, Clone)]
pub struct BlockIndex {
    /// Live blocks, densely packed (a removal moves the last entry into the hole).
    entries: Vec<Entry>,
    /// Arena indexes, hashed by the entry's key.
    table: HashTable<u32>,
    hasher: FastHash,
    tensors: TensorTable,
    tier_counts: [usize; 4],
    /// Blocks read since their last Access record.
    pub(crate) dirty: HashSet<BlockKey, FastHash>,
    /// Blocks the migration scheduler must leave where they are (not persisted; see
    /// `TensorStore::pin_block`).
    pub(crate) pinned: HashSet<BlockKey, FastHash>,
    /// Blocks a migration could not encode for a colder tier (`crate::finite`), with the
    /// checksum of the payload that failed: left out of planning until rewritten (not
    /// persisted).
    pub(crate) held: std::collections::HashMap<BlockKey, (u32, crate::finite::HeldBlock), FastHash>,
}

impl BlockIndex {
    /// Number of live blocks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Live blocks in `tier`.
    #[must_use]
    pub fn tier_count(&self, tier: Tier) -> usize {
        self.tier_counts[tier.index()]
    }

    /// Distinct tensor rows (tensors, unless blocks of one tensor disagree on its shape,
    /// dtype, lineage or kind).
    #[must_use]
    pub fn tensor_rows(&self) -> usize {
        self.tensors.len()
    }

    /// Reserve room for `blocks` more blocks of about `tensors` more tensors.
    pub fn reserve(&mut self, blocks: usize, tensors: usize) {
        self.entries.reserve(blocks);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.table
            .reserve(blocks, |&i| hasher.hash_one(entries[i as usize].key()));
        self.tensors.reserve(tensors);
    }

    fn hash(&self, key: &BlockKey) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Arena index of `key`.
    pub(super) fn find(&self, key: &BlockKey) -> Option<usize> {
        let entries = &self.entries;
        self.table
            .find(self.hash(key), |&i| entries[i as usize].is(key))
            .map(|&i| i as usize)
    }

    /// Metadata of `key` (built from its compact entry and its tensor's row).
    #[must_use]
    pub fn get(&self, key: &BlockKey) -> Option<BlockMeta> {
        self.find(key).map(|i| self.meta_at(i))
    }

    /// Whether `key` is live.
    #[must_use]
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.find(key).is_some()
    }

    fn meta_at(&self, i: usize) -> BlockMeta {
        let e = &self.entries[i];
        e.meta(self.tensors.get(e.tensor))
    }

    /// Every live block's metadata, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = BlockMeta> + '_ {
        self.entries
            .iter()
            .map(|e| e.meta(self.tensors.get(e.tensor)))
    }

    /// The metadata of every live block whose `(tier, slot offset, payload length)`
    /// satisfies `keep`, in no particular order (only those are built).
    pub fn iter_where<'a>(
        &'a self,
        mut keep: impl FnMut(Tier, u64, u32) -> bool + 'a,
    ) -> impl Iterator<Item = BlockMeta> + 'a {
        self.entries
            .iter()
            .filter(move |e| keep(e.tier, e.data_offset, e.data_len))
            .map(|e| e.meta(self.tensors.get(e.tensor)))
    }

    /// Every live block's `(tier, data_offset, data_len)`, in no particular order (without
    /// building its metadata).
    pub fn slots(&self) -> impl Iterator<Item = (Tier, u64, u32)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.tier, e.data_offset, e.data_len))
    }

    /// Every live block's `(key, tier, payload length)`, in no particular order.
    pub fn placements(&self) -> impl Iterator<Item = (BlockKey, Tier, u32)> + '_ {
        self.entries.iter().map(|e| (e.key(), e.tier, e.data_len))
    }

    /// Every live block's `(migration score at now, key, tier, tier_since)`, in no
    /// particular order (without building its metadata).
    pub fn scores(&self, now: u64) -> impl Iterator<Item = (f32, BlockKey, Tier, u64)> + '_ {
        self.entries
            .iter()
            .map(move |e| (e.stats.migration_score(now), e.key(), e.tier, e.tier_since))
    }

    /// Record one access of `key` at `now` and mark it dirty; false if it is not live.
    pub fn record_access(&mut self, key: &BlockKey, now: u64) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        self.entries[i].stats.record_access(now);
        self.dirty.insert(*key);
        true
    }

    /// Insert or replace; returns the replaced block's metadata.
    pub fn upsert(&mut self, meta: BlockMeta) -> Option<BlockMeta> {
        let tensor = self.tensors.acquire(&TensorAttrs::of(&meta));
        let entry = Entry::new(&meta, tensor);
        self.tier_counts[meta.tier.index()] += 1;
        let hash = self.hash(&meta.key);
        let (entries, hasher) = (&mut self.entries, &self.hasher);
        match self
            .table
            .find(hash, |&i| entries[i as usize].is(&meta.key))
            .copied()
        {
            Some(i) => {
                let old_entry = std::mem::replace(&mut entries[i as usize], entry);
                let old = old_entry.meta(self.tensors.get(old_entry.tensor));
                self.tensors.release(old_entry.tensor);
                self.tier_counts[old.tier.index()] -= 1;
                Some(old)
            }
            None => {
                // The arena is addressed by u32; 2^32 blocks is far past any memory.
                let i = u32::try_from(entries.len()).unwrap_or(u32::MAX);
                entries.push(entry);
                let entries = &*entries;
                self.table
                    .insert_unique(hash, i, |&j| hasher.hash_one(entries[j as usize].key()));
                None
            }
        }
    }

    /// Remove `key`; returns its metadata.
    pub fn remove(&mut self, key: &BlockKey) -> Option<BlockMeta> {
        let hash = self.hash(key);
        let entries = &self.entries;
        let slot = self
            .table
            .find_entry(hash, |&i| entries[i as usize].is(key))
            .ok()?;
        let (i, _) = slot.remove();
        let i = i as usize;
        let last = self.entries.len() - 1;
        if i != last {
            // The last entry moves into the hole: repoint its bucket.
            let moved = self.entries[last].key();
            let h = self.hash(&moved);
            if let Some(b) = self.table.find_mut(h, |&j| j as usize == last) {
                // i < last < 2^32.
                *b = u32::try_from(i).unwrap_or(u32::MAX);
            }
        }
        let e = self.entries.swap_remove(i);
        let old = e.meta(self.tensors.get(e.tensor));
        self.tensors.release(e.tensor);
        self.tier_counts[e.tier.index()] -= 1;
        self.dirty.remove(key);
        Some(old)
    }

    /// Move `key` to another slot in `new_tier`: `f` updates the rest of its metadata.
    pub fn set_tier(&mut self, key: &BlockKey, new_tier: Tier, f: impl FnOnce(&mut BlockMeta)) {
        let Some(i) = self.find(key) else {
            return;
        };
        let mut m = self.meta_at(i);
        m.tier = new_tier;
        f(&mut m);
        m.key = *key;
        let e = self.entries[i];
        let tensor = if TensorAttrs::of(&m) == *self.tensors.get(e.tensor) {
            e.tensor
        } else {
            let t = self.tensors.acquire(&TensorAttrs::of(&m));
            self.tensors.release(e.tensor);
            t
        };
        self.tier_counts[e.tier.index()] -= 1;
        self.tier_counts[m.tier.index()] += 1;
        self.entries[i] = Entry::new(&m, tensor);
    }

    /// Every live block sorted by key.
    #[must_use]
    pub fn sorted(&self) -> Vec<BlockMeta> {
        let mut order: Vec<(BlockKey, u32)> = self
            .entries
            .iter()
            .zip(0u32..)
            .map(|(e, i)| (e.key(), i))
            .collect();
        order.sort_unstable_by_key(|&(k, _)| k);
        order
            .into_iter()
            .map(|(_, i)| self.meta_at(i as usize))
            .collect()
    }
}
