//! Applying replayed records to the index, and the checks a record must pass to apply.

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
    /// Extent allocation: a `data_len` outside `1..=limit` (the tier's cap) or a
    /// `data_offset` that is not a multiple of `limit` (the collection's `slot_align`).
    BadExtent {
        /// The tier the record names.
        tier: Tier,
        /// `data_offset` or `data_len`.
        field: &'static str,
        /// The record's value.
        value: u64,
        /// The cap (`data_len`) or the alignment (`data_offset`).
        limit: u64,
    },
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
            Self::BadExtent {
                tier,
                field,
                value,
                limit,
            } => match *field {
                "data_len" => write!(
                    f,
                    "impossible extent: data_len {value} not in 1..={limit} for {tier}"
                ),
                _ => write!(
                    f,
                    "impossible extent: {field} {value} in {tier} is not a multiple of {limit}"
                ),
            },
            Self::BadShape(why) => write!(f, "impossible shape: {why}"),
        }
    }
}

impl BlockIndex {
    /// Resolve blocks that claim the same slot, or (extent allocation) overlapping bytes,
    /// which a consistent log never produces: it takes a lost record (a corrupt Delete,
    /// Migrate or replacing Create skipped by replay) or a forged one to leave a block
    /// pointing at bytes that were freed and reused. Within each group of overlapping
    /// blocks, those whose checksum matches their bytes come first (then key order), and
    /// each keeps its place unless it overlaps one kept before it; if none matches, the
    /// first block in key order keeps its place (so reads and `verify` report it as
    /// corrupt). The others are dropped with a warning. `units` is each tier's allocation
    /// unit (a block spans `roundup(data_len, unit)` bytes). Returns the dropped blocks.
    pub(crate) fn drop_shared_slots(
        &mut self,
        io: &dyn BlockIO,
        units: [u64; 4],
    ) -> Vec<BlockMeta> {
        // (tier, start, end, key) sorted by tier and start: a sweep finds the groups.
        let mut spans: Vec<(Tier, u64, u64, BlockKey)> = self
            .entries
            .iter()
            .map(|e| {
                let unit = units[e.tier.index()].max(1);
                let len = u64::from(e.data_len).max(1).div_ceil(unit) * unit;
                (
                    e.tier,
                    e.data_offset,
                    e.data_offset.saturating_add(len),
                    e.key(),
                )
            })
            .collect();
        spans.sort_unstable_by_key(|s| (s.0.index(), s.1, s.3));
        let mut groups: Vec<Vec<(u64, u64, BlockKey)>> = Vec::new();
        let mut cur: Vec<(u64, u64, BlockKey)> = Vec::new();
        let mut cur_tier = None;
        let mut cur_end = 0;
        for (tier, start, end, key) in spans {
            if cur_tier != Some(tier) || start >= cur_end {
                if cur.len() > 1 {
                    groups.push(std::mem::take(&mut cur));
                }
                cur.clear();
                cur_tier = Some(tier);
                cur_end = end;
            }
            cur_end = cur_end.max(end);
            cur.push((start, end, key));
        }
        if cur.len() > 1 {
            groups.push(cur);
        }
        let mut dropped = Vec::new();
        for group in groups {
            let matches = |k: &BlockKey| {
                self.get(k).is_some_and(|m| {
                    let mut ok = false;
                    let read = io.with_block(m.tier, m.key, m.data_offset, m.data_len, &mut |b| {
                        ok = crc32c(b) == m.checksum;
                    });
                    read.is_ok() && ok
                })
            };
            let mut order: Vec<(bool, BlockKey, u64, u64)> = group
                .iter()
                .map(|&(s, e, k)| (!matches(&k), k, s, e))
                .collect();
            order.sort_unstable_by_key(|o| (o.0, o.1));
            let mut kept: Vec<(u64, u64, BlockKey)> = Vec::new();
            for (_, k, s, e) in order {
                if let Some(&(_, _, owner)) = kept.iter().find(|&&(ks, ke, _)| s < ke && ks < e) {
                    if let Some(m) = self.remove(&k) {
                        tracing::warn!(key = %k, tier = %m.tier, offset = m.data_offset, owner = %owner,
                            "block shares its slot or extent with another (a metalog record was lost): dropped");
                        dropped.push(m);
                    }
                } else {
                    kept.push((s, e, k));
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

/// Check that `(offset, len)` is a whole slot start with a payload that fits, or with
/// extent allocation an aligned start with a length within the tier's cap.
pub(crate) fn check_slot(
    geo: &CollectionConfig,
    tier: Tier,
    offset: u64,
    len: u32,
) -> Result<(), Ignored> {
    if geo.extents {
        let cap = u64::from(geo.max_block_len(tier));
        if len == 0 || u64::from(len) > cap {
            return Err(Ignored::BadExtent {
                tier,
                field: "data_len",
                value: u64::from(len),
                limit: cap,
            });
        }
        let unit = u64::from(geo.alloc_unit(tier).max(1));
        if !offset.is_multiple_of(unit) {
            return Err(Ignored::BadExtent {
                tier,
                field: "data_offset",
                value: offset,
                limit: unit,
            });
        }
        return Ok(());
    }
    let slot = u64::from(geo.slot_len(tier));
    if len == 0 || u64::from(len) > slot {
        return Err(Ignored::BadSlot(format!(
            "data_len {len} not in 1..={slot} for {tier}"
        )));
    }
    if !offset.is_multiple_of(slot) {
        return Err(Ignored::BadSlot(format!(
            "data_offset {offset} is not a multiple of {tier}'s slot length {slot}"
        )));
    }
    Ok(())
}
