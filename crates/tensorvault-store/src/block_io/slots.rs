//! Slot bookkeeping shared by every [`super::BlockIO`] implementation: a tier is a row of
//! `slots` fixed-size slots, slot `i` starting at byte `i * slot_len`, and a free list
//! that always hands out the lowest free slot first (so the layout is a pure function of
//! the sequence of writes and frees).
//!
//! The allocator knows nothing about the medium: growing the file or buffer is the
//! caller's job ([`SlotAlloc::add_slots`] only records that it happened).

use std::collections::BTreeSet;

use crate::error::{Result, StoreErr};
use crate::types::Tier;

/// Largest tier the allocator accepts, in bytes (1 TiB): a bound on every offset a
/// caller (or a replayed log record) may hand in, so a bogus offset cannot make us
/// allocate or map an absurd range.
pub(crate) const MAX_TIER_BYTES: u64 = 1 << 40;

/// The slot length in bytes for a geometry's `slot_len`: a slot length of 0 (an invalid
/// geometry the store refuses) is treated as 1 so no offset computation divides by zero.
pub(crate) fn slot_bytes(slot_len: u32) -> u64 {
    u64::from(slot_len.max(1))
}

/// Whole slots of `slot_len` bytes in a medium of `len` bytes, at most the largest tier's.
pub(crate) fn whole_slots(len: u64, slot_len: u64) -> u64 {
    (len / slot_len).min(MAX_TIER_BYTES / slot_len)
}

/// Free-slot bookkeeping of one tier.
#[derive(Debug)]
pub(crate) struct SlotAlloc {
    tier: Tier,
    slot_len: u64,
    /// Slots in the tier (live + free).
    slots: u64,
    /// Slots `next..slots` are free (the never-used or trimmed tail), so preallocated
    /// growth costs no memory here.
    next: u64,
    /// Free slots below `next` (holes left by frees), all `< next`.
    holes: BTreeSet<u64>,
}

impl SlotAlloc {
    /// An allocator for a tier holding `slots` slots, all of them free (nothing is live
    /// until [`SlotAlloc::reset`] or an allocation says so). A `slot_len` of 0 (an
    /// invalid geometry) is treated as 1 so no offset computation can divide by zero.
    pub(crate) fn new(tier: Tier, slot_len: u32, slots: u64) -> Self {
        let slot_len = slot_bytes(slot_len);
        let slots = slots.min(MAX_TIER_BYTES / slot_len);
        Self {
            tier,
            slot_len,
            slots,
            next: 0,
            holes: BTreeSet::new(),
        }
    }

    /// Slots in the tier.
    pub(crate) fn slots(&self) -> u64 {
        self.slots
    }

    /// Free slots.
    pub(crate) fn free_slots(&self) -> u64 {
        self.holes.len() as u64 + (self.slots - self.next)
    }

    /// Take the lowest free slot, `None` when every slot is live.
    pub(crate) fn pop_free(&mut self) -> Option<u64> {
        if let Some(i) = self.holes.pop_first() {
            return Some(i);
        }
        (self.next < self.slots).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// Most slots the tier may ever hold.
    pub(crate) fn max_slots(&self) -> u64 {
        MAX_TIER_BYTES / self.slot_len
    }

    /// Record that the medium grew by `n` slots, all free.
    ///
    /// # Errors
    /// [`StoreErr::CapacityExceeded`] if the tier would exceed [`MAX_TIER_BYTES`].
    pub(crate) fn add_slots(&mut self, n: u64) -> Result<()> {
        let new = self.slots.checked_add(n).filter(|&s| s <= self.max_slots());
        let Some(new) = new else {
            return Err(self.full());
        };
        self.slots = new;
        Ok(())
    }

    /// Free slots at the end of the tier (after the last live slot).
    pub(crate) fn free_tail(&self) -> u64 {
        self.slots - self.next
    }

    /// Record that the medium shrank to `slots` slots; only free tail slots may go (the
    /// count is clamped to keep every live slot).
    pub(crate) fn shrink_to(&mut self, slots: u64) {
        self.slots = slots.max(self.next).min(self.slots);
    }

    /// The error for a tier that cannot grow any more.
    pub(crate) fn full(&self) -> StoreErr {
        StoreErr::CapacityExceeded {
            tier: self.tier,
            reason: format!("the tier file may not exceed {MAX_TIER_BYTES} bytes"),
        }
    }

    /// Check that `src_len` fits a slot.
    ///
    /// # Errors
    /// [`StoreErr::CapacityExceeded`] if it does not.
    pub(crate) fn check_payload(&self, src_len: usize) -> Result<()> {
        if src_len as u64 > self.slot_len {
            return Err(StoreErr::CapacityExceeded {
                tier: self.tier,
                reason: format!("payload of {src_len} bytes, slot holds {}", self.slot_len),
            });
        }
        Ok(())
    }

    /// The slot index of `offset` if it is a slot start inside the tier.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `offset`) otherwise.
    pub(crate) fn index_of(&self, offset: u64) -> Result<u64> {
        let index = slot_index(self.tier, self.slot_len, offset)?;
        if index >= self.slots {
            return Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!(
                    "{offset} is past the end of {} ({} slots of {} bytes)",
                    self.tier, self.slots, self.slot_len
                ),
            });
        }
        Ok(index)
    }

    /// Whether slot `index` is free.
    pub(crate) fn is_free(&self, index: u64) -> bool {
        index >= self.next || self.holes.contains(&index)
    }

    /// Check an in-place rewrite of `src_len` bytes at `offset`: a live slot start, and a
    /// payload that fits the slot. Shared by every backend's `rewrite_block`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming `offset` or `src`.
    pub(crate) fn check_rewrite(&self, offset: u64, src_len: usize) -> Result<()> {
        let index = self.index_of(offset)?;
        if src_len as u64 > self.slot_len {
            return Err(StoreErr::InvalidArgument {
                field: "src",
                reason: format!(
                    "{src_len} bytes, a {} slot holds {}",
                    self.tier, self.slot_len
                ),
            });
        }
        if self.is_free(index) {
            return Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("slot at {offset} in {} is free, not live", self.tier),
            });
        }
        Ok(())
    }

    /// Return the slot at `offset` to the free list.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `offset`) if `offset` is not a slot start
    /// inside the tier or the slot is already free (a double free would let two blocks
    /// share a slot).
    pub(crate) fn free(&mut self, offset: u64) -> Result<()> {
        let index = self.index_of(offset)?;
        if self.is_free(index) {
            return Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("slot at {offset} in {} is already free", self.tier),
            });
        }
        self.holes.insert(index);
        // Trim free slots off the end of the used prefix back into the tail.
        while self.next > 0 && self.holes.remove(&(self.next - 1)) {
            self.next -= 1;
        }
        Ok(())
    }

    /// Make exactly the slots in `live` (indices, validated by [`check_live`]) live and
    /// every other slot free. Returns the slot count the tier needs: more than
    /// [`SlotAlloc::slots`] when a live slot lies beyond the end, in which case the caller
    /// must extend the medium with zeros to that many slots.
    pub(crate) fn reset(&mut self, live: &[u64]) -> u64 {
        self.next = live.last().map_or(0, |&i| i + 1);
        self.slots = self.slots.max(self.next);
        // `live` is sorted and unique: the holes are the gaps, found by one merge walk
        // (BTreeSet bulk-builds from a sorted iterator).
        let mut it = live.iter().copied().peekable();
        self.holes = (0..self.next)
            .filter(|i| {
                if it.peek() == Some(i) {
                    it.next();
                    false
                } else {
                    true
                }
            })
            .collect();
        self.slots
    }
}

/// The slot index of `offset` in a tier of `slot_len`-byte slots, without an upper bound
/// other than [`MAX_TIER_BYTES`].
///
/// # Errors
/// [`StoreErr::InvalidArgument`] (field `offset`) if `offset` is not a multiple of the
/// slot length or its slot would end past [`MAX_TIER_BYTES`].
pub(crate) fn slot_index(tier: Tier, slot_len: u64, offset: u64) -> Result<u64> {
    if !offset.is_multiple_of(slot_len) {
        return Err(StoreErr::InvalidArgument {
            field: "offset",
            reason: format!("{offset} is not a slot start in {tier} (slot length {slot_len})"),
        });
    }
    if offset.saturating_add(slot_len) > MAX_TIER_BYTES {
        return Err(StoreErr::InvalidArgument {
            field: "offset",
            reason: format!("{offset} is beyond the largest tier ({MAX_TIER_BYTES} bytes)"),
        });
    }
    Ok(offset / slot_len)
}

/// Check a read of `len` bytes at `offset` against the geometry: `offset` a slot start,
/// `len` at most one slot. Returns the slot index (not yet checked against the tier's
/// end, which the caller does under its own lock).
///
/// # Errors
/// [`StoreErr::InvalidArgument`] naming `offset` or `len`.
pub(crate) fn check_read(tier: Tier, slot_len: u64, offset: u64, len: u32) -> Result<u64> {
    if u64::from(len) > slot_len {
        return Err(StoreErr::InvalidArgument {
            field: "len",
            reason: format!("{len} bytes is longer than a {tier} slot ({slot_len} bytes)"),
        });
    }
    slot_index(tier, slot_len, offset)
}

/// Split `live` into per-tier sets of slot indices, validating every entry.
///
/// # Errors
/// [`StoreErr::InvalidArgument`] (field `live`) naming the first entry that is not a slot
/// start, lies beyond [`MAX_TIER_BYTES`], or repeats an earlier entry.
pub(crate) fn check_live(
    slot_lens: [u64; 4],
    live: &mut dyn Iterator<Item = (Tier, u64)>,
) -> Result<[Vec<u64>; 4]> {
    let mut sets: [Vec<u64>; 4] = Default::default();
    for (tier, offset) in live {
        let i = tier.index();
        let index =
            slot_index(tier, slot_lens[i], offset).map_err(|e| StoreErr::InvalidArgument {
                field: "live",
                reason: format!("entry ({tier}, {offset}): {e}"),
            })?;
        sets[i].push(index);
    }
    // Sorting once beats a BTreeSet insert per live block (replay hands them over in
    // hash order).
    for (i, set) in sets.iter_mut().enumerate() {
        set.sort_unstable();
        if let Some(w) = set.windows(2).find(|w| w[0] == w[1]) {
            let tier = Tier::ALL[i];
            return Err(StoreErr::InvalidArgument {
                field: "live",
                reason: format!("slot at {} in {tier} is listed twice", w[0] * slot_lens[i]),
            });
        }
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_slot_first() {
        let mut a = SlotAlloc::new(Tier::Tier1, 100, 0);
        assert_eq!(a.pop_free(), None);
        a.add_slots(3).unwrap();
        assert_eq!(a.pop_free(), Some(0));
        assert_eq!(a.pop_free(), Some(1));
        assert_eq!(a.pop_free(), Some(2));
        a.free(200).unwrap();
        a.free(0).unwrap();
        assert_eq!(a.pop_free(), Some(0));
        assert!(a.free(0).is_ok());
        assert!(a.free(0).is_err(), "double free");
        assert!(a.free(50).is_err(), "not a slot start");
        assert!(a.free(300).is_err(), "past the end");
    }

    #[test]
    fn reset_extends_past_the_end() {
        let mut a = SlotAlloc::new(Tier::Tier0, 10, 4);
        let sets = check_live(
            [10, 1, 1, 1],
            &mut [(Tier::Tier0, 10), (Tier::Tier0, 60)].into_iter(),
        )
        .unwrap();
        assert_eq!(a.reset(&sets[0]), 7);
        assert_eq!(a.free_slots(), 5);
        let order: Vec<_> = std::iter::from_fn(|| a.pop_free()).collect();
        assert_eq!(order, vec![0, 2, 3, 4, 5]);
        let sets = check_live([10, 1, 1, 1], &mut [(Tier::Tier0, 10)].into_iter()).unwrap();
        assert_eq!(a.reset(&sets[0]), 7, "a reset never shrinks the tier");
        assert_eq!(a.free_slots(), 6);
        assert!(check_live([10, 1, 1, 1], &mut [(Tier::Tier0, 5)].into_iter()).is_err());
        assert!(check_live(
            [10, 1, 1, 1],
            &mut [(Tier::Tier0, 10), (Tier::Tier0, 10)].into_iter()
        )
        .is_err());
        assert!(check_live(
            [10, 1, 1, 1],
            &mut [(Tier::Tier0, MAX_TIER_BYTES)].into_iter()
        )
        .is_err());
    }

    #[test]
    fn growth_is_bounded() {
        let mut a = SlotAlloc::new(Tier::Tier0, 1 << 20, 0);
        assert!(a.add_slots(1 << 20).is_ok());
        assert!(matches!(
            a.add_slots(1),
            Err(StoreErr::CapacityExceeded { .. })
        ));
        assert!(check_read(Tier::Tier0, 16, 0, 17).is_err());
        assert_eq!(check_read(Tier::Tier0, 16, 32, 16).unwrap(), 2);
    }
}
