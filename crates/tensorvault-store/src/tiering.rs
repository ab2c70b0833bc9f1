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
    /// Blocks left in their tier because their values cannot be encoded for a colder
    /// one (NaN or infinity: `crate::finite`), sorted by key: those this step found and
    /// those held by earlier steps (which planning leaves out). The other blocks are
    /// tiered as if these were pinned.
    pub held: Vec<crate::finite::HeldBlock>,
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

pub(crate) fn colder(t: Tier) -> Option<Tier> {
    Tier::from_u8(t as u8 + 1)
}

pub(crate) fn hotter(t: Tier) -> Option<Tier> {
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
        let may_demote = tier != Tier::Tier0 || policy.demote_tier0;
        if score < policy.demote_threshold && tier < policy.coldest_tier && may_demote {
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
    fn cold_tier0_blocks_stay_exact_unless_the_policy_says_otherwise() {
        let blocks = vec![(0.5, k(0), Tier::Tier0, 0), (0.5, k(1), Tier::Tier1, 0)];
        let mut p = TierPolicy::default();
        let got = |p: &TierPolicy, limits: &[usize; 4]| -> Vec<_> {
            let (moves, _) = plan(&blocks, 100, p, limits);
            moves
                .iter()
                .map(|m| (m.key.block_index, m.to, m.reason))
                .collect()
        };
        // Default: only the quantized block moves.
        assert_eq!(got(&p, &[usize::MAX; 4]), [(1, Tier::Tier2, Reason::Cold)]);
        // A Tier0 capacity limit is a policy: the coldest Tier0 block goes down.
        assert_eq!(
            got(&p, &[0, usize::MAX, usize::MAX, usize::MAX]),
            [
                (0, Tier::Tier1, Reason::Capacity),
                (1, Tier::Tier2, Reason::Cold)
            ]
        );
        p.demote_tier0 = true;
        assert_eq!(
            got(&p, &[usize::MAX; 4]),
            [
                (0, Tier::Tier1, Reason::Cold),
                (1, Tier::Tier2, Reason::Cold)
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
