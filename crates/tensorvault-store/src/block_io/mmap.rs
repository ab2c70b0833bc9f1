//! Memory-mapped tier files (server targets): `tier0.dat` .. `tier3.dat` in a collection
//! directory, each a row of fixed-size slots.
//!
//! - Reads borrow the bytes of a read-only `MAP_SHARED` mapping ([`BlockIO::with_block`]
//!   costs a read lock and a bounds check, no copy and no syscall).
//! - Writes go through `pwrite` ([`tensorvault_core::fsio::write_all_at`]); the page
//!   cache is shared with the mapping, so readers see them at once.
//! - A file grows in large steps (1/8 of its slots, at least [`MIN_GROW_SLOTS`], at most
//!   [`MAX_GROW_BYTES`]), and the mapping reserves address space beyond the file's end
//!   (rounded up to a power of two), so most growth steps only publish a larger slot
//!   count and a remap happens about once per doubling. Readers only ever touch slots
//!   below the published count, which always lie inside the file and the mapping.
//! - [`BlockIO::sync`] calls `fdatasync` on every tier file written since the last sync.
//!
//! A file whose length is not a multiple of its slot length (growth torn by a crash)
//! opens fine: only whole slots count.

use std::fs::{File, OpenOptions};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use tensorvault_core::fsio;

use memmap2::{Mmap, MmapOptions};

use super::slots::{self, SlotAlloc};
use super::{BlockIO, TierUsage};
use crate::config::CollectionConfig;
use crate::error::{Result, StoreErr};
use crate::types::{BlockKey, Tier};

/// Fewest slots a tier file grows by.
const MIN_GROW_SLOTS: u64 = 64;
/// Most bytes a tier file grows by in one step.
const MAX_GROW_BYTES: u64 = 256 << 20;
/// Smallest mapping reserved for a non-empty tier (address space only).
const MIN_MAP_BYTES: u64 = 1 << 20;

/// Block payloads in memory-mapped tier files. See the module docs.
///
/// The closure given to [`BlockIO::with_block`] runs under the tier's read lock: it must
/// not call back into this `MmapBlockIO` (a write that grows the tier would deadlock).
pub struct MmapBlockIO {
    dir: PathBuf,
    tiers: [MmapTier; 4],
}

/// What readers see of one tier: the mapping and how many slots of it are valid.
struct View {
    /// `None` while the file is empty. Always at least `slots * slot_len` long.
    map: Option<Mmap>,
    /// Slots readers may touch; every one of them lies inside the file.
    slots: u64,
}

/// One tier file. Lock order: `alloc`, then `view`.
struct MmapTier {
    tier: Tier,
    path: PathBuf,
    file: File,
    slot_len: u64,
    /// Free list and slot count; held by writers for the whole write.
    alloc: Mutex<SlotAlloc>,
    /// Held for reading by readers while they use the mapped bytes; for writing only to
    /// publish growth.
    view: RwLock<View>,
    /// Written since the last sync.
    dirty: AtomicBool,
}

impl MmapBlockIO {
    /// Open (creating missing ones) the four tier files in `dir`, with slot lengths from
    /// `geometry`. Every slot starts free: the store calls
    /// [`BlockIO::reset_allocation`] with the live slots after replaying its log.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `geometry` does not validate;
    /// [`StoreErr::Io`] if `dir` does not exist or a file cannot be created, opened,
    /// sized or mapped.
    pub fn open(dir: &Path, geometry: &CollectionConfig) -> Result<Self> {
        geometry.validate()?;
        let mut created = false;
        let mut open = |tier: Tier| -> Result<MmapTier> {
            let path = dir.join(tier.file_name());
            created |= !path.exists();
            MmapTier::open(tier, path, geometry.slot_len(tier))
        };
        let tiers = [
            open(Tier::Tier0)?,
            open(Tier::Tier1)?,
            open(Tier::Tier2)?,
            open(Tier::Tier3)?,
        ];
        if created {
            sync_dir(dir)?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            tiers,
        })
    }

    /// The collection directory holding the tier files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `tier`'s data file.
    #[must_use]
    pub fn tier_path(&self, tier: Tier) -> &Path {
        &self.tiers[tier.index()].path
    }

    fn tier(&self, tier: Tier) -> &MmapTier {
        &self.tiers[tier.index()]
    }
}

/// fsync a directory so the entries of files just created in it are durable.
fn sync_dir(dir: &Path) -> Result<()> {
    fsio::sync_dir(dir).map_err(|e| StoreErr::io("fsync", dir, e))
}

/// Give a freed slot's disk space back: punch a hole over the whole pages inside
/// `offset..offset + len` (`fallocate(PUNCH_HOLE | KEEP_SIZE)`; the file keeps its
/// length and the slot reads as zeros until it is reused). Best effort: a file system
/// without hole punching keeps the bytes, which costs space, never correctness, since
/// the store only frees a slot once no durable record and no reader refers to it.
fn punch_slot(file: &File, path: &Path, offset: u64, len: u64) {
    const PAGE: u64 = 4096;
    let start = offset.div_ceil(PAGE) * PAGE;
    let end = (offset + len) / PAGE * PAGE;
    if end > start {
        let _ = fsio::punch_hole(file, path, start, end - start);
    }
}

impl MmapTier {
    fn open(tier: Tier, path: PathBuf, slot_len: u32) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreErr::io("open", &path, e))?;
        let file_len = file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &path, e))?
            .len();
        let probe = SlotAlloc::new(tier, slot_len, 0);
        let slots = (file_len / probe.slot_len()).min(probe.max_slots());
        let mut this = Self {
            tier,
            path,
            file,
            slot_len: probe.slot_len(),
            alloc: Mutex::new(SlotAlloc::new(tier, slot_len, slots)),
            view: RwLock::new(View {
                map: None,
                slots: 0,
            }),
            dirty: AtomicBool::new(false),
        };
        let view = this.view_for(slots, None)?;
        *this.view.get_mut().unwrap_or_else(PoisonError::into_inner) = view;
        Ok(this)
    }

    fn lock_alloc(&self) -> MutexGuard<'_, SlotAlloc> {
        // The allocator is updated by single assignments that cannot be torn by a panic.
        self.alloc.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bad_len(&self, len: usize) -> StoreErr {
        StoreErr::CapacityExceeded {
            tier: self.tier,
            reason: format!("{len} bytes do not fit this platform's address space"),
        }
    }

    /// A view publishing `slots` slots, reusing `current`'s mapping if it is long enough.
    fn view_for(&self, slots: u64, current: Option<&View>) -> Result<View> {
        let need = slots * self.slot_len;
        if let Some(cur) = current {
            if cur.map.as_ref().map_or(0, |m| m.len() as u64) >= need {
                return Ok(View { map: None, slots });
            }
        }
        if need == 0 {
            return Ok(View {
                map: None,
                slots: 0,
            });
        }
        let reserve = need
            .checked_next_power_of_two()
            .unwrap_or(need)
            .max(MIN_MAP_BYTES);
        let reserve = usize::try_from(reserve)
            .or_else(|_| usize::try_from(need))
            .map_err(|_| self.bad_len(need as usize))?;
        // SAFETY: the mapping is read-only and shared. Its bytes change only through our
        // own `pwrite`s, which target free slots that no reader is handed (or, for a
        // repair, a slot already known corrupt, where a torn read only fails its checksum).
        // Other processes modifying or truncating the file break the store's contract
        // (one process owns a collection). The reservation may extend past the end of the
        // file, but readers only touch the first `slots * slot_len` bytes, which the file
        // covers (it is grown before a larger slot count is published), so no page past
        // EOF is ever accessed.
        let map = unsafe { MmapOptions::new().len(reserve).map(&self.file) }
            .map_err(|e| StoreErr::io("mmap", &self.path, e))?;
        Ok(View {
            map: Some(map),
            slots,
        })
    }

    /// Make the file hold `slots` whole slots (extending it with zeros) and publish them
    /// to readers. Caller holds the allocator lock.
    fn extend_to(&self, slots: u64) -> Result<()> {
        let need = slots * self.slot_len;
        let file_len = self
            .file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &self.path, e))?
            .len();
        if file_len < need {
            fsio::set_len(&self.file, &self.path, need)
                .map_err(|e| StoreErr::io("grow", &self.path, e))?;
            self.dirty.store(true, Ordering::Release);
        }
        // Map (if needed) before taking the write lock so readers wait only for a swap.
        let fresh = {
            let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
            self.view_for(slots, Some(&view))?
        };
        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        if fresh.map.is_some() {
            view.map = fresh.map;
        }
        view.slots = slots;
        Ok(())
    }

    /// Truncate the free slots at the end of the file away; caller holds the allocator
    /// lock. Readers never touch a free slot (a slot is freed only once no index entry
    /// refers to it), so unpublishing them first and cutting the file after is safe; the
    /// mapping keeps its address space.
    fn shrink(&self, alloc: &mut SlotAlloc) -> Result<()> {
        let used = alloc.slots() - alloc.free_tail();
        let keep = if used == 0 { 0 } else { used + MIN_GROW_SLOTS };
        {
            let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
            view.slots = view.slots.min(keep);
        }
        fsio::set_len(&self.file, &self.path, keep * self.slot_len)
            .map_err(|e| StoreErr::io("truncate", &self.path, e))?;
        self.dirty.store(true, Ordering::Release);
        alloc.shrink_to(keep);
        Ok(())
    }

    /// Grow by one step; caller holds the allocator lock.
    fn grow(&self, alloc: &mut SlotAlloc) -> Result<()> {
        let room = alloc.max_slots() - alloc.slots();
        let step = (alloc.slots() / 8)
            .max(MIN_GROW_SLOTS)
            .min((MAX_GROW_BYTES / self.slot_len).max(1))
            .min(room);
        if step == 0 {
            return Err(alloc.full());
        }
        self.extend_to(alloc.slots() + step)?;
        alloc.add_slots(step)
    }

    fn write_at(&self, src: &[u8], offset: u64) -> Result<()> {
        fsio::write_all_at(&self.file, &self.path, src, offset)
            .map_err(|e| StoreErr::io("write", &self.path, e))?;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }
}

impl BlockIO for MmapBlockIO {
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
                t.grow(&mut alloc)?;
                alloc.pop_free().ok_or_else(|| alloc.full())?
            }
        };
        let offset = index * t.slot_len;
        if let Err(e) = t.write_at(src, offset) {
            // The slot never became live: hand it back (it is live in the allocator now,
            // so this cannot fail).
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
        let index = slots::check_read(tier, t.slot_len, offset, len)?;
        let not_found = || StoreErr::NotFound {
            key,
            tier: Some(tier),
        };
        let view = t.view.read().unwrap_or_else(PoisonError::into_inner);
        if index >= view.slots {
            return Err(not_found());
        }
        // In range by the check above (slots * slot_len fits in the mapping and in usize,
        // since the mapping exists); `get` keeps it so even if that reasoning broke.
        let start = offset as usize;
        let bytes = view
            .map
            .as_deref()
            .and_then(|m| m.get(start..start.checked_add(len as usize)?))
            .ok_or_else(not_found)?;
        f(bytes);
        Ok(())
    }

    fn free_block(&self, tier: Tier, offset: u64) -> Result<()> {
        let t = self.tier(tier);
        let mut alloc = t.lock_alloc();
        alloc.free(offset)?;
        if alloc.free_tail() >= 2 * MIN_GROW_SLOTS {
            // Free slots at the end go back by truncation (keeping one growth step of
            // slack, none for an empty tier); the ones inside by hole punching.
            t.shrink(&mut alloc)
        } else {
            punch_slot(&t.file, &t.path, offset, t.slot_len);
            Ok(())
        }
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
            if t.dirty.swap(false, Ordering::AcqRel) {
                if let Err(e) = fsio::sync_data(&t.file, &t.path) {
                    t.dirty.store(true, Ordering::Release);
                    return Err(StoreErr::io("fsync", &t.path, e));
                }
            }
        }
        Ok(())
    }

    fn usage(&self, tier: Tier) -> TierUsage {
        let t = self.tier(tier);
        let alloc = t.lock_alloc();
        let meta = t.file.metadata().ok();
        TierUsage {
            slot_len: t.slot_len as u32,
            slots: alloc.slots(),
            free_slots: alloc.free_slots(),
            bytes: meta.as_ref().map_or(alloc.bytes(), |m| m.len()),
            allocated_bytes: meta.map_or(alloc.bytes(), |m| {
                std::os::unix::fs::MetadataExt::blocks(&m).saturating_mul(512)
            }),
        }
    }
}

impl std::fmt::Debug for MmapBlockIO {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usage = Tier::ALL.map(|t| self.usage(t));
        f.debug_struct("MmapBlockIO")
            .field("dir", &self.dir)
            .field("usage", &usage)
            .finish()
    }
}
