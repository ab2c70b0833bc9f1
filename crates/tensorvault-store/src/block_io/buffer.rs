//! In-memory tiers (the WASM path, and tests): one `Vec<u8>` of fixed-size slots per
//! tier, with an optional host persistence hook (ADR-018 section 3.9) that
//! [`BlockIO::sync`] calls with the whole buffer of every tier written since the last
//! sync. A host restores what it persisted with [`BufferBlockIO::from_tiers`].
//!
//! Uses no threads and no OS facilities beyond `std::sync`, so it works with
//! `--no-default-features` on `wasm32-unknown-unknown`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use super::slots::{self, SlotAlloc};
use super::{BlockIO, TierUsage};
use crate::config::CollectionConfig;
use crate::error::{Result, StoreErr};
use crate::types::{BlockKey, Tier};

/// Where a host keeps the tier buffers between sessions (IndexedDB, OPFS, a file...).
pub trait PersistHook: Send + Sync {
    /// Store `data`, the whole current content of `tier`, replacing what was stored for
    /// it before. Called by [`BlockIO::sync`] for every tier written since the last
    /// successful sync, tiers in order 0..=3.
    ///
    /// # Errors
    /// Any I/O error; the sync fails with [`StoreErr::Io`] (op `persist`, path the tier's
    /// file name) and the tier stays dirty, so the next sync tries again.
    fn persist(&self, tier: Tier, data: &[u8]) -> std::io::Result<()>;
}

/// Block payloads in memory. See the module docs.
pub struct BufferBlockIO {
    tiers: [BufTier; 4],
    hook: Option<Box<dyn PersistHook>>,
}

/// One tier. Lock order: `alloc`, then `data`.
struct BufTier {
    tier: Tier,
    slot_len: u64,
    alloc: Mutex<SlotAlloc>,
    /// Always exactly `slots * slot_len` bytes.
    data: RwLock<Vec<u8>>,
    dirty: AtomicBool,
}

impl BufferBlockIO {
    /// Empty tiers with slot lengths from `geometry` (which the store validates; a zero
    /// slot length is treated as 1).
    #[must_use]
    pub fn new(geometry: &CollectionConfig) -> Self {
        Self::from_tiers(Default::default(), geometry)
    }

    /// Tiers restored from the buffers a [`PersistHook`] received, indexed by
    /// [`Tier::index`]. Only whole slots count: a trailing partial slot is dropped. Every
    /// slot starts free until [`BlockIO::reset_allocation`] names the live ones.
    #[must_use]
    pub fn from_tiers(tiers: [Vec<u8>; 4], geometry: &CollectionConfig) -> Self {
        let mut i = 0;
        let tiers = tiers.map(|mut data| {
            let tier = Tier::ALL[i];
            i += 1;
            let probe = SlotAlloc::new(tier, geometry.slot_len(tier), 0);
            let slot_len = probe.slot_len();
            let slots = (data.len() as u64 / slot_len).min(probe.max_slots());
            // Fits: at most data.len().
            let keep = (slots * slot_len) as usize;
            if keep != data.len() {
                tracing::warn!(%tier, len = data.len(), slot_len, "tier buffer ends in a partial slot; dropped");
                data.truncate(keep);
            }
            BufTier {
                tier,
                slot_len,
                alloc: Mutex::new(SlotAlloc::new(tier, slot_len as u32, slots)),
                data: RwLock::new(data),
                dirty: AtomicBool::new(false),
            }
        });
        Self { tiers, hook: None }
    }

    /// Install the host persistence hook [`BlockIO::sync`] calls.
    #[must_use]
    pub fn with_hook(mut self, hook: Box<dyn PersistHook>) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Call `f` with the whole current buffer of `tier` (what the hook would receive).
    pub fn with_tier_data<R>(&self, tier: Tier, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.tier(tier).read_data())
    }

    fn tier(&self, tier: Tier) -> &BufTier {
        &self.tiers[tier.index()]
    }
}

impl BufTier {
    fn lock_alloc(&self) -> MutexGuard<'_, SlotAlloc> {
        // The allocator is updated by single assignments that cannot be torn by a panic.
        self.alloc.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn read_data(&self) -> std::sync::RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_data(&self) -> std::sync::RwLockWriteGuard<'_, Vec<u8>> {
        self.data.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Extend the buffer with zeros to `slots` slots; caller holds the allocator lock.
    fn extend_to(&self, slots: u64) -> Result<()> {
        let len = slots
            .checked_mul(self.slot_len)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| StoreErr::CapacityExceeded {
                tier: self.tier,
                reason: format!("{slots} slots do not fit this platform's address space"),
            })?;
        let mut data = self.write_data();
        if data.len() < len {
            data.resize(len, 0);
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Copy `src` into the slot at `offset` (inside the buffer: checked by the caller).
    fn write_at(&self, src: &[u8], offset: u64) -> Result<()> {
        let mut data = self.write_data();
        let start = offset as usize;
        let dst = start
            .checked_add(src.len())
            .and_then(|end| data.get_mut(start..end))
            .ok_or_else(|| StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("{offset} + {} is past the end of {}", src.len(), self.tier),
            })?;
        dst.copy_from_slice(src);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }
}

impl BlockIO for BufferBlockIO {
    fn slot_len(&self, tier: Tier) -> u32 {
        self.tier(tier).slot_len as u32
    }

    fn write_block(&self, tier: Tier, _key: BlockKey, src: &[u8]) -> Result<(u64, u32)> {
        let t = self.tier(tier);
        let mut alloc = t.lock_alloc();
        alloc.check_payload(src.len())?;
        let index = match alloc.pop_free() {
            Some(i) => i,
            None => {
                // Vec's amortized growth makes one slot at a time cheap, and the hook
                // never receives unused capacity.
                let slots = alloc.slots().checked_add(1).ok_or_else(|| alloc.full())?;
                if slots > alloc.max_slots() {
                    return Err(alloc.full());
                }
                t.extend_to(slots)?;
                alloc.add_slots(1)?;
                alloc.pop_free().ok_or_else(|| alloc.full())?
            }
        };
        let offset = index * t.slot_len;
        if let Err(e) = t.write_at(src, offset) {
            // Never became live; it is live in the allocator, so freeing cannot fail.
            let _ = alloc.free(offset);
            return Err(e);
        }
        Ok((offset, src.len() as u32))
    }

    fn rewrite_block(&self, tier: Tier, offset: u64, src: &[u8]) -> Result<()> {
        let t = self.tier(tier);
        let alloc = t.lock_alloc();
        alloc.check_rewrite(offset, src.len())?;
        t.write_at(src, offset)
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
        slots::check_read(tier, t.slot_len, offset, len)?;
        let data = t.read_data();
        // The buffer is exactly the tier's slots: a range inside it is inside the tier.
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|start| data.get(start..start.checked_add(len as usize)?))
            .ok_or(StoreErr::NotFound {
                key,
                tier: Some(tier),
            })?;
        f(bytes);
        Ok(())
    }

    fn free_block(&self, tier: Tier, offset: u64) -> Result<()> {
        self.tier(tier).lock_alloc().free(offset)
    }

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64)>) -> Result<()> {
        let lens = Tier::ALL.map(|t| self.tier(t).slot_len);
        let sets = slots::check_live(lens, live)?;
        for tier in Tier::ALL {
            let t = self.tier(tier);
            let mut alloc = t.lock_alloc();
            let needed = sets[tier.index()].last().map_or(0, |&i| i + 1);
            if needed > alloc.slots() {
                t.extend_to(needed)?;
            }
            alloc.reset(&sets[tier.index()]);
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        for t in &self.tiers {
            if !t.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let Some(hook) = &self.hook else { continue };
            let res = hook.persist(t.tier, &t.read_data());
            if let Err(e) = res {
                t.dirty.store(true, Ordering::Release);
                return Err(StoreErr::io("persist", t.tier.file_name(), e));
            }
        }
        Ok(())
    }

    fn usage(&self, tier: Tier) -> TierUsage {
        let t = self.tier(tier);
        let alloc = t.lock_alloc();
        TierUsage {
            slot_len: t.slot_len as u32,
            slots: alloc.slots(),
            free_slots: alloc.free_slots(),
            bytes: alloc.bytes(),
            allocated_bytes: alloc.bytes(),
        }
    }
}

impl std::fmt::Debug for BufferBlockIO {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usage = Tier::ALL.map(|t| self.usage(t));
        f.debug_struct("BufferBlockIO")
            .field("usage", &usage)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}
