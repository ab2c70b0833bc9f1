//! In-memory tiers (the WASM path, and tests): one `Vec<u8>` of fixed-size slots per
//! tier, with an optional host persistence hook (ADR-018 section 3.9) that
//! [`BlockIO::sync`] calls with the whole buffer of every tier written since the last
//! sync. A host restores what it persisted with [`BufferBlockIO::from_tiers`].
//!
//! Uses no threads and no OS facilities beyond `std::sync`, so it works with
//! `--no-default-features` on `wasm32-unknown-unknown`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::forward_block_io;
use super::slot_store::{SlotStore, TierMedium, TierSetup};
use super::slots;
use super::BlockIO;
use crate::config::CollectionConfig;
use crate::error::{Result, StoreErr};
use crate::types::Tier;

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
    slots: SlotStore<BufTier>,
}

forward_block_io!(BufferBlockIO, slots);

/// One tier's buffer: the [`TierMedium`] of [`BufferBlockIO`].
struct BufTier {
    tier: Tier,
    slot_len: u64,
    /// Always exactly `slots * slot_len` bytes.
    data: RwLock<Vec<u8>>,
    dirty: AtomicBool,
    /// The host's hook, shared by the four tiers.
    hook: Option<Arc<dyn PersistHook>>,
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
        let setup = tiers.map(|mut data| {
            let tier = Tier::ALL[i];
            i += 1;
            let extents = super::slot_store::extents_of(geometry, tier);
            let slot_len =
                slots::slot_bytes(extents.map_or(geometry.slot_len(tier), |(unit, _)| unit));
            let slots = slots::whole_slots(data.len() as u64, slot_len);
            // Fits: at most data.len().
            let keep = (slots * slot_len) as usize;
            if keep != data.len() {
                tracing::warn!(%tier, len = data.len(), slot_len, "tier buffer ends in a partial slot; dropped");
                data.truncate(keep);
            }
            TierSetup {
                medium: BufTier {
                    tier,
                    slot_len,
                    data: RwLock::new(data),
                    dirty: AtomicBool::new(false),
                    hook: None,
                },
                slot_len: geometry.slot_len(tier),
                extents,
                units: slots,
            }
        });
        Self {
            slots: SlotStore::new(setup),
        }
    }

    /// Install the host persistence hook [`BlockIO::sync`] calls.
    #[must_use]
    pub fn with_hook(mut self, hook: Box<dyn PersistHook>) -> Self {
        let hook: Arc<dyn PersistHook> = Arc::from(hook);
        for t in self.slots.media_mut() {
            t.hook = Some(Arc::clone(&hook));
        }
        self
    }

    /// Call `f` with the whole current buffer of `tier` (what the hook would receive).
    pub fn with_tier_data<R>(&self, tier: Tier, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.slots.medium(tier).read_data())
    }
}

impl BufTier {
    fn read_data(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_data(&self) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.data.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TierMedium for BufTier {
    /// One slot: `Vec`'s amortized growth makes that cheap, and the hook never receives
    /// unused capacity.
    fn grow_step(&self, _slots: u64) -> u64 {
        1
    }

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

    fn write_at(&self, offset: u64, src: &[u8]) -> Result<()> {
        let mut data = self.write_data();
        let dst = usize::try_from(offset)
            .ok()
            .and_then(|start| data.get_mut(start..start.checked_add(src.len())?))
            .ok_or_else(|| StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("{offset} + {} is past the end of {}", src.len(), self.tier),
            })?;
        dst.copy_from_slice(src);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    fn read_at(&self, _end: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let data = self.read_data();
        // The buffer is exactly the tier's slots: a range inside it is inside the tier.
        let Some(bytes) = usize::try_from(offset)
            .ok()
            .and_then(|start| data.get(start..start.checked_add(len)?))
        else {
            return false;
        };
        f(bytes);
        true
    }

    /// The hook gets the whole buffer if written since the last sync.
    fn sync(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let Some(hook) = &self.hook else {
            return Ok(());
        };
        if let Err(e) = hook.persist(self.tier, &self.read_data()) {
            self.dirty.store(true, Ordering::Release);
            return Err(StoreErr::io("persist", self.tier.file_name(), e));
        }
        Ok(())
    }
}

impl std::fmt::Debug for BufferBlockIO {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usage = Tier::ALL.map(|t| BlockIO::usage(self, t));
        f.debug_struct("BufferBlockIO")
            .field("usage", &usage)
            .field("hook", &self.slots.medium(Tier::Tier0).hook.is_some())
            .finish()
    }
}
