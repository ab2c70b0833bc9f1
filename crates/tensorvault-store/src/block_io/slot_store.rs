//! The allocation layer shared by the local [`BlockIO`] backends: [`SlotStore`]
//! implements [`BlockIO`] once (allocation, capacity checks, growth, the undo of a failed
//! write, in-place rewrite checks, frees, [`BlockIO::reset_allocation`]) over a small
//! per-backend byte layer, a [`TierMedium`] per tier (a file, a buffer).
//!
//! A tier is a row of allocation units: worst-case slots (`slots.rs`, lowest free slot
//! first), or with extent allocation units of `slot_align` bytes of which a block takes
//! as many as its payload needs (`extents.rs`, best fit).
//!
//! Locking: each tier has one allocator mutex, held by a writer for the whole of a write,
//! rewrite, free or reset, so a medium's mutating methods never run concurrently for the
//! same tier. [`TierMedium::read_at`] runs without that lock (readers never wait for a
//! writer's I/O), so a medium publishes grown units to readers only once they exist.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::extents::{self, ExtentAlloc};
use super::slots::{self, SlotAlloc};
use super::{BlockIO, TierUsage};
use crate::error::{Result, StoreErr};
use crate::types::{BlockKey, Tier};

/// The bytes under one tier's units. Unit `i` spans bytes `i * unit .. (i + 1) * unit`;
/// the allocation layer hands in only ranges it has checked, and calls every method but
/// [`TierMedium::read_at`] with the tier's allocator lock held.
pub(crate) trait TierMedium: Send + Sync {
    /// How many units to add when the tier holding `units` units needs more (the layer
    /// adds at least what the write needs and clamps to the tier's maximum size).
    fn grow_step(&self, units: u64) -> u64;

    /// Make the medium hold at least `units` whole units (the new ones reading as zeros)
    /// and make them readable.
    ///
    /// # Errors
    /// [`StoreErr::Io`] if the medium cannot grow; [`StoreErr::CapacityExceeded`] if it
    /// cannot be that large on this platform.
    fn extend_to(&self, units: u64) -> Result<()>;

    /// Copy `src` to byte `offset`, the start of a slot or extent inside the medium.
    ///
    /// # Errors
    /// [`StoreErr::Io`] (the layer then hands the slot or extent back).
    fn write_at(&self, offset: u64, src: &[u8]) -> Result<()>;

    /// Call `f` with the `len` bytes at `offset`, which end inside unit `end - 1`.
    /// Returns `false`, without calling `f`, if those units are not readable (they lie
    /// beyond the medium's end).
    fn read_at(&self, end: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool;

    /// After a free: the unit count to cut the medium down to, given that `used` of its
    /// `units` units reach up to the end of the last live block; `None` keeps its length.
    fn shrink_target(&self, used: u64, units: u64) -> Option<u64> {
        let _ = (used, units);
        None
    }

    /// Cut the medium down to `units` units (every unit cut is free, and no reader is
    /// using one).
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the medium then keeps its length and every unit stays readable
    /// (the layer logs the error and keeps the units).
    fn shrink_to(&self, units: u64) -> Result<()> {
        let _ = units;
        Ok(())
    }

    /// Give the storage of the `len` freed bytes at `offset` back (best effort: they
    /// keep their place and read as anything until reused).
    fn release(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// Make every change so far durable.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the changes stay pending, so the next sync tries again.
    fn sync(&self) -> Result<()>;

    /// The medium's `(bytes, allocated_bytes)` for [`TierUsage`], or `None` to report the
    /// span of the units for both.
    fn size(&self) -> Option<(u64, u64)> {
        None
    }
}

/// The page size freed extents are given back in (what hole punching works on).
const RELEASE_PAGE: u64 = 4096;

/// One tier's allocator: fixed slots or extents.
enum Alloc {
    Slots(SlotAlloc),
    Extents(ExtentAlloc),
}

impl Alloc {
    fn units(&self) -> u64 {
        match self {
            Self::Slots(a) => a.slots(),
            Self::Extents(a) => a.units(),
        }
    }

    fn max_units(&self) -> u64 {
        match self {
            Self::Slots(a) => a.max_slots(),
            Self::Extents(a) => a.max_units(),
        }
    }

    fn add_units(&mut self, n: u64) -> Result<()> {
        match self {
            Self::Slots(a) => a.add_slots(n),
            Self::Extents(a) => a.add_units(n),
        }
    }

    fn free_tail(&self) -> u64 {
        match self {
            Self::Slots(a) => a.free_tail(),
            Self::Extents(a) => a.free_tail(),
        }
    }

    fn shrink_to(&mut self, units: u64) {
        match self {
            Self::Slots(a) => a.shrink_to(units),
            Self::Extents(a) => a.shrink_to(units),
        }
    }

    fn full(&self) -> StoreErr {
        match self {
            Self::Slots(a) => a.full(),
            Self::Extents(a) => a.full(),
        }
    }

    fn check_payload(&self, len: usize) -> Result<()> {
        match self {
            Self::Slots(a) => a.check_payload(len),
            Self::Extents(a) => a.check_payload(len),
        }
    }

    /// Units a payload of `len` bytes needs.
    fn units_of(&self, len: usize) -> u64 {
        match self {
            Self::Slots(_) => 1,
            Self::Extents(a) => a.units_of(len as u64),
        }
    }

    /// Units the tail lacks for `n` units.
    fn tail_shortfall(&self, n: u64) -> u64 {
        match self {
            Self::Slots(a) => n.saturating_sub(a.free_tail()),
            Self::Extents(a) => a.tail_shortfall(n),
        }
    }

    /// Take `n` units; the start unit.
    fn alloc(&mut self, n: u64) -> Option<u64> {
        match self {
            Self::Slots(a) => a.pop_free(),
            Self::Extents(a) => a.alloc(n),
        }
    }

    /// Free the slot or extent at byte `offset`; the byte range whose storage may go
    /// back: the slot, or the pages of the extent that lie wholly inside the free run it
    /// joined (a page it shared with a free neighbour goes too, one shared with a live
    /// neighbour stays).
    fn free(&mut self, offset: u64, unit: u64) -> Result<(u64, u64)> {
        match self {
            Self::Slots(a) => a.free(offset).map(|()| (offset, offset + unit)),
            Self::Extents(a) => {
                let (end, run_start, run_end) = a.free(offset)?;
                let lo = (offset / RELEASE_PAGE * RELEASE_PAGE).max(run_start);
                let hi = end
                    .div_ceil(RELEASE_PAGE)
                    .saturating_mul(RELEASE_PAGE)
                    .min(run_end);
                Ok((lo, hi.max(lo)))
            }
        }
    }

    fn check_rewrite(&self, offset: u64, len: usize) -> Result<()> {
        match self {
            Self::Slots(a) => a.check_rewrite(offset, len),
            Self::Extents(a) => a.check_rewrite(offset, len),
        }
    }

    /// `(free units, live bytes)` for [`TierUsage`].
    fn occupancy(&self, unit: u64) -> (u64, u64) {
        match self {
            Self::Slots(a) => (a.free_slots(), (a.slots() - a.free_slots()) * unit),
            Self::Extents(a) => (a.free_units(), (a.units() - a.free_units()) * unit),
        }
    }
}

/// One tier: its allocator and its medium. Lock order: `alloc`, then the medium's own.
struct SlotTier<M> {
    /// Allocation unit in bytes (at least 1): the slot length, or `slot_align`.
    unit: u64,
    /// Worst-case slot length (reported by [`BlockIO::slot_len`]).
    slot_len: u32,
    /// Longest payload a block may have.
    max_len: u64,
    /// Whether blocks take extents.
    extents: bool,
    /// Free list and unit count; held by writers for the whole operation.
    alloc: Mutex<Alloc>,
    medium: M,
}

impl<M> SlotTier<M> {
    fn lock(&self) -> MutexGuard<'_, Alloc> {
        // The allocator is updated by single assignments that cannot be torn by a panic.
        self.alloc.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Four tiers of slots or extents over media `M`; implements [`BlockIO`].
pub(crate) struct SlotStore<M> {
    tiers: [SlotTier<M>; 4],
}

/// One tier's medium and geometry, for [`SlotStore::new`].
pub(crate) struct TierSetup<M> {
    /// The medium.
    pub(crate) medium: M,
    /// Slot length from the collection's geometry (0 is treated as 1).
    pub(crate) slot_len: u32,
    /// Extent allocation: `Some((unit, max_len))` (`slot_align` and the tier's cap), else
    /// every block takes one slot.
    pub(crate) extents: Option<(u32, u32)>,
    /// Whole units the medium holds now (clamped to the largest tier).
    pub(crate) units: u64,
}

/// The allocation unit and longest payload of `tier` in `geometry`, as
/// [`TierSetup::extents`] wants them.
pub(crate) fn extents_of(
    geometry: &crate::config::CollectionConfig,
    tier: Tier,
) -> Option<(u32, u32)> {
    geometry
        .extents
        .then(|| (geometry.alloc_unit(tier), geometry.max_block_len(tier)))
}

impl<M: TierMedium> SlotStore<M> {
    /// Tiers over `setup` (indexed by [`Tier::index`]), every unit free: the store calls
    /// [`BlockIO::reset_allocation`] with the live blocks after its replay.
    pub(crate) fn new(setup: [TierSetup<M>; 4]) -> Self {
        let mut i = 0;
        let tiers = setup.map(|s| {
            let tier = Tier::ALL[i];
            i += 1;
            let slot = slots::slot_bytes(s.slot_len);
            let (unit, max_len, alloc) = match s.extents {
                Some((unit, max_len)) => (
                    slots::slot_bytes(unit),
                    u64::from(max_len.max(1)),
                    Alloc::Extents(ExtentAlloc::new(tier, unit, max_len, s.units)),
                ),
                None => (
                    slot,
                    slot,
                    Alloc::Slots(SlotAlloc::new(tier, s.slot_len, s.units)),
                ),
            };
            SlotTier {
                unit,
                slot_len: slot as u32,
                max_len,
                extents: s.extents.is_some(),
                alloc: Mutex::new(alloc),
                medium: s.medium,
            }
        });
        Self { tiers }
    }

    /// The medium of `tier`.
    pub(crate) fn medium(&self, tier: Tier) -> &M {
        &self.tier(tier).medium
    }

    /// Every tier's medium, in tier order.
    pub(crate) fn media_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.tiers.iter_mut().map(|t| &mut t.medium)
    }

    fn tier(&self, tier: Tier) -> &SlotTier<M> {
        &self.tiers[tier.index()]
    }

    /// Grow `t` by one step of its medium, and at least by `need` units; caller holds
    /// `alloc`.
    fn grow(t: &SlotTier<M>, alloc: &mut Alloc, need: u64) -> Result<()> {
        let room = alloc.max_units() - alloc.units();
        let step = t.medium.grow_step(alloc.units()).max(need).min(room);
        if step == 0 || step < need {
            return Err(alloc.full());
        }
        t.medium.extend_to(alloc.units() + step)?;
        alloc.add_units(step)
    }

    /// Check a read of `len` bytes at `offset`: the unit just past it.
    fn check_read(t: &SlotTier<M>, tier: Tier, offset: u64, len: u32) -> Result<u64> {
        if t.extents {
            extents::check_read(tier, t.unit, t.max_len, offset, len)
        } else {
            slots::check_read(tier, t.unit, offset, len).map(|i| i + 1)
        }
    }
}

impl<M: TierMedium> BlockIO for SlotStore<M> {
    fn slot_len(&self, tier: Tier) -> u32 {
        self.tier(tier).slot_len
    }

    fn max_block_len(&self, tier: Tier) -> u32 {
        // At most a `u32` (the geometry's cap, or the slot length).
        self.tier(tier).max_len as u32
    }

    fn write_block(&self, tier: Tier, _key: BlockKey, src: &[u8]) -> Result<(u64, u32)> {
        let t = self.tier(tier);
        let mut alloc = t.lock();
        alloc.check_payload(src.len())?;
        let n = alloc.units_of(src.len());
        let start = match alloc.alloc(n) {
            Some(i) => i,
            None => {
                let need = alloc.tail_shortfall(n);
                Self::grow(t, &mut alloc, need)?;
                alloc.alloc(n).ok_or_else(|| alloc.full())?
            }
        };
        let offset = start * t.unit;
        if let Err(e) = t.medium.write_at(offset, src) {
            // The slot or extent never became live: hand it back (it is live in the
            // allocator now, so this cannot fail).
            let _ = alloc.free(offset, t.unit);
            return Err(e);
        }
        // At most the tier's cap (a u32), checked above.
        Ok((offset, src.len() as u32))
    }

    fn rewrite_block(&self, tier: Tier, offset: u64, src: &[u8]) -> Result<()> {
        let t = self.tier(tier);
        let alloc = t.lock();
        alloc.check_rewrite(offset, src.len())?;
        t.medium.write_at(offset, src)
    }

    fn with_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let t = self.tier(tier);
        let end = Self::check_read(t, tier, offset, len)?;
        if t.medium.read_at(end, offset, len as usize, f) {
            Ok(())
        } else {
            Err(StoreErr::NotFound {
                key,
                tier: Some(tier),
            })
        }
    }

    fn free_block(&self, tier: Tier, offset: u64) -> Result<()> {
        let t = self.tier(tier);
        let mut alloc = t.lock();
        let (start, end) = alloc.free(offset, t.unit)?;
        let used = alloc.units() - alloc.free_tail();
        if let Some(keep) = t.medium.shrink_target(used, alloc.units()) {
            // Best effort, like `release`: the block's bytes are free either way (and
            // `BlockIO::free_block` fails only for a bad offset); a failed cut keeps the
            // tail, costing space until a later free cuts it.
            match t.medium.shrink_to(keep) {
                Ok(()) => alloc.shrink_to(keep),
                Err(e) => tracing::warn!(%tier, error = %e, "cannot cut the free tail"),
            }
        }
        let end = end.min(alloc.units() * t.unit);
        if end > start {
            t.medium.release(start, end - start);
        }
        Ok(())
    }

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64, u32)>) -> Result<()> {
        if self.tiers.iter().any(|t| t.extents) {
            let units = Tier::ALL.map(|t| self.tier(t).unit);
            let caps = Tier::ALL.map(|t| self.tier(t).max_len);
            let sets = extents::check_live(units, caps, live)?;
            for tier in Tier::ALL {
                let t = self.tier(tier);
                let set = &sets[tier.index()];
                let mut alloc = t.lock();
                let needed = set.last().map_or(0, |&(s, n)| s + n);
                if needed > alloc.units() {
                    t.medium.extend_to(needed)?;
                }
                if let Alloc::Extents(a) = &mut *alloc {
                    a.reset(set);
                }
            }
            return Ok(());
        }
        let lens = Tier::ALL.map(|t| self.tier(t).unit);
        let sets = slots::check_live(lens, &mut live.map(|(t, o, _)| (t, o)))?;
        for tier in Tier::ALL {
            let t = self.tier(tier);
            let set = &sets[tier.index()];
            let mut alloc = t.lock();
            let needed = set.last().map_or(0, |&i| i + 1);
            if needed > alloc.units() {
                t.medium.extend_to(needed)?;
            }
            if let Alloc::Slots(a) = &mut *alloc {
                a.reset(set);
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.tiers.iter().try_for_each(|t| t.medium.sync())
    }

    fn usage(&self, tier: Tier) -> TierUsage {
        let t = self.tier(tier);
        let alloc = t.lock();
        let span = alloc.units() * t.unit;
        let (bytes, allocated_bytes) = t.medium.size().unwrap_or((span, span));
        let (free, live_bytes) = alloc.occupancy(t.unit);
        TierUsage {
            slot_len: t.slot_len,
            alloc_unit: t.unit as u32,
            slots: alloc.units(),
            free_slots: free,
            live_bytes,
            bytes,
            allocated_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    const LEN: u64 = 8;

    /// A medium in a `Vec` that grows by two slots, cuts a free tail of three or more
    /// slots, records releases and fails writes or cuts on demand.
    #[derive(Default)]
    struct Fake {
        data: Mutex<Vec<u8>>,
        fail_write: AtomicBool,
        fail_shrink: AtomicBool,
        released: Mutex<Vec<u64>>,
    }

    fn boom(op: &'static str) -> StoreErr {
        StoreErr::io(op, "fake", std::io::Error::other("injected"))
    }

    impl TierMedium for Fake {
        fn grow_step(&self, _slots: u64) -> u64 {
            2
        }

        fn extend_to(&self, slots: u64) -> Result<()> {
            let mut d = self.data.lock().unwrap();
            let len = (slots * LEN) as usize;
            if d.len() < len {
                d.resize(len, 0);
            }
            Ok(())
        }

        fn write_at(&self, offset: u64, src: &[u8]) -> Result<()> {
            if self.fail_write.load(Ordering::Relaxed) {
                return Err(boom("write"));
            }
            let at = offset as usize;
            self.data.lock().unwrap()[at..at + src.len()].copy_from_slice(src);
            Ok(())
        }

        fn read_at(&self, _end: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
            let d = self.data.lock().unwrap();
            let at = offset as usize;
            d.get(at..at + len).map(f).is_some()
        }

        fn shrink_target(&self, used: u64, slots: u64) -> Option<u64> {
            (slots - used >= 3).then_some(used)
        }

        fn shrink_to(&self, slots: u64) -> Result<()> {
            if self.fail_shrink.load(Ordering::Relaxed) {
                return Err(boom("truncate"));
            }
            self.data.lock().unwrap().truncate((slots * LEN) as usize);
            Ok(())
        }

        fn release(&self, offset: u64, len: u64) {
            assert_eq!(len, LEN, "a whole slot");
            self.released.lock().unwrap().push(offset);
        }

        fn sync(&self) -> Result<()> {
            Ok(())
        }
    }

    fn store() -> SlotStore<Fake> {
        SlotStore::new([(); 4].map(|()| TierSetup {
            medium: Fake::default(),
            slot_len: LEN as u32,
            extents: None,
            units: 0,
        }))
    }

    const T: Tier = Tier::Tier0;
    const KEY: BlockKey = BlockKey {
        tensor_id: 1,
        block_index: 0,
    };

    fn read(s: &SlotStore<Fake>, offset: u64, len: u32) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        s.with_block(T, KEY, offset, len, &mut |b| out = b.to_vec())?;
        Ok(out)
    }

    #[test]
    fn a_failed_write_hands_its_slot_back() {
        let s = store();
        assert_eq!(s.write_block(T, KEY, b"a").unwrap(), (0, 1));
        s.medium(T).fail_write.store(true, Ordering::Relaxed);
        assert!(matches!(
            s.write_block(T, KEY, b"b"),
            Err(StoreErr::Io { .. })
        ));
        assert_eq!(
            s.usage(T).free_slots,
            1,
            "the failed write's slot is free again"
        );
        s.medium(T).fail_write.store(false, Ordering::Relaxed);
        assert_eq!(s.write_block(T, KEY, b"cc").unwrap(), (LEN, 2));
        assert_eq!(read(&s, LEN, 2).unwrap(), b"cc");
        assert!(matches!(
            s.write_block(T, KEY, &[0; LEN as usize + 1]),
            Err(StoreErr::CapacityExceeded { .. })
        ));
        assert!(s.rewrite_block(T, 2 * LEN, b"x").is_err(), "past the end");
        s.rewrite_block(T, 0, b"z").unwrap();
        assert_eq!(read(&s, 0, 1).unwrap(), b"z");
    }

    #[test]
    fn frees_release_inner_slots_and_cut_the_tail() {
        let s = store();
        for i in 0..6 {
            assert_eq!(s.write_block(T, KEY, &[i as u8]).unwrap().0, i * LEN);
        }
        for i in [2, 5, 4] {
            s.free_block(T, i * LEN).unwrap();
        }
        assert_eq!(
            *s.medium(T).released.lock().unwrap(),
            [2 * LEN, 5 * LEN, 4 * LEN]
        );
        assert_eq!(s.usage(T).slots, 6);
        // Freeing slot 3 leaves slots 2.. free: the tail is cut to the two live slots and
        // nothing more is released (slot 3 is gone).
        s.free_block(T, 3 * LEN).unwrap();
        assert_eq!(s.medium(T).released.lock().unwrap().len(), 3);
        assert_eq!(s.usage(T).slots, 2);
        assert_eq!(s.medium(T).data.lock().unwrap().len(), 2 * LEN as usize);
        assert!(matches!(
            read(&s, 3 * LEN, 1),
            Err(StoreErr::NotFound { .. })
        ));
        assert!(s.free_block(T, 3 * LEN).is_err(), "cut slots are gone");
        assert!(s.free_block(T, LEN).is_ok());
        assert!(s.free_block(T, LEN).is_err(), "double free");
    }

    #[test]
    fn a_failed_cut_keeps_every_slot() {
        let s = store();
        for i in 0..4 {
            s.write_block(T, KEY, &[i]).unwrap();
        }
        s.medium(T).fail_shrink.store(true, Ordering::Relaxed);
        for i in [3, 2] {
            s.free_block(T, i * LEN).unwrap();
        }
        s.free_block(T, LEN).unwrap();
        assert_eq!(s.usage(T).slots, 4);
        assert_eq!(s.usage(T).free_slots, 3);
        assert_eq!(s.write_block(T, KEY, b"n").unwrap().0, LEN);
        assert_eq!(read(&s, LEN, 1).unwrap(), b"n");
    }

    #[test]
    fn reset_names_the_live_slots_and_extends_the_medium() {
        let s = store();
        s.write_block(T, KEY, b"a").unwrap();
        s.reset_allocation(&mut [(T, 4 * LEN, 1), (Tier::Tier2, 0, 1)].into_iter())
            .unwrap();
        assert_eq!(s.usage(T).slots, 5);
        assert_eq!(s.usage(T).free_slots, 4);
        assert_eq!(read(&s, 4 * LEN, 2).unwrap(), [0, 0], "extended with zeros");
        assert_eq!(
            s.write_block(T, KEY, b"b").unwrap().0,
            0,
            "slot 0 is free now"
        );
        assert!(s
            .reset_allocation(&mut [(T, 0, 1), (T, 0, 1)].into_iter())
            .is_err());
        assert!(s.reset_allocation(&mut [(T, 3, 1)].into_iter()).is_err());
    }
}
