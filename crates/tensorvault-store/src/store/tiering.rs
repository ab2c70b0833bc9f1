//! Tiering on the store: capacity evictions, pins, scores and one `maintain` step (the
//! planning itself is `crate::tiering`).

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::error::Result;
use crate::finite::HeldBlock;
use crate::index::{BlockIndex, FastHash};
use crate::meta_log::MetaLog;
use crate::tiering::{colder, plan_within, EvictionHeap, MaintainReport, Scored};
use crate::types::{BlockKey, Tier};

use super::TensorStore;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Make room for `incoming` new blocks in each tier: where a tier would exceed
    /// `max_blocks_per_tier`, demote its coldest blocks (not in `exclude`) one tier down,
    /// cascading into colder tiers as needed ("eviction triggers" of ADR-018 section
    /// 3.15). The coldest tier cannot evict: filling it is [`crate::StoreErr::CapacityExceeded`].
    pub(crate) fn make_room(&self, incoming: [usize; 4], exclude: &[BlockKey]) -> Result<()> {
        let limits = self.cfg.max_blocks_per_tier;
        let mut extra = incoming;
        for tier in Tier::ALL {
            let t = tier.index();
            if extra[t] == 0 || limits[t] == usize::MAX {
                continue;
            }
            let have = self.read_index()?.tier_count(tier);
            let over = (have + extra[t]).saturating_sub(limits[t]);
            if over == 0 {
                continue;
            }
            let Some(to) = colder(tier) else {
                return Err(crate::StoreErr::CapacityExceeded {
                    tier,
                    reason: format!(
                        "max_blocks_per_tier is {} and there is no colder tier",
                        limits[t]
                    ),
                });
            };
            self.apply_pending_access()?;
            let now = self.clock.now_ticks();
            let candidates: Vec<Scored> = {
                let idx = self.read_index()?;
                let held = held_keys(&idx);
                idx.scores(now)
                    .filter(|&(_, key, t, _)| {
                        t == tier
                            && !exclude.contains(&key)
                            && !idx.pinned.contains(&key)
                            && !held.contains(&key)
                            // A centred tensor's side record stays at Tier0.
                            && !self.is_side_key(&key)
                    })
                    .map(|(score, key, _, _)| Scored { score, key })
                    .collect()
            };
            let mut heap = EvictionHeap::new(candidates);
            // A victim that cannot be encoded for the colder tier is held where it is
            // (`crate::finite`): take the next coldest instead.
            let mut need = over;
            while need > 0 {
                let victims: Vec<BlockKey> = std::iter::from_fn(|| heap.pop_coldest())
                    .take(need)
                    .map(|s| s.key)
                    .collect();
                if victims.is_empty() {
                    // Nothing left to move (the rest are pinned, held or incoming):
                    // as before holds existed, the write goes ahead over the limit.
                    break;
                }
                // The victims land in the colder tier: make room there first.
                let mut cascade = [0usize; 4];
                cascade[to.index()] = victims.len();
                self.make_room(cascade, exclude)?;
                let (_, held) = self.migrate_blocks_or_hold(&victims, to)?;
                need = held.len();
            }
            extra[t] = 0;
        }
        Ok(())
    }

    /// Pin `key`: [`TensorStore::maintain`] and capacity evictions leave it in its tier
    /// whatever its score (an explicit `migrate_block` still moves it). Used for blocks
    /// still being written, such as the tail of a KV-cache tensor (`crate::kv`). Pins
    /// live in memory only, until the store is closed; a key may be pinned before its
    /// block exists. Returns whether the key was not pinned yet.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn pin_block(&self, key: BlockKey) -> Result<bool> {
        Ok(self.write_index()?.pinned.insert(key))
    }

    /// Remove the pin of `key`; returns whether it was pinned.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn unpin_block(&self, key: &BlockKey) -> Result<bool> {
        Ok(self.write_index()?.pinned.remove(key))
    }

    /// Every pinned key, sorted.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn pinned_blocks(&self) -> Result<Vec<BlockKey>> {
        let mut v: Vec<BlockKey> = self.read_index()?.pinned.iter().copied().collect();
        v.sort();
        Ok(v)
    }

    /// Blocks held in their tier (`crate::finite`) with the payload they have now,
    /// sorted by key: what [`TensorStore::maintain`] reports and planning leaves out.
    /// Holds are found by migrations (tiering, capacity evictions, age demotion) and
    /// kept in memory until the block is rewritten or the store is closed.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn held_blocks(&self) -> Result<Vec<HeldBlock>> {
        let idx = self.read_index()?;
        let mut v: Vec<HeldBlock> = idx
            .held
            .values()
            .filter(|(crc, h)| idx.get(&h.key).is_some_and(|m| m.checksum == *crc))
            .map(|(_, h)| h.clone())
            .collect();
        v.sort_by_key(|h| h.key);
        Ok(v)
    }

    /// Leave pinned and held blocks out of planning; returns the tier capacities for the
    /// rest (they still occupy their tier, so each limit shrinks by them).
    fn drop_pinned(&self, blocks: &mut Vec<(f32, BlockKey, Tier, u64)>) -> Result<[usize; 4]> {
        let mut limits = self.cfg.max_blocks_per_tier;
        let idx = self.read_index()?;
        let held = held_keys(&idx);
        if !idx.pinned.is_empty() || !held.is_empty() {
            blocks.retain(|&(_, key, tier, _)| {
                let pinned = idx.pinned.contains(&key) || held.contains(&key);
                if pinned {
                    limits[tier.index()] = limits[tier.index()].saturating_sub(1);
                }
                !pinned
            });
        }
        Ok(limits)
    }

    /// Score every block at the clock's current tick.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn scores(&self) -> Result<Vec<(f32, BlockKey, Tier, u64)>> {
        let mut v = self.scores_unsorted()?;
        v.sort_by_key(|a| a.1);
        Ok(v)
    }

    /// [`TensorStore::scores`] in index order: planning orders candidates by a total order
    /// (score, then key), so it does not need the sort.
    fn scores_unsorted(&self) -> Result<Vec<(f32, BlockKey, Tier, u64)>> {
        self.apply_pending_access()?;
        let now = self.clock.now_ticks();
        let idx = self.read_index()?;
        let v: Vec<_> = idx.scores(now).collect();
        drop(idx);
        Ok(v)
    }

    /// What one [`TensorStore::maintain`] step would do now, without moving anything:
    /// the report's `moves` are the planned moves (at most `budget`), in the order
    /// `maintain` would carry them out. A dry run: nothing is written.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn plan_maintain(&self, budget: usize) -> Result<MaintainReport> {
        let started = crate::time::Stopwatch::start();
        let now = self.clock.now_ticks();
        let mut blocks = self.scores_unsorted()?;
        // A centred tensor's side record stays raw at Tier0: never planned.
        blocks.retain(|b| !self.is_side_key(&b.1));
        let scored = blocks.len();
        let limits = self.drop_pinned(&mut blocks)?;
        let (mut moves, over_capacity, candidates) =
            plan_within(&blocks, now, &self.cfg.tiering, &limits, budget);
        moves.truncate(budget);
        Ok(MaintainReport {
            now,
            scored,
            deferred: candidates - moves.len(),
            moves,
            over_capacity,
            plan_nanos: started.elapsed_nanos(),
            held: self.held_blocks()?,
        })
    }

    /// One scheduler step: score, plan (see [`plan`] and [`TensorStore::plan_maintain`])
    /// and carry out at most `budget` migrations, batched per target tier.
    ///
    /// # Errors
    /// The errors of [`TensorStore::migrate_blocks`]; moves before the failing batch stay
    /// done. A block whose payload is corrupt is skipped (reported by `verify`), not fatal;
    /// a block whose values the target tier cannot encode (NaN, infinity) is held in its
    /// tier and listed in the report's `held` (`crate::finite`), not fatal.
    pub fn maintain(&self, budget: usize) -> Result<MaintainReport> {
        let planned = self.plan_maintain(budget)?;
        let moves = &planned.moves;
        // Execute in plan order, batching consecutive moves with the same target.
        let mut done = Vec::with_capacity(moves.len());
        let mut i = 0;
        while i < moves.len() {
            let to = moves[i].to;
            let mut j = i;
            while j < moves.len() && moves[j].to == to {
                j += 1;
            }
            let keys: Vec<BlockKey> = moves[i..j].iter().map(|m| m.key).collect();
            // A block whose values a colder tier cannot encode is held, not fatal.
            match self.migrate_blocks_or_hold(&keys, to) {
                Ok((_, held)) => done.extend(
                    moves[i..j]
                        .iter()
                        .filter(|m| !held.iter().any(|h| h.key == m.key)),
                ),
                Err(e) if e.is_corruption() => {
                    // One corrupt block must not stall tiering: move the others one by one.
                    tracing::warn!(error = %e, "maintain: corrupt block in batch, moving one by one");
                    for m in &moves[i..j] {
                        match self.migrate_blocks_or_hold(std::slice::from_ref(&m.key), to) {
                            Ok((1, _)) => done.push(*m),
                            Ok(_) => {}
                            Err(e) if e.is_corruption() => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) => return Err(e),
            }
            i = j;
        }
        Ok(MaintainReport {
            moves: done,
            held: self.held_blocks()?,
            ..planned
        })
    }
}

/// Keys of the blocks held (`crate::finite`) with the payload they have now.
fn held_keys(idx: &BlockIndex) -> std::collections::HashSet<BlockKey, FastHash> {
    idx.held
        .iter()
        .filter(|(key, (crc, _))| idx.get(key).is_some_and(|m| m.checksum == *crc))
        .map(|(key, _)| *key)
        .collect()
}
