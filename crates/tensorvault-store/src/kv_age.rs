//! Age-based tiering of a KV cache: attention reads every block of the cache at every
//! decode step, so access rates cannot tell old blocks from new ones; a block's *age*
//! (how many tokens were appended after it) can. [`KvAgePolicy`] keeps the most recent
//! tokens raw and moves older sealed blocks to colder tiers in steps; the attention-sink
//! token (block 0's first token) stays f16 inside the quantized segment in collections
//! with the KV layout (codec v2, `sink_values`).
//!
//! Demotion only: a block is never moved to a hotter tier here (a promotion re-encodes
//! what the colder tier holds and cannot restore precision), and the tail block, which
//! is still being appended to, never moves.

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::config::TierPolicy;
use crate::error::{Result, StoreErr};
use crate::kv::KvCache;
use crate::meta_log::MetaLog;
use crate::types::{BlockKey, Tier};

/// Records per live block beyond which [`KvCache::demote_by_age`] compacts the log.
const LOG_RECORDS_PER_BLOCK: u32 = 4;

/// How many tokens of age each tier holds: a sealed block whose newest token is `age`
/// tokens behind the end of its tensor goes to Tier0 if `age < tier0_tokens`, else
/// Tier1 if `age < tier0_tokens + tier1_tokens`, else Tier2 if within `tier2_tokens`
/// more, else Tier3. A window of 0 skips that tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvAgePolicy {
    /// Most recent tokens kept raw (f16, bit-exact).
    pub tier0_tokens: u64,
    /// Tokens after those kept at 8 bits.
    pub tier1_tokens: u64,
    /// Tokens after those kept at 5 bits; anything older goes to 3 bits.
    pub tier2_tokens: u64,
}

impl KvAgePolicy {
    /// The store's access-based tiering to run next to an age policy: `base` with
    /// automatic promotion turned off (`hottest_tier` = Tier3). Attention reads every block
    /// of the cache at every decode step, so every block scores hot; with promotion on, the
    /// store's `maintain` moves blocks the age policy demoted back up a tier, and the next
    /// [`KvCache::demote_by_age`] demotes them again. Each such round trip re-encodes
    /// decoded values (the error compounds) and costs two migrations; a 2048-token SmolLM2
    /// decode did about 1,500 of them, and how many blocks sat a tier too warm at the end
    /// depended on wall-clock time. Demotion by access is unchanged.
    #[must_use]
    pub fn store_tiering(base: TierPolicy) -> TierPolicy {
        TierPolicy {
            hottest_tier: Tier::Tier3,
            ..base
        }
    }

    /// The tier of a block whose newest token is `age` tokens old.
    #[must_use]
    pub fn tier_for_age(&self, age: u64) -> Tier {
        let t1 = self.tier0_tokens;
        let t2 = t1.saturating_add(self.tier1_tokens);
        let t3 = t2.saturating_add(self.tier2_tokens);
        if age < t1 {
            Tier::Tier0
        } else if age < t2 {
            Tier::Tier1
        } else if age < t3 {
            Tier::Tier2
        } else {
            Tier::Tier3
        }
    }
}

impl<C: Clock, B: BlockIO, M: MetaLog> KvCache<C, B, M> {
    /// Close the cache: compact the log if it holds more than 2 records per live block
    /// (a decode leaves many records of rewritten tails and moved blocks), then flush
    /// and release the store.
    ///
    /// # Errors
    /// As [`crate::TensorStore::compact`] and [`crate::TensorStore::close`].
    pub fn close(self) -> Result<()> {
        let store = self.into_store();
        store.compact_if_over(2)?;
        store.close()
    }

    /// Demote every sealed block of every slot that `policy` wants in a colder tier than
    /// the one it is in; returns how many blocks moved into tiers 0..=3 (index 0 is
    /// always 0). Blocks move in one batched migration per target tier; then the log is
    /// compacted if it holds more than 4 records per live block. A block whose values a
    /// colder tier cannot encode (NaN or infinity, stored by a build that did not refuse
    /// them at append) is held in its tier, never an error: see
    /// [`crate::TensorStore::held_blocks`] and `crate::finite`.
    ///
    /// # Errors
    /// The errors of [`crate::TensorStore::migrate_blocks_or_hold`] (blocks of earlier
    /// batches stay moved); [`StoreErr::InvalidArgument`] if the cache lock was poisoned.
    pub fn demote_by_age(&self, policy: &KvAgePolicy) -> Result<[usize; 4]> {
        let tpb = u64::from(self.tokens_per_block());
        let mut want: [Vec<BlockKey>; 4] = Default::default();
        for slot in self.slots()? {
            let tokens = self.tokens(slot)?;
            let sealed = tokens / tpb; // blocks 0..sealed are full
            let id = self.tensor_id(slot);
            for b in 0..sealed {
                let newest = (b + 1) * tpb; // one past the block's newest token
                let target = policy.tier_for_age(tokens - newest);
                let Ok(index) = u32::try_from(b) else {
                    return Err(StoreErr::InvalidArgument {
                        field: "tokens",
                        reason: format!("{slot}: block {b} is beyond 2^32"),
                    });
                };
                let key = BlockKey::new(id, index);
                let colder = self
                    .store()
                    .meta(&key)?
                    .is_some_and(|m| m.tier.index() < target.index());
                if colder {
                    want[target.index()].push(key);
                }
            }
        }
        let mut moved = [0usize; 4];
        for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
            let keys = &want[tier.index()];
            if !keys.is_empty() {
                // A block holding NaN or infinity (written before appends refused them)
                // stays where it is and is reported by `held_blocks` and `maintain`.
                moved[tier.index()] = self.store().migrate_blocks_or_hold(keys, tier)?.0;
            }
        }
        // A decode appends and reads every step, so the log grows by records of blocks
        // long rewritten or moved; keep it near the live set.
        self.store().compact_if_over(LOG_RECORDS_PER_BLOCK)?;
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_map_to_tiers_in_steps() {
        let p = KvAgePolicy {
            tier0_tokens: 256,
            tier1_tokens: 0,
            tier2_tokens: 512,
        };
        assert_eq!(p.tier_for_age(0), Tier::Tier0);
        assert_eq!(p.tier_for_age(255), Tier::Tier0);
        assert_eq!(p.tier_for_age(256), Tier::Tier2);
        assert_eq!(p.tier_for_age(767), Tier::Tier2);
        assert_eq!(p.tier_for_age(768), Tier::Tier3);
        let all_raw = KvAgePolicy {
            tier0_tokens: u64::MAX,
            tier1_tokens: u64::MAX,
            tier2_tokens: 0,
        };
        assert_eq!(all_raw.tier_for_age(u64::MAX - 1), Tier::Tier0);
    }
}
