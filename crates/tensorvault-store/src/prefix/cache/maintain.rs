//! [`PrefixCache::maintain`]: demote idle chunks to colder tiers and enforce the budget,
//! in one commit.

use super::commit::chunk_blocks;
use super::{PrefixCache, PrefixMaintainReport};
use crate::clock::Clock;
use crate::error::Result;
use crate::types::{BlockKey, Tier};

impl<C: Clock> PrefixCache<C> {
    /// Move chunks idle for long to colder tiers ([`super::PrefixConfig::age_tiers`];
    /// demotion only; a chunk's last use is the latest of its store and the loads any
    /// writable handle committed), then evict down to the budget. One commit.
    ///
    /// # Errors
    /// [`crate::StoreErr::ReadOnly`]; [`crate::StoreErr::Locked`] if other writers kept
    /// the lock past `lock_wait`; the store's migration and write errors.
    pub fn maintain(&self) -> Result<PrefixMaintainReport> {
        self.check_writable("maintain")?;
        self.commit(|w| {
            let now = w.store.clock().now_ticks();
            let mut report = PrefixMaintainReport::default();
            let mut moves: [Vec<BlockKey>; 4] = Default::default();
            for metas in chunk_blocks(&w.store, &w.table)?.values() {
                let Some(last) = metas
                    .iter()
                    .map(|m| m.last_access_at.max(m.created_at))
                    .max()
                else {
                    continue;
                };
                let target = self.cfg.age_tiers.tier_for_idle(now.saturating_sub(last));
                let mut moved = false;
                for m in metas.iter().filter(|m| m.tier < target) {
                    moves[target.index()].push(m.key);
                    moved = true;
                }
                if moved {
                    report.demoted[target.index()] += 1;
                }
            }
            for (i, keys) in moves.iter().enumerate() {
                if !keys.is_empty() {
                    w.store.migrate_blocks(keys, Tier::ALL[i])?;
                }
            }
            if let Some(budget) = self.cfg.budget_bytes {
                report.evicted = self.evict_to(w, budget)?;
            }
            w.store.compact_if_over(4)?;
            Ok(report)
        })
    }

    /// Evict chunks (the least recently used that no other chunk extends, repeatedly)
    /// until the model's chunks take at most `bytes` payload bytes (0: evict all), in one
    /// commit; returns the chunks evicted. For `tensorvault kv evict`.
    ///
    /// # Errors
    /// [`crate::StoreErr::ReadOnly`]; [`crate::StoreErr::Locked`] if other writers kept
    /// the lock past `lock_wait`; the store's delete errors.
    pub fn evict_to_bytes(&self, bytes: u64) -> Result<u64> {
        self.check_writable("evict")?;
        self.commit(|w| self.evict_to(w, bytes))
    }
}
