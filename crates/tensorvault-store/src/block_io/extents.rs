//! The extent allocator of collections with payload-sized allocation
//! ([`crate::CollectionConfig::extents`]): a tier is a row of `units` allocation units of
//! `unit` bytes (the collection's `slot_align`), and a block takes `ceil(len / unit)`
//! contiguous units (an extent) instead of one worst-case slot.
//!
//! Policy: **best fit** over the free runs below the end of the last live extent (the
//! smallest run that holds the extent, lowest address among equals), else the free tail.
//! Best fit keeps the large runs whole for the large blocks (a Tier0 block next to 3-bit
//! ones), splits a run only where it must, and with the sizes of a KV workload (a few
//! fixed lengths per tier, entropy-coded ones spread over a few percent) leaves little
//! unusable space (measured in `bench/RESULTS.md`, "Session 11: store-extents"). Runs
//! coalesce on free, and a run that reaches the end of the live prefix goes back to the
//! tail, so the truncation rules of the slot layer apply unchanged. Both lookups are
//! `O(log n)`: a map by address (to coalesce and to check frees) and a set by
//! `(length, address)` (to pick).
//!
//! Nothing here is persisted: after replay the store hands every live `(offset, len)` to
//! [`ExtentAlloc::reset`], which refuses overlaps, and every gap becomes a free run. Live
//! extents are kept by start so a free needs only the offset (as with slots) and a free of
//! anything but a live extent's start is refused.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Result, StoreErr};
use crate::types::Tier;

use super::slots::MAX_TIER_BYTES;

/// Free-extent bookkeeping of one tier. All positions and lengths are in units.
#[derive(Debug)]
pub(crate) struct ExtentAlloc {
    tier: Tier,
    unit: u64,
    /// Longest payload in bytes (the tier's cap).
    max_len: u64,
    /// Units in the tier (live + free).
    units: u64,
    /// Units `next..units` are free (the tail).
    next: u64,
    /// Free runs below `next`: start -> length.
    free: BTreeMap<u64, u64>,
    /// The same runs by `(length, start)`, for best fit.
    by_len: BTreeSet<(u64, u64)>,
    /// Live extents: start -> length.
    live: BTreeMap<u64, u64>,
}

impl ExtentAlloc {
    /// An allocator for a tier of `units` units of `unit` bytes, all free, taking
    /// payloads of up to `max_len` bytes.
    pub(crate) fn new(tier: Tier, unit: u32, max_len: u32, units: u64) -> Self {
        let unit = u64::from(unit.max(1));
        Self {
            tier,
            unit,
            max_len: u64::from(max_len.max(1)),
            units: units.min(MAX_TIER_BYTES / unit),
            next: 0,
            free: BTreeMap::new(),
            by_len: BTreeSet::new(),
            live: BTreeMap::new(),
        }
    }

    /// Units in the tier.
    pub(crate) fn units(&self) -> u64 {
        self.units
    }

    /// Most units the tier may ever hold.
    pub(crate) fn max_units(&self) -> u64 {
        MAX_TIER_BYTES / self.unit
    }

    /// Free units (runs and tail).
    pub(crate) fn free_units(&self) -> u64 {
        self.free.values().sum::<u64>() + (self.units - self.next)
    }

    /// Free units at the end of the tier (after the last live extent).
    pub(crate) fn free_tail(&self) -> u64 {
        self.units - self.next
    }

    /// Units of `len` payload bytes.
    pub(crate) fn units_of(&self, len: u64) -> u64 {
        len.max(1).div_ceil(self.unit)
    }

    /// The error for a tier that cannot grow any more.
    pub(crate) fn full(&self) -> StoreErr {
        StoreErr::CapacityExceeded {
            tier: self.tier,
            reason: format!("the tier file may not exceed {MAX_TIER_BYTES} bytes"),
        }
    }

    /// Check that a payload of `src_len` bytes is within the tier's cap.
    ///
    /// # Errors
    /// [`StoreErr::CapacityExceeded`] if it is not.
    pub(crate) fn check_payload(&self, src_len: usize) -> Result<()> {
        if src_len as u64 > self.max_len {
            return Err(StoreErr::CapacityExceeded {
                tier: self.tier,
                reason: format!(
                    "payload of {src_len} bytes, a {} block may hold {}",
                    self.tier, self.max_len
                ),
            });
        }
        Ok(())
    }

    /// Units the tail lacks for an extent of `n` units (0 if it fits now).
    pub(crate) fn tail_shortfall(&self, n: u64) -> u64 {
        n.saturating_sub(self.units - self.next)
    }

    /// Record that the medium grew by `n` units, all free.
    ///
    /// # Errors
    /// [`StoreErr::CapacityExceeded`] past [`MAX_TIER_BYTES`].
    pub(crate) fn add_units(&mut self, n: u64) -> Result<()> {
        match self.units.checked_add(n).filter(|&u| u <= self.max_units()) {
            Some(u) => {
                self.units = u;
                Ok(())
            }
            None => Err(self.full()),
        }
    }

    /// Record that the medium shrank to `units` (clamped to keep every live extent).
    pub(crate) fn shrink_to(&mut self, units: u64) {
        self.units = units.max(self.next).min(self.units);
    }

    /// Take an extent of `n` units (best fit, else the tail); returns its start, `None`
    /// when nothing fits without growing.
    pub(crate) fn alloc(&mut self, n: u64) -> Option<u64> {
        let n = n.max(1);
        let start = if let Some(&(len, start)) = self.by_len.range((n, 0)..).next() {
            self.take_run(start, len);
            if len > n {
                self.put_run(start + n, len - n);
            }
            start
        } else if self.units - self.next >= n {
            self.next += n;
            self.next - n
        } else {
            return None;
        };
        self.live.insert(start, n);
        Some(start)
    }

    fn take_run(&mut self, start: u64, len: u64) {
        self.free.remove(&start);
        self.by_len.remove(&(len, start));
    }

    fn put_run(&mut self, start: u64, len: u64) {
        self.free.insert(start, len);
        self.by_len.insert((len, start));
    }

    /// The live extent starting at byte `offset`: `(start unit, units)`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `offset`) if no live extent starts there.
    pub(crate) fn live_at(&self, offset: u64) -> Result<(u64, u64)> {
        let start = offset / self.unit;
        match self.live.get(&start) {
            Some(&n) if offset.is_multiple_of(self.unit) => Ok((start, n)),
            _ => Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("no live extent starts at {offset} in {}", self.tier),
            }),
        }
    }

    /// Check an in-place rewrite of `src_len` bytes at `offset`: a live extent's start
    /// and a payload that fits it.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming `offset` or `src`.
    pub(crate) fn check_rewrite(&self, offset: u64, src_len: usize) -> Result<()> {
        let (_, n) = self.live_at(offset)?;
        if src_len as u64 > n * self.unit {
            return Err(StoreErr::InvalidArgument {
                field: "src",
                reason: format!(
                    "{src_len} bytes, the extent at {offset} in {} holds {}",
                    self.tier,
                    n * self.unit
                ),
            });
        }
        Ok(())
    }

    /// Free the live extent at byte `offset`, coalescing with its free neighbours;
    /// returns `(extent end, run start, run end)` in bytes: the end of the freed extent
    /// and the free run it is now part of (the caller gives back the pages of the extent
    /// that lie wholly inside the run, including those it shared with a free neighbour).
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `offset`) if no live extent starts there
    /// (a double free, or a bad offset).
    pub(crate) fn free(&mut self, offset: u64) -> Result<(u64, u64, u64)> {
        let (start, n) = self.live_at(offset)?;
        self.live.remove(&start);
        let (mut s, mut e) = (start, start + n);
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.take_run(ps, pl);
                s = ps;
            }
        }
        if let Some(&nl) = self.free.get(&e) {
            self.take_run(e, nl);
            e += nl;
        }
        if e >= self.next {
            self.next = s;
        } else {
            self.put_run(s, e - s);
        }
        Ok(((start + n) * self.unit, s * self.unit, e * self.unit))
    }

    /// Make exactly `live` (sorted `(start unit, units)`, validated by [`check_live`])
    /// live and every other unit free. Returns the units the tier needs: more than
    /// [`ExtentAlloc::units`] when an extent lies past the end (the caller extends the
    /// medium with zeros).
    pub(crate) fn reset(&mut self, live: &[(u64, u64)]) -> u64 {
        self.free.clear();
        self.by_len.clear();
        self.live = live.iter().copied().collect();
        let mut at = 0;
        for &(s, n) in live {
            if s > at {
                self.put_run(at, s - at);
            }
            at = s + n;
        }
        self.next = at;
        self.units = self.units.max(self.next);
        self.units
    }
}

/// Check a read of `len` bytes at `offset` in a tier of `unit`-byte units whose blocks
/// may hold up to `max_len` bytes. Returns the unit just past the read (not yet checked
/// against the tier's end).
///
/// # Errors
/// [`StoreErr::InvalidArgument`] naming `offset` or `len`.
pub(crate) fn check_read(
    tier: Tier,
    unit: u64,
    max_len: u64,
    offset: u64,
    len: u32,
) -> Result<u64> {
    if u64::from(len) > max_len {
        return Err(StoreErr::InvalidArgument {
            field: "len",
            reason: format!("{len} bytes is longer than a {tier} block may be ({max_len})"),
        });
    }
    if !offset.is_multiple_of(unit) || offset.saturating_add(u64::from(len)) > MAX_TIER_BYTES {
        return Err(StoreErr::InvalidArgument {
            field: "offset",
            reason: format!("{offset} is not an extent start in {tier} (unit {unit} bytes)"),
        });
    }
    Ok((offset + u64::from(len)).div_ceil(unit))
}

/// Split `live` `(tier, offset, len)` into per-tier sorted `(start unit, units)` lists.
///
/// # Errors
/// [`StoreErr::ExtentOverlap`] for two extents sharing a unit (the later offset named);
/// [`StoreErr::InvalidArgument`] (field `live`) for an entry that is not unit-aligned,
/// is longer than its tier's cap, or lies beyond [`MAX_TIER_BYTES`].
pub(crate) fn check_live(
    units: [u64; 4],
    max_lens: [u64; 4],
    live: &mut dyn Iterator<Item = (Tier, u64, u32)>,
) -> Result<[Vec<(u64, u64)>; 4]> {
    let mut sets: [Vec<(u64, u64)>; 4] = Default::default();
    for (tier, offset, len) in live {
        let i = tier.index();
        let end = check_read(tier, units[i], max_lens[i], offset, len).map_err(|e| {
            StoreErr::InvalidArgument {
                field: "live",
                reason: format!("entry ({tier}, {offset}, {len}): {e}"),
            }
        })?;
        let start = offset / units[i];
        sets[i].push((start, end.max(start + 1) - start));
    }
    for (i, set) in sets.iter_mut().enumerate() {
        set.sort_unstable();
        if let Some(w) = set.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(StoreErr::ExtentOverlap {
                tier: Tier::ALL[i],
                offset: w[1].0 * units[i],
                other: w[0].0 * units[i],
                other_len: w[0].1 * units[i],
            });
        }
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Tier = Tier::Tier2;

    #[test]
    fn best_fit_splits_and_coalesces() {
        let mut a = ExtentAlloc::new(T, 64, 1000, 0);
        assert_eq!(a.alloc(1), None);
        a.add_units(20).unwrap();
        let s: Vec<u64> = [3, 2, 5, 1].iter().map(|&n| a.alloc(n).unwrap()).collect();
        assert_eq!(s, [0, 3, 5, 10]);
        assert_eq!(a.free(3 * 64).unwrap(), (320, 192, 320));
        assert_eq!(
            a.free(0).unwrap(),
            (192, 0, 320),
            "coalesces with the run after it"
        );
        assert_eq!(a.free_units(), 5 + 9);
        // Runs: 0..5 (5 units). A 1-unit hole at 10 after freeing it is the best fit.
        assert_eq!(a.free(10 * 64).unwrap(), (704, 640, 704));
        assert_eq!(
            a.free_tail(),
            10,
            "a free run at the end goes back to the tail"
        );
        assert_eq!(a.alloc(4), Some(0));
        assert_eq!(
            a.alloc(2),
            Some(10),
            "the 1-unit remainder at 4 is too short"
        );
        assert_eq!(a.alloc(1), Some(4));
        assert!(a.free(64).is_err(), "not a live extent start");
        assert!(a.free(4 * 64 + 1).is_err(), "not aligned");
        a.free(4 * 64).unwrap();
        assert!(a.free(4 * 64).is_err(), "double free");
    }

    #[test]
    fn reset_rebuilds_runs_and_refuses_overlaps() {
        let max = [64, 4096, 4096, 4096];
        let live = check_live(
            [64; 4],
            max,
            &mut [(T, 640, 100), (T, 64, 64), (T, 128, 1)].into_iter(),
        )
        .unwrap();
        assert_eq!(live[T.index()], [(1, 1), (2, 1), (10, 2)]);
        let mut a = ExtentAlloc::new(T, 64, 4096, 4);
        assert_eq!(a.reset(&live[T.index()]), 12);
        assert_eq!(a.free_units(), 1 + 7);
        assert_eq!(a.alloc(7), Some(3));
        assert_eq!(a.alloc(1), Some(0));
        assert_eq!(a.alloc(1), None, "no room left without growing");
        let e = check_live([64; 4], max, &mut [(T, 0, 65), (T, 64, 1)].into_iter());
        assert!(
            matches!(
                e,
                Err(StoreErr::ExtentOverlap {
                    offset: 64,
                    other: 0,
                    ..
                })
            ),
            "{e:?}"
        );
        assert!(check_live([64; 4], max, &mut [(T, 32, 1)].into_iter()).is_err());
        assert!(check_live([64; 4], max, &mut [(T, 0, 4097)].into_iter()).is_err());
        assert!(check_live([64; 4], max, &mut [(T, MAX_TIER_BYTES, 1)].into_iter()).is_err());
    }

    #[test]
    fn rewrite_fits_the_extent_and_payload_fits_the_cap() {
        let mut a = ExtentAlloc::new(T, 64, 200, 10);
        let s = a.alloc(a.units_of(130)).unwrap();
        assert!(a.check_rewrite(s * 64, 192).is_ok());
        assert!(a.check_rewrite(s * 64, 193).is_err());
        assert!(a.check_payload(200).is_ok());
        assert!(matches!(
            a.check_payload(201),
            Err(StoreErr::CapacityExceeded { .. })
        ));
        assert_eq!(check_read(T, 64, 200, 128, 100).unwrap(), 4);
        assert!(check_read(T, 64, 200, 128, 201).is_err());
        assert!(check_read(T, 64, 200, 100, 1).is_err());
    }
}
