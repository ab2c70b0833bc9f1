//! Applying replayed records to the index, and the checks a record must pass to apply.

use std::collections::HashMap;

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::config::CollectionConfig;
use crate::meta_log::MetaRecord;
use crate::types::{BlockKey, BlockMeta, Tier};

use super::BlockIndex;

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

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownBlock => f.write_str("names a block that is not live"),
            Self::StaleMigrate => f.write_str("migrates the block from a tier it is not in"),
            Self::BadSlot(why) => write!(f, "impossible slot: {why}"),
            Self::BadShape(why) => write!(f, "impossible shape: {why}"),
        }
    }
}

impl BlockIndex {
    /// Resolve blocks that claim the same slot, which a consistent log never produces:
    /// it takes a lost record (a corrupt Delete, Migrate or replacing Create skipped by
    /// replay) to leave a block pointing at a slot that was freed and reused. Of each
    /// group, the first block (in key order) whose checksum matches the slot's bytes
    /// keeps it (the slot's real occupant); if none matches, the first block keeps it
    /// (so reads and `verify` report it as corrupt). The others are dropped with a
    /// warning. Returns the dropped blocks.
    pub(crate) fn drop_shared_slots(&mut self, io: &dyn BlockIO) -> Vec<BlockMeta> {
        let mut by_slot: HashMap<(Tier, u64), Vec<BlockKey>> = HashMap::new();
        for e in &self.entries {
            by_slot
                .entry((e.tier, e.data_offset))
                .or_default()
                .push(e.key());
        }
        let mut dropped = Vec::new();
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
                .find(|k| self.get(k).is_some_and(|m| matches(&m)))
                .unwrap_or(keys[0]);
            for k in keys.into_iter().filter(|k| *k != keep) {
                if let Some(m) = self.remove(&k) {
                    tracing::warn!(key = %k, tier = %m.tier, offset = m.data_offset, owner = %keep,
                        "block shares its slot with another (a metalog record was lost): dropped");
                    dropped.push(m);
                }
            }
        }
        dropped
    }

    /// Apply an Access or Migrate record to the block at arena index `i` (whose key is
    /// the record's); other records are ignored here.
    pub(super) fn apply_at(
        &mut self,
        i: usize,
        rec: &MetaRecord,
        geo: &CollectionConfig,
    ) -> Result<(), Ignored> {
        match *rec {
            MetaRecord::Access {
                last_access_at,
                access_count,
                ema_access_rate,
                access_window,
                ..
            } => {
                let s = &mut self.entries[i].stats;
                s.last_access_at = last_access_at;
                s.access_count = access_count;
                s.ema_access_rate = ema_access_rate;
                s.access_window = access_window;
            }
            MetaRecord::Migrate {
                old_tier,
                new_tier,
                new_bits,
                new_scale,
                new_checksum,
                new_data_offset,
                new_data_len,
                at,
                ..
            } => {
                let e = &mut self.entries[i];
                if e.tier != old_tier {
                    return Err(Ignored::StaleMigrate);
                }
                check_slot(geo, new_tier, new_data_offset, new_data_len)?;
                self.tier_counts[old_tier.index()] -= 1;
                self.tier_counts[new_tier.index()] += 1;
                e.tier = new_tier;
                e.bits = new_bits;
                e.scale = new_scale;
                e.checksum = new_checksum;
                e.data_offset = new_data_offset;
                e.data_len = new_data_len;
                e.tier_since = at;
            }
            MetaRecord::Create { .. } | MetaRecord::Delete { .. } => {}
        }
        Ok(())
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
            MetaRecord::Access { key, .. } | MetaRecord::Migrate { key, .. } => {
                let i = self.find(&key).ok_or(Ignored::UnknownBlock)?;
                self.apply_at(i, &rec, geo)?;
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
