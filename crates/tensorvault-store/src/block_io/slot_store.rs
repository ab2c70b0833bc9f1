//! The slot layer shared by the local [`BlockIO`] backends: [`SlotStore`] implements
//! [`BlockIO`] once (lowest-free-slot allocation, capacity checks, growth, the undo of a
//! failed write, in-place rewrite checks, frees, [`BlockIO::reset_allocation`]) over a
//! small per-backend byte layer, a [`TierMedium`] per tier (a file, a buffer).
//!
//! Locking: each tier has one allocator mutex, held by a writer for the whole of a write,
//! rewrite, free or reset, so a medium's mutating methods never run concurrently for the
//! same tier. [`TierMedium::read_at`] runs without that lock (readers never wait for a
//! writer's I/O), so a medium publishes grown slots to readers only once they exist.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::slots::{self, SlotAlloc};
use super::{BlockIO, TierUsage};
use crate::error::{Result, StoreErr};
use crate::types::{BlockKey, Tier};

/// The bytes under one tier's slots. Slot `i` spans bytes `i * slot_len ..
/// (i + 1) * slot_len`; the slot layer hands in only slot starts it has checked, and
/// calls every method but [`TierMedium::read_at`] with the tier's allocator lock held.
pub(crate) trait TierMedium: Send + Sync {
    /// How many slots to add when all `slots` slots of the tier are live (the slot layer
    /// clamps it to the tier's maximum size).
    fn grow_step(&self, slots: u64) -> u64;

    /// Make the medium hold at least `slots` whole slots (the new ones reading as zeros)
    /// and make them readable.
    ///
    /// # Errors
    /// [`StoreErr::Io`] if the medium cannot grow; [`StoreErr::CapacityExceeded`] if it
    /// cannot be that large on this platform.
    fn extend_to(&self, slots: u64) -> Result<()>;

    /// Copy `src` (at most one slot) to byte `offset`, a slot start inside the medium.
    ///
    /// # Errors
    /// [`StoreErr::Io`] (the slot layer then hands the slot back).
    fn write_at(&self, offset: u64, src: &[u8]) -> Result<()>;

    /// Call `f` with the `len` bytes at `offset`, the start of slot `index` (`len` at most
    /// one slot). Returns `false`, without calling `f`, if the slot is not readable (it
    /// lies beyond the medium's end).
    fn read_at(&self, index: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool;

    /// After a free: the slot count to cut the medium down to, given that `used` of its
    /// `slots` slots reach up to the last live one; `None` keeps its length.
    fn shrink_target(&self, used: u64, slots: u64) -> Option<u64> {
        let _ = (used, slots);
        None
    }

    /// Cut the medium down to `slots` slots (every slot cut is free, and no reader is
    /// using one).
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the medium then keeps its length and every slot stays readable
    /// (the slot layer logs the error and keeps the slots).
    fn shrink_to(&self, slots: u64) -> Result<()> {
        let _ = slots;
        Ok(())
    }

    /// Give the storage of the free slot at `offset` back (best effort: the slot keeps
    /// its place and reads as anything until it is reused).
    fn release(&self, offset: u64) {
        let _ = offset;
    }

    /// Make every change so far durable.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the changes stay pending, so the next sync tries again.
    fn sync(&self) -> Result<()>;

    /// The medium's `(bytes, allocated_bytes)` for [`TierUsage`], or `None` to report the
    /// span of the slots for both.
    fn size(&self) -> Option<(u64, u64)> {
        None
    }
}

/// One tier: its allocator and its medium. Lock order: `alloc`, then the medium's own.
struct SlotTier<M> {
    /// Slot length in bytes (at least 1).
    slot_len: u64,
    /// Free list and slot count; held by writers for the whole operation.
    alloc: Mutex<SlotAlloc>,
    medium: M,
}

impl<M> SlotTier<M> {
    fn lock(&self) -> MutexGuard<'_, SlotAlloc> {
        // The allocator is updated by single assignments that cannot be torn by a panic.
        self.alloc.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Four tiers of fixed-size slots over media `M`; implements [`BlockIO`].
pub(crate) struct SlotStore<M> {
    tiers: [SlotTier<M>; 4],
}

/// One tier's medium and geometry, for [`SlotStore::new`].
pub(crate) struct TierSetup<M> {
    /// The medium.
    pub(crate) medium: M,
    /// Slot length from the collection's geometry (0 is treated as 1).
    pub(crate) slot_len: u32,
    /// Whole slots the medium holds now (clamped to the largest tier).
    pub(crate) slots: u64,
}

impl<M: TierMedium> SlotStore<M> {
    /// Tiers over `setup` (indexed by [`Tier::index`]), every slot free: the store calls
    /// [`BlockIO::reset_allocation`] with the live ones after its replay.
    pub(crate) fn new(setup: [TierSetup<M>; 4]) -> Self {
        let mut i = 0;
        let tiers = setup.map(|s| {
            let tier = Tier::ALL[i];
            i += 1;
            SlotTier {
                slot_len: slots::slot_bytes(s.slot_len),
                alloc: Mutex::new(SlotAlloc::new(tier, s.slot_len, s.slots)),
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

    /// Grow `t` by one step of its medium; caller holds `alloc`.
    fn grow(t: &SlotTier<M>, alloc: &mut SlotAlloc) -> Result<()> {
        let room = alloc.max_slots() - alloc.slots();
        let step = t.medium.grow_step(alloc.slots()).min(room);
        if step == 0 {
            return Err(alloc.full());
        }
        t.medium.extend_to(alloc.slots() + step)?;
        alloc.add_slots(step)
    }
}

impl<M: TierMedium> BlockIO for SlotStore<M> {
    fn slot_len(&self, tier: Tier) -> u32 {
        // At most a `u32` slot length (or 1).
        self.tier(tier).slot_len as u32
    }

    fn write_block(&self, tier: Tier, _key: BlockKey, src: &[u8]) -> Result<(u64, u32)> {
        let t = self.tier(tier);
        let mut alloc = t.lock();
        alloc.check_payload(src.len())?;
        let index = match alloc.pop_free() {
            Some(i) => i,
            None => {
                Self::grow(t, &mut alloc)?;
                alloc.pop_free().ok_or_else(|| alloc.full())?
            }
        };
        let offset = index * t.slot_len;
        if let Err(e) = t.medium.write_at(offset, src) {
            // The slot never became live: hand it back (it is live in the allocator now,
            // so this cannot fail).
            let _ = alloc.free(offset);
            return Err(e);
        }
        // At most one slot, checked above.
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
        let index = slots::check_read(tier, t.slot_len, offset, len)?;
        if t.medium.read_at(index, offset, len as usize, f) {
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
        alloc.free(offset)?;
        let used = alloc.slots() - alloc.free_tail();
        if let Some(keep) = t.medium.shrink_target(used, alloc.slots()) {
            // Best effort, like `release`: the slot is free either way (and
            // `BlockIO::free_block` fails only for a bad offset); a failed cut keeps the
            // tail, costing space until a later free cuts it.
            match t.medium.shrink_to(keep) {
                Ok(()) => alloc.shrink_to(keep),
                Err(e) => tracing::warn!(%tier, error = %e, "cannot cut the free tail"),
            }
        }
        if offset / t.slot_len < alloc.slots() {
            t.medium.release(offset);
        }
        Ok(())
    }

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64)>) -> Result<()> {
        let lens = Tier::ALL.map(|t| self.tier(t).slot_len);
        let sets = slots::check_live(lens, live)?;
        for tier in Tier::ALL {
            let t = self.tier(tier);
            let set = &sets[tier.index()];
            let mut alloc = t.lock();
            let needed = set.last().map_or(0, |&i| i + 1);
            if needed > alloc.slots() {
                t.medium.extend_to(needed)?;
            }
            alloc.reset(set);
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.tiers.iter().try_for_each(|t| t.medium.sync())
    }

    fn usage(&self, tier: Tier) -> TierUsage {
        let t = self.tier(tier);
        let alloc = t.lock();
        let (bytes, allocated_bytes) = t.medium.size().unwrap_or((alloc.bytes(), alloc.bytes()));
        TierUsage {
            slot_len: t.slot_len as u32,
            slots: alloc.slots(),
            free_slots: alloc.free_slots(),
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

        fn read_at(&self, _: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
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

        fn release(&self, offset: u64) {
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
            slots: 0,
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
        s.reset_allocation(&mut [(T, 4 * LEN), (Tier::Tier2, 0)].into_iter())
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
            .reset_allocation(&mut [(T, 0), (T, 0)].into_iter())
            .is_err());
        assert!(s.reset_allocation(&mut [(T, 3)].into_iter()).is_err());
    }
}
