//! Policies of the prefix cache: the tier of a chunk by how long it has been idle, and
//! which chunks a byte budget evicts (least recently used first, never a chunk that a
//! stored chunk extends: a suffix without its prefix could never be found again).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::types::Tier;

/// Idle time (store clock ticks: seconds with the system clock) that keeps a chunk in each
/// tier: a chunk last used `idle` ticks ago belongs in Tier0 if `idle < tier0`, Tier1 if
/// `idle < tier0 + tier1`, Tier2 if within `tier2` more, else Tier3. `maintain` only
/// demotes (a promotion could not restore the precision a colder tier dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgeTiers {
    /// Ticks a chunk stays raw (f16, bit-exact) after its last use.
    pub tier0: u64,
    /// Ticks after those at 8 bits.
    pub tier1: u64,
    /// Ticks after those at 5 bits; anything idle longer goes to 3 bits.
    pub tier2: u64,
}

impl Default for AgeTiers {
    /// 10 minutes raw, then 8 bits up to an hour, 5 bits up to a day, then 3 bits.
    fn default() -> Self {
        Self {
            tier0: 600,
            tier1: 3000,
            tier2: 82_800,
        }
    }
}

impl AgeTiers {
    /// The tier for a chunk idle for `idle` ticks.
    #[must_use]
    pub fn tier_for_idle(&self, idle: u64) -> Tier {
        let t1 = self.tier0;
        let t2 = t1.saturating_add(self.tier1);
        let t3 = t2.saturating_add(self.tier2);
        if idle < t1 {
            Tier::Tier0
        } else if idle < t2 {
            Tier::Tier1
        } else if idle < t3 {
            Tier::Tier2
        } else {
            Tier::Tier3
        }
    }
}

/// What eviction needs to know of a chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkUse {
    pub id: u128,
    /// 0 for a first chunk.
    pub parent: u128,
    /// Payload bytes of its blocks.
    pub bytes: u64,
    /// Tick of its most recent use (store or load).
    pub last_use: u64,
}

/// The chunks to evict, in order, so the rest fit in `budget` bytes: repeatedly the least
/// recently used chunk that no remaining chunk extends (ties: the deeper one first).
pub(crate) fn plan_eviction(chunks: &[ChunkUse], budget: u64) -> Vec<u128> {
    let mut total: u64 = chunks.iter().map(|c| c.bytes).sum();
    if total <= budget {
        return Vec::new();
    }
    let by_id: HashMap<u128, &ChunkUse> = chunks.iter().map(|c| (c.id, c)).collect();
    let mut children: HashMap<u128, u32> = HashMap::new();
    for c in chunks {
        if by_id.contains_key(&c.parent) {
            *children.entry(c.parent).or_default() += 1;
        }
    }
    let mut depth_memo: HashMap<u128, u32> = HashMap::new();
    let mut depth = |id: u128| -> u32 {
        let mut path = Vec::new();
        let mut cur = id;
        let mut d = 0;
        while let Some(c) = by_id.get(&cur) {
            if let Some(&m) = depth_memo.get(&cur) {
                d = m;
                break;
            }
            path.push(cur);
            if path.len() > by_id.len() {
                break; // a cycle cannot come from a hash chain; stay finite anyway
            }
            cur = c.parent;
        }
        for id in path.into_iter().rev() {
            d += 1;
            depth_memo.insert(id, d);
        }
        d
    };
    let mut heap = BinaryHeap::new();
    for c in chunks {
        if !children.contains_key(&c.id) {
            heap.push(Reverse((c.last_use, Reverse(depth(c.id)), c.id)));
        }
    }
    let mut out = Vec::new();
    while total > budget {
        let Some(Reverse((_, _, id))) = heap.pop() else {
            break;
        };
        let c = by_id[&id];
        total -= c.bytes;
        out.push(id);
        if let Some(n) = children.get_mut(&c.parent) {
            *n -= 1;
            if *n == 0 {
                children.remove(&c.parent);
                let p = by_id[&c.parent];
                heap.push(Reverse((p.last_use, Reverse(depth(p.id)), p.id)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u128, parent: u128, last_use: u64) -> ChunkUse {
        ChunkUse {
            id,
            parent,
            bytes: 10,
            last_use,
        }
    }

    #[test]
    fn tiers_follow_idle_time() {
        let a = AgeTiers {
            tier0: 10,
            tier1: 10,
            tier2: 10,
        };
        assert_eq!(a.tier_for_idle(0), Tier::Tier0);
        assert_eq!(a.tier_for_idle(10), Tier::Tier1);
        assert_eq!(a.tier_for_idle(29), Tier::Tier2);
        assert_eq!(a.tier_for_idle(30), Tier::Tier3);
        assert_eq!(AgeTiers::default().tier_for_idle(3599), Tier::Tier1);
    }

    #[test]
    fn suffixes_go_before_their_prefixes_even_when_used_later() {
        // Chain 1 <- 2 <- 3 (3 used most recently), and a lone chunk 9 used at tick 5.
        let chunks = [c(1, 0, 1), c(2, 1, 2), c(3, 2, 100), c(9, 0, 5)];
        assert!(plan_eviction(&chunks, 40).is_empty());
        // 9 is the least recently used leaf (3 is newer); then only the chain is left,
        // and it goes from its end.
        assert_eq!(plan_eviction(&chunks, 30), vec![9]);
        assert_eq!(plan_eviction(&chunks, 10), vec![9, 3, 2]);
        assert_eq!(plan_eviction(&chunks, 0), vec![9, 3, 2, 1]);
        // A branch: 1 <- 2, 1 <- 4; the older branch leaf goes first, 1 last.
        let tree = [c(1, 0, 9), c(2, 1, 3), c(4, 1, 4)];
        assert_eq!(plan_eviction(&tree, 0), vec![2, 4, 1]);
        // Equal use: the deeper chunk first.
        let tie = [c(1, 0, 1), c(2, 1, 1), c(7, 0, 1)];
        assert_eq!(plan_eviction(&tie, 10)[0], 2);
    }
}
