//! The in-memory index (ADR-018 section 3.11): BlockKey -> BlockMeta, per-tier counts and
//! the set of blocks whose access statistics are not yet in the log. Rebuilt by replay.

use std::collections::{HashMap, HashSet};

/// The index's hasher: foldhash (seeded per process, ~4x faster than SipHash on a
/// 20-byte key; keys are blake3-derived, so flooding needs a blake3 preimage search).
pub(crate) type FastHash = foldhash::fast::RandomState;

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::config::CollectionConfig;
use crate::meta_log::MetaRecord;
use crate::types::{BlockKey, BlockMeta, Tier};

/// The index. Every field is derived from the MetaLog except `dirty` and `pinned`.
#[derive(Debug, Default, Clone)]
pub struct BlockIndex {
    pub(crate) map: HashMap<BlockKey, BlockMeta, FastHash>,
    tier_counts: [usize; 4],
    /// Blocks read since their last Access record.
    pub(crate) dirty: HashSet<BlockKey, FastHash>,
    /// Blocks the migration scheduler must leave where they are (not persisted; see
    /// `TensorStore::pin_block`).
    pub(crate) pinned: HashSet<BlockKey, FastHash>,
}

/// Why replay ignored a structurally valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    /// Access / Migrate / Delete for a block that is not live.
    UnknownBlock,
    /// Migrate whose old tier is not the block's tier.
    StaleMigrate,
    /// A slot offset or length that does not fit the collection geometry.
    BadSlot(String),
    /// A Create whose shape no tensor of this collection can have: more elements than
    /// 2^32 blocks hold.
    BadShape(String),
}

impl BlockIndex {
    /// Number of live blocks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the index is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Live blocks in `tier`.
    #[must_use]
    pub fn tier_count(&self, tier: Tier) -> usize {
        self.tier_counts[tier.index()]
    }

    /// Metadata of `key`.
    #[must_use]
    pub fn get(&self, key: &BlockKey) -> Option<&BlockMeta> {
        self.map.get(key)
    }

    /// Insert or replace; returns the replaced block's metadata.
    pub fn upsert(&mut self, meta: BlockMeta) -> Option<BlockMeta> {
        self.tier_counts[meta.tier.index()] += 1;
        let old = self.map.insert(meta.key, meta);
        if let Some(o) = &old {
            self.tier_counts[o.tier.index()] -= 1;
        }
        old
    }

    /// Remove `key`; returns its metadata.
    pub fn remove(&mut self, key: &BlockKey) -> Option<BlockMeta> {
        let old = self.map.remove(key)?;
        self.tier_counts[old.tier.index()] -= 1;
        self.dirty.remove(key);
        Some(old)
    }

    /// Move `key` to another slot in `new_tier`.
    pub fn set_tier(&mut self, key: &BlockKey, new_tier: Tier, f: impl FnOnce(&mut BlockMeta)) {
        if let Some(m) = self.map.get_mut(key) {
            self.tier_counts[m.tier.index()] -= 1;
            self.tier_counts[new_tier.index()] += 1;
            m.tier = new_tier;
            f(m);
        }
    }

    /// Every live block sorted by key.
    #[must_use]
    pub fn sorted(&self) -> Vec<BlockMeta> {
        let mut v: Vec<BlockMeta> = self.map.values().copied().collect();
        v.sort_by_key(|m| m.key);
        v
    }

    /// Resolve blocks that claim the same slot, which a consistent log never produces:
    /// it takes a lost record (a corrupt Delete, Migrate or replacing Create skipped by
    /// replay) to leave a block pointing at a slot that was freed and reused. Of each
    /// group, the first block (in key order) whose checksum matches the slot's bytes
    /// keeps it (the slot's real occupant); if none matches, the first block keeps it
    /// (so reads and `verify` report it as corrupt). The others are dropped with a
    /// warning. Returns how many were dropped.
    pub(crate) fn drop_shared_slots(&mut self, io: &dyn BlockIO) -> u64 {
        let mut by_slot: HashMap<(Tier, u64), Vec<BlockKey>> = HashMap::new();
        for m in self.map.values() {
            by_slot
                .entry((m.tier, m.data_offset))
                .or_default()
                .push(m.key);
        }
        let mut dropped = 0;
        for mut keys in by_slot.into_values().filter(|k| k.len() > 1) {
            keys.sort();
            let matches = |m: &BlockMeta| {
                let mut ok = false;
                let read = io.with_block(m.tier, m.key, m.data_offset, m.data_len, &mut |b| {
                    ok = crc32c(b) == m.checksum;
                });
                read.is_ok() && ok
            };
            let keep = keys
                .iter()
                .copied()
                .find(|k| self.map.get(k).is_some_and(matches))
                .unwrap_or(keys[0]);
            for k in keys.into_iter().filter(|k| *k != keep) {
                if let Some(m) = self.remove(&k) {
                    tracing::warn!(key = %k, tier = %m.tier, offset = m.data_offset, owner = %keep,
                        "block shares its slot with another (a metalog record was lost): dropped");
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// Apply one replayed record (a commit mark changes nothing).
    ///
    /// # Errors
    /// [`Ignored`] when the record does not apply; the caller logs and counts it.
    pub fn apply(&mut self, rec: MetaRecord, geo: &CollectionConfig) -> Result<(), Ignored> {
        match rec {
            MetaRecord::Create { meta } => {
                check_slot(geo, meta.tier, meta.data_offset, meta.data_len)?;
                if let Some(why) = shape_problem(geo, meta.shape()) {
                    return Err(Ignored::BadShape(why));
                }
                self.upsert(meta);
            }
            MetaRecord::Access {
                key,
                last_access_at,
                access_count,
                ema_access_rate,
                access_window,
            } => {
                let m = self.map.get_mut(&key).ok_or(Ignored::UnknownBlock)?;
                m.last_access_at = last_access_at;
                m.access_count = access_count;
                m.ema_access_rate = ema_access_rate;
                m.access_window = access_window;
            }
            MetaRecord::Migrate {
                key,
                old_tier,
                new_tier,
                new_bits,
                new_scale,
                new_checksum,
                new_data_offset,
                new_data_len,
                at,
            } => {
                let m = self.map.get(&key).ok_or(Ignored::UnknownBlock)?;
                if m.tier != old_tier {
                    return Err(Ignored::StaleMigrate);
                }
                check_slot(geo, new_tier, new_data_offset, new_data_len)?;
                self.set_tier(&key, new_tier, |m| {
                    m.bits = new_bits;
                    m.scale = new_scale;
                    m.checksum = new_checksum;
                    m.data_offset = new_data_offset;
                    m.data_len = new_data_len;
                    m.tier_since = at;
                });
            }
            // A commit mark (store/tail.rs) names no block.
            MetaRecord::Delete { key } if key == crate::meta_log::COMMIT_MARK_KEY => {}
            MetaRecord::Delete { key } => {
                self.remove(&key).ok_or(Ignored::UnknownBlock)?;
            }
        }
        Ok(())
    }
}

/// Why a block of a tensor of `shape` cannot exist in this collection, if it cannot: the
/// element count overflows u64, or the shape needs more than 2^32 blocks (block indexes are
/// u32). A record with a valid CRC may still carry any shape, so replay ignores such a
/// Create and the write path refuses one. (Readers still size nothing from a shape alone:
/// `get_tensor` checks that every block it needs is present first.)
pub(crate) fn shape_problem(geo: &CollectionConfig, shape: &[u32]) -> Option<String> {
    let Some(numel) = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
    else {
        return Some(format!("shape {shape:?} has more than 2^64 elements"));
    };
    let blocks = numel.div_ceil(u64::from(geo.block_elems.max(1)));
    if blocks > 1 << 32 {
        return Some(format!(
            "shape {shape:?} needs {blocks} blocks of {} elements (at most 2^32)",
            geo.block_elems
        ));
    }
    None
}

/// Check that `(offset, len)` is a whole slot start with a payload that fits.
pub(crate) fn check_slot(
    geo: &CollectionConfig,
    tier: Tier,
    offset: u64,
    len: u32,
) -> Result<(), Ignored> {
    let slot = u64::from(geo.slot_len(tier));
    if len == 0 || u64::from(len) > slot {
        return Err(Ignored::BadSlot(format!(
            "data_len {len} not in 1..={slot} for {tier}"
        )));
    }
    if offset % slot != 0 {
        return Err(Ignored::BadSlot(format!(
            "data_offset {offset} is not a multiple of {tier}'s slot length {slot}"
        )));
    }
    Ok(())
}
