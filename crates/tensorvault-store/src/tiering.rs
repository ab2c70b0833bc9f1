//! Automatic tier migration (ADR-018 sections 3.8 and 3.11, issue 6 items 1-2): score
//! every block, evict the coldest blocks of tiers over their capacity, demote cold blocks
//! and promote hot ones with hysteresis, within a budget of migrations per step.
//!
//! Everything is a pure function of the index and the clock: with a
//! [`crate::ManualClock`], the same access sequence gives the same migrations and the same
//! final index on every run. Ties in score are broken by [`BlockKey`] order.
//!
//! Precision policy: a block moves one tier per step. Demotion re-quantizes to fewer bits;
//! promotion re-encodes what the colder tier holds at more bits, so it speeds up reads
//! and stops further loss but cannot restore precision already rounded away. There is no
//! hidden raw copy: a block that must stay bit-exact stays in Tier0 (automatic promotion
//! never targets Tier0 unless [`TierPolicy::hottest_tier`] says so), and a block that must
//! be recoverable uses a reconstruction policy.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::error::Result;
use crate::meta_log::MetaLog;
use crate::store::TensorStore;
use crate::types::{BlockKey, Tier};

pub use crate::config::TierPolicy;

/// Why a block was scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Its tier held more blocks than `max_blocks_per_tier`; it was among the coldest.
    Capacity,
    /// Score below the demote threshold.
    Cold,
    /// Score above the promote threshold.
    Hot,
}

/// One planned move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Move {
    /// The block.
    pub key: BlockKey,
    /// Its tier now.
    pub from: Tier,
    /// Its tier after the move.
    pub to: Tier,
    /// Its score when planned.
    pub score: f32,
    /// Why.
    pub reason: Reason,
}

/// What one [`TensorStore::maintain`] step did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MaintainReport {
    /// Tick of the step.
    pub now: u64,
    /// Blocks scored.
    pub scored: usize,
    /// Moves carried out, in order.
    pub moves: Vec<Move>,
    /// Moves planned but left for a later step because the budget ran out.
    pub deferred: usize,
    /// Blocks still over capacity in the coldest tier (nothing colder to move them to).
    pub over_capacity: usize,
    /// Wall time of scoring and planning, nanoseconds.
    pub plan_nanos: u64,
}

impl MaintainReport {
    /// Number of moves with `reason`.
    #[must_use]
    pub fn count(&self, reason: Reason) -> usize {
        self.moves.iter().filter(|m| m.reason == reason).count()
    }
}

/// A score with a total order (f32::total_cmp; NaN sorts last) and the block key as
/// tie-break: the element of the eviction heap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// Migration score.
    pub score: f32,
    /// The block.
    pub key: BlockKey,
}

impl Eq for Scored {}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.key.cmp(&other.key))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Min-heap of blocks by score (ADR-018 section 3.11's eviction heap).
#[derive(Debug, Default)]
pub struct EvictionHeap(BinaryHeap<Reverse<Scored>>);

impl EvictionHeap {
    /// Build from scored blocks in O(n).
    #[must_use]
    pub fn new(items: Vec<Scored>) -> Self {
        Self(items.into_iter().map(Reverse).collect())
    }

    /// Pop the coldest block (lowest score, then lowest key).
    pub fn pop_coldest(&mut self) -> Option<Scored> {
        self.0.pop().map(|Reverse(s)| s)
    }

    /// Blocks left.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the heap is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn colder(t: Tier) -> Option<Tier> {
    Tier::from_u8(t as u8 + 1)
}

fn hotter(t: Tier) -> Option<Tier> {
    (t as u8).checked_sub(1).and_then(Tier::from_u8)
}

/// Plan moves for blocks `(score, key, tier, tier_since)` at `now`: capacity evictions
/// (coldest first, tiers hot to cold), then demotions (coldest first), then promotions
/// (hottest first), each respecting the target tier's capacity. Pure and deterministic.
#[must_use]
pub fn plan(
    blocks: &[(f32, BlockKey, Tier, u64)],
    now: u64,
    policy: &TierPolicy,
    max_blocks_per_tier: &[usize; 4],
) -> (Vec<Move>, usize) {
    let (moves, over, _) = plan_within(blocks, now, policy, max_blocks_per_tier, usize::MAX);
    (moves, over)
}

/// [`plan`] that stops at `budget` moves: when no tier has a capacity limit, only the
/// `budget` coldest (and hottest) candidates are selected (`select_nth_unstable`, O(n))
/// and sorted, instead of sorting every candidate. Returns the moves (the same first
/// `budget` moves [`plan`] would return), blocks over capacity in the coldest tier, and
/// how many moves were planned or left out in total.
#[must_use]
pub fn plan_within(
    blocks: &[(f32, BlockKey, Tier, u64)],
    now: u64,
    policy: &TierPolicy,
    max_blocks_per_tier: &[usize; 4],
    budget: usize,
) -> (Vec<Move>, usize, usize) {
    let mut counts = [0usize; 4];
    let mut per_tier: [Vec<Scored>; 4] = Default::default();
    // The per-tier lists only feed capacity eviction: skip them when nothing is limited.
    let limited = max_blocks_per_tier.iter().any(|&l| l != usize::MAX);
    for &(score, key, tier, _) in blocks {
        counts[tier.index()] += 1;
        if limited {
            per_tier[tier.index()].push(Scored { score, key });
        }
    }
    let mut moved = std::collections::HashSet::new();
    let mut moves = Vec::new();
    // 1. Capacity: push the coldest blocks of an over-full tier one tier down; a cascade
    // into the next tier is handled when that tier's turn comes.
    let mut over_capacity = 0;
    for tier in Tier::ALL {
        let t = tier.index();
        let over = counts[t].saturating_sub(max_blocks_per_tier[t]);
        if over == 0 {
            continue;
        }
        let Some(to) = colder(tier) else {
            over_capacity = over;
            continue;
        };
        let mut heap = EvictionHeap::new(std::mem::take(&mut per_tier[t]));
        for _ in 0..over {
            let Some(s) = heap.pop_coldest() else { break };
            moves.push(Move {
                key: s.key,
                from: tier,
                to,
                score: s.score,
                reason: Reason::Capacity,
            });
            moved.insert(s.key);
            counts[t] -= 1;
            counts[to.index()] += 1;
            // Evicted blocks count against the colder tier's capacity in its turn.
            per_tier[to.index()].push(s);
        }
        per_tier[t] = heap.0.into_iter().map(|Reverse(s)| s).collect();
    }
    // 2. Demotions and 3. promotions with hysteresis and minimum tier age.
    let mut cold = Vec::new();
    let mut hot = Vec::new();
    for &(score, key, tier, since) in blocks {
        if moved.contains(&key) || now.saturating_sub(since) < policy.min_tier_age {
            continue;
        }
        if score < policy.demote_threshold && tier < policy.coldest_tier {
            cold.push((Scored { score, key }, tier));
        } else if score > policy.promote_threshold && tier > policy.hottest_tier {
            hot.push((Scored { score, key }, tier));
        }
    }
    let candidates = moves.len() + cold.len() + hot.len();
    if max_blocks_per_tier.iter().all(|&l| l == usize::MAX) {
        // Without capacity limits no candidate is skipped, so only the first `budget`
        // in plan order can run: select them in O(n) rather than sort all of them.
        let keep = budget.saturating_sub(moves.len());
        if cold.len() > keep {
            cold.select_nth_unstable_by_key(keep, |a| a.0);
            cold.truncate(keep);
        }
        let keep = keep - cold.len();
        if hot.len() > keep {
            hot.select_nth_unstable_by_key(keep, |b| Reverse(b.0));
            hot.truncate(keep);
        }
    }
    cold.sort_by_key(|a| a.0);
    hot.sort_by_key(|b| Reverse(b.0));
    for (list, reason, step) in [
        (cold, Reason::Cold, colder as fn(Tier) -> Option<Tier>),
        (hot, Reason::Hot, hotter),
    ] {
        for (s, from) in list {
            let Some(to) = step(from) else { continue };
            if counts[to.index()] >= max_blocks_per_tier[to.index()] {
                continue;
            }
            counts[from.index()] -= 1;
            counts[to.index()] += 1;
            moves.push(Move {
                key: s.key,
                from,
                to,
                score: s.score,
                reason,
            });
        }
    }
    (moves, over_capacity, candidates)
}

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
                idx.map
                    .values()
                    .filter(|m| {
                        m.tier == tier && !exclude.contains(&m.key) && !idx.pinned.contains(&m.key)
                    })
                    .map(|m| Scored {
                        score: m.migration_score(now),
                        key: m.key,
                    })
                    .collect()
            };
            let mut heap = EvictionHeap::new(candidates);
            let victims: Vec<BlockKey> = std::iter::from_fn(|| heap.pop_coldest())
                .take(over)
                .map(|s| s.key)
                .collect();
            // The victims land in the colder tier: make room there first.
            let mut cascade = [0usize; 4];
            cascade[to.index()] = victims.len();
            self.make_room(cascade, exclude)?;
            self.migrate_blocks(&victims, to)?;
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

    /// Leave pinned blocks out of planning; returns the tier capacities for the rest
    /// (pinned blocks still occupy their tier, so each limit shrinks by them).
    fn drop_pinned(&self, blocks: &mut Vec<(f32, BlockKey, Tier, u64)>) -> Result<[usize; 4]> {
        let mut limits = self.cfg.max_blocks_per_tier;
        let idx = self.read_index()?;
        if !idx.pinned.is_empty() {
            blocks.retain(|&(_, key, tier, _)| {
                let pinned = idx.pinned.contains(&key);
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
        let v: Vec<_> = idx
            .map
            .values()
            .map(|m| (m.migration_score(now), m.key, m.tier, m.tier_since))
            .collect();
        drop(idx);
        Ok(v)
    }

    /// One scheduler step: score, plan (see [`plan`]) and carry out at most `budget`
    /// migrations, batched per target tier.
    ///
    /// # Errors
    /// The errors of [`TensorStore::migrate_blocks`]; moves before the failing batch stay
    /// done. A block whose payload is corrupt is skipped (reported by `verify`), not fatal.
    pub fn maintain(&self, budget: usize) -> Result<MaintainReport> {
        let started = crate::time::Stopwatch::start();
        let now = self.clock.now_ticks();
        let mut blocks = self.scores_unsorted()?;
        let scored = blocks.len();
        let limits = self.drop_pinned(&mut blocks)?;
        let (mut moves, over_capacity, candidates) =
            plan_within(&blocks, now, &self.cfg.tiering, &limits, budget);
        moves.truncate(budget);
        let deferred = candidates - moves.len();
        let plan_nanos = started.elapsed_nanos();
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
            match self.migrate_blocks(&keys, to) {
                Ok(_) => done.extend_from_slice(&moves[i..j]),
                Err(e) if e.is_corruption() => {
                    // One corrupt block must not stall tiering: move the others one by one.
                    tracing::warn!(error = %e, "maintain: corrupt block in batch, moving one by one");
                    for m in &moves[i..j] {
                        match self.migrate_block(&m.key, to) {
                            Ok(()) => done.push(*m),
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
            now,
            scored,
            moves: done,
            deferred,
            over_capacity,
            plan_nanos,
        })
    }
}

#[cfg(feature = "threads")]
pub use background::Maintainer;

#[cfg(feature = "threads")]
mod background {
    use std::sync::{Arc, Condvar, Mutex};
    use std::thread::JoinHandle;
    use std::time::Duration;

    use super::MaintainReport;
    use crate::block_io::BlockIO;
    use crate::clock::Clock;
    use crate::meta_log::MetaLog;
    use crate::store::TensorStore;

    /// Totals of a background maintainer.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct MaintainerTotals {
        /// Steps run.
        pub steps: u64,
        /// Blocks moved.
        pub moves: u64,
        /// Steps that failed (logged with tracing).
        pub errors: u64,
    }

    /// A background thread running [`TensorStore::maintain`] every interval; stopped
    /// (and joined) by [`Maintainer::stop`] or on drop.
    pub struct Maintainer {
        stop: Arc<(Mutex<bool>, Condvar)>,
        totals: Arc<Mutex<MaintainerTotals>>,
        handle: Option<JoinHandle<()>>,
    }

    impl Maintainer {
        /// Start maintaining `store` every `every` with `budget` moves per step.
        ///
        /// # Errors
        /// The OS error if the thread cannot be spawned.
        pub fn start<C, B, M>(
            store: Arc<TensorStore<C, B, M>>,
            every: Duration,
            budget: usize,
        ) -> std::io::Result<Self>
        where
            C: Clock + 'static,
            B: BlockIO + 'static,
            M: MetaLog + 'static,
        {
            let stop = Arc::new((Mutex::new(false), Condvar::new()));
            let totals = Arc::new(Mutex::new(MaintainerTotals::default()));
            let (s2, t2) = (Arc::clone(&stop), Arc::clone(&totals));
            let handle = std::thread::Builder::new()
                .name("tensorvault-maintain".into())
                .spawn(move || loop {
                    let (lock, cv) = &*s2;
                    let Ok(guard) = lock.lock() else { return };
                    let Ok((guard, _)) = cv.wait_timeout_while(guard, every, |stopped| !*stopped)
                    else {
                        return;
                    };
                    if *guard {
                        return;
                    }
                    drop(guard);
                    let r: Result<MaintainReport, _> = store.maintain(budget);
                    if let Ok(mut t) = t2.lock() {
                        t.steps += 1;
                        match r {
                            Ok(rep) => t.moves += rep.moves.len() as u64,
                            Err(e) => {
                                t.errors += 1;
                                tracing::warn!(error = %e, "background maintain step failed");
                            }
                        }
                    }
                })?;
            Ok(Self {
                stop,
                totals,
                handle: Some(handle),
            })
        }

        /// What the thread has done so far.
        #[must_use]
        pub fn totals(&self) -> MaintainerTotals {
            self.totals.lock().map(|t| t.clone()).unwrap_or_default()
        }

        /// Signal the thread, wait for the step in progress to finish, join it.
        #[must_use]
        pub fn stop(mut self) -> MaintainerTotals {
            self.shutdown();
            self.totals()
        }

        fn shutdown(&mut self) {
            let (lock, cv) = &*self.stop;
            if let Ok(mut s) = lock.lock() {
                *s = true;
            }
            cv.notify_all();
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    impl Drop for Maintainer {
        fn drop(&mut self) {
            self.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> BlockKey {
        BlockKey::new(1, i)
    }

    #[test]
    fn heap_pops_lowest_score_then_lowest_key() {
        let mut h = EvictionHeap::new(vec![
            Scored {
                score: 5.0,
                key: k(1),
            },
            Scored {
                score: 1.0,
                key: k(9),
            },
            Scored {
                score: 1.0,
                key: k(3),
            },
            Scored {
                score: f32::NAN,
                key: k(0),
            },
        ]);
        let order: Vec<u32> = std::iter::from_fn(|| h.pop_coldest())
            .map(|s| s.key.block_index)
            .collect();
        assert_eq!(order, [3, 9, 1, 0]);
    }

    #[test]
    fn plan_applies_capacity_hysteresis_and_age() {
        let p = TierPolicy::default();
        let blocks = vec![
            (1.0, k(0), Tier::Tier1, 0),   // cold, old enough -> demote
            (1.0, k(1), Tier::Tier1, 95),  // cold but too young
            (100.0, k(2), Tier::Tier2, 0), // between thresholds: stays
            (900.0, k(3), Tier::Tier3, 0), // hot -> promote to tier2
            (900.0, k(4), Tier::Tier1, 0), // hot but already at the hottest auto tier
            (0.5, k(5), Tier::Tier3, 0),   // cold but already coldest
        ];
        let (moves, over) = plan(&blocks, 100, &p, &[usize::MAX; 4]);
        assert_eq!(over, 0);
        let got: Vec<_> = moves
            .iter()
            .map(|m| (m.key.block_index, m.from, m.to, m.reason))
            .collect();
        assert_eq!(
            got,
            [
                (0, Tier::Tier1, Tier::Tier2, Reason::Cold),
                (3, Tier::Tier3, Tier::Tier2, Reason::Hot)
            ]
        );
    }

    #[test]
    fn capacity_evicts_the_coldest_and_cascades() {
        let p = TierPolicy::default();
        let blocks = vec![
            (300.0, k(0), Tier::Tier1, 99),
            (200.0, k(1), Tier::Tier1, 99),
            (200.0, k(2), Tier::Tier1, 99),
            (400.0, k(3), Tier::Tier2, 99),
        ];
        // Tier1 holds 1, tier2 holds 2: two tier1 blocks go to tier2 (keys 1 then 2: equal
        // scores, lower key first), which then holds 3 > 2 and pushes its coldest to tier3.
        let (moves, _) = plan(&blocks, 100, &p, &[usize::MAX, 1, 2, usize::MAX]);
        let got: Vec<_> = moves.iter().map(|m| (m.key.block_index, m.to)).collect();
        assert_eq!(got, [(1, Tier::Tier2), (2, Tier::Tier2), (1, Tier::Tier3)]);
    }
}
