//! Memory-mapped tier files (server targets): `tier0.dat` .. `tier3.dat` in a collection
//! directory, each a row of fixed-size slots. Allocation is the shared slot layer
//! (`slot_store.rs`); this module is its file medium:
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
//! - Freed slots give their disk space back: the ones inside the file by hole punching,
//!   a free tail of two growth steps or more by truncation (keeping one step).
//! - [`BlockIO::sync`] calls `fdatasync` on every tier file written since the last sync.
//!
//! With extent allocation the same holds in units of `slot_align` bytes (a block takes
//! the units its payload needs); growth and truncation keep the byte sizes of the slot
//! layout (64 worst-case slots' worth at least), so an extent tier file grows as often.
//!
//! A file whose length is not a multiple of its unit (growth torn by a crash) opens fine:
//! only whole units count.
//!
//! [`MmapBlockIO::open_snapshot`] opens the files read-only for a reader that holds no
//! lock while a writer in another process goes on: it reads slots with `pread` instead
//! of a mapping (a writer may cut a file, which would fault a mapped read; a read past
//! the end is just a miss), and never writes, grows or creates a file.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use memmap2::{Mmap, MmapOptions};
use tensorvault_core::fsio;

use super::forward_block_io;
use super::slot_store::{extents_of, SlotStore, TierMedium, TierSetup};
use super::slots;
use super::BlockIO;
use crate::config::CollectionConfig;
use crate::error::{Result, StoreErr};
use crate::types::Tier;

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
    slots: SlotStore<MmapTier>,
}

forward_block_io!(MmapBlockIO, slots);

/// What readers see of one tier: the mapping and how many slots of it are valid.
struct View {
    /// `None` while the file is empty. Always at least `slots * slot_len` long.
    map: Option<Mmap>,
    /// Slots readers may touch; every one of them lies inside the file.
    slots: u64,
}

/// One tier file: the [`TierMedium`] of [`MmapBlockIO`].
struct MmapTier {
    tier: Tier,
    path: PathBuf,
    file: File,
    /// Allocation unit in bytes (the slot length, or `slot_align` with extents).
    slot_len: u64,
    /// Fewest units a growth step adds (64 worst-case slots' worth of bytes).
    min_grow: u64,
    /// Held for reading by readers while they use the mapped bytes; for writing only to
    /// publish growth or a cut.
    view: RwLock<View>,
    /// Written since the last sync.
    dirty: AtomicBool,
    /// Snapshot reader: read-only file, `pread` instead of the mapping.
    pread: bool,
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
        let mut open = |tier: Tier| -> Result<TierSetup<MmapTier>> {
            let path = dir.join(tier.file_name());
            created |= !path.exists();
            MmapTier::open(tier, path, geometry, false)
        };
        let setup = [
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
            slots: SlotStore::new(setup),
        })
    }

    /// Open the four tier files of `dir` read-only for a lock-free snapshot reader (see
    /// the module docs): slots are read with `pread`; writes fail with
    /// [`StoreErr::Io`]; nothing is created, grown or cut.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `geometry` does not validate;
    /// [`StoreErr::Io`] if a tier file is missing or cannot be opened.
    pub fn open_snapshot(dir: &Path, geometry: &CollectionConfig) -> Result<Self> {
        geometry.validate()?;
        let open = |tier: Tier| MmapTier::open(tier, dir.join(tier.file_name()), geometry, true);
        let setup = [
            open(Tier::Tier0)?,
            open(Tier::Tier1)?,
            open(Tier::Tier2)?,
            open(Tier::Tier3)?,
        ];
        Ok(Self {
            dir: dir.to_path_buf(),
            slots: SlotStore::new(setup),
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
        &self.slots.medium(tier).path
    }
}

/// `pread` of exactly `buf.len()` bytes at `off` (a short file is an error).
#[cfg(unix)]
fn pread_exact(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, off)
}

#[cfg(not(unix))]
fn pread_exact(mut f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    f.seek(SeekFrom::Start(off))?;
    f.read_exact(buf)
}

/// fsync a directory so the entries of files just created in it are durable.
fn sync_dir(dir: &Path) -> Result<()> {
    fsio::sync_dir(dir).map_err(|e| StoreErr::io("fsync", dir, e))
}

impl MmapTier {
    /// Open (or create) the file and map its whole slots; `snapshot`: open an existing
    /// file read-only, map nothing (reads use `pread`). The file must be a regular file.
    fn open(
        tier: Tier,
        path: PathBuf,
        geometry: &CollectionConfig,
        snapshot: bool,
    ) -> Result<TierSetup<Self>> {
        let slot_len = geometry.slot_len(tier);
        let extents = extents_of(geometry, tier);
        let file = StoreErr::open_regular(
            "open",
            &path,
            OpenOptions::new()
                .read(true)
                .write(!snapshot)
                .create(!snapshot)
                .truncate(false),
        )?;
        let file_len = file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &path, e))?
            .len();
        let bytes = slots::slot_bytes(extents.map_or(slot_len, |(unit, _)| unit));
        let slots = slots::whole_slots(file_len, bytes);
        let min_grow = (MIN_GROW_SLOTS * slots::slot_bytes(slot_len)).div_ceil(bytes);
        let mut medium = Self {
            tier,
            path,
            file,
            slot_len: bytes,
            min_grow,
            view: RwLock::new(View {
                map: None,
                slots: 0,
            }),
            dirty: AtomicBool::new(false),
            pread: snapshot,
        };
        let view = medium.view_for(slots, None)?;
        *medium
            .view
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = view;
        Ok(TierSetup {
            medium,
            slot_len,
            extents,
            units: slots,
        })
    }

    fn bad_len(&self, len: usize) -> StoreErr {
        StoreErr::CapacityExceeded {
            tier: self.tier,
            reason: format!("{len} bytes do not fit this platform's address space"),
        }
    }

    /// A view publishing `slots` slots, reusing `current`'s mapping if it is long enough.
    fn view_for(&self, slots: u64, current: Option<&View>) -> Result<View> {
        if self.pread {
            return Ok(View { map: None, slots });
        }
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

    fn read_view(&self) -> std::sync::RwLockReadGuard<'_, View> {
        // A view is replaced by single assignments that cannot be torn by a panic.
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_view(&self) -> std::sync::RwLockWriteGuard<'_, View> {
        self.view.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TierMedium for MmapTier {
    /// 1/8 of the units, at least [`MIN_GROW_SLOTS`] slots' worth, at most
    /// [`MAX_GROW_BYTES`] (and at least one unit).
    fn grow_step(&self, slots: u64) -> u64 {
        (slots / 8)
            .max(self.min_grow)
            .min((MAX_GROW_BYTES / self.slot_len).max(1))
    }

    fn extend_to(&self, slots: u64) -> Result<()> {
        let need = slots * self.slot_len;
        let file_len = self
            .file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &self.path, e))?
            .len();
        if self.pread {
            // A snapshot never grows a file. Its log prefix may name slots past the length
            // seen when the tier file was opened (the writer grew the file, then logged,
            // between our open and our log read); the writer grows before it logs, so the
            // file covers them now, or the log is not the writer's.
            if file_len < need {
                return Err(StoreErr::NotWritable {
                    op: "grow",
                    path: self.path.clone(),
                    poisoned: false,
                });
            }
            self.write_view().slots = slots;
            return Ok(());
        }
        if file_len < need {
            fsio::set_len(&self.file, &self.path, need)
                .map_err(|e| StoreErr::io("grow", &self.path, e))?;
            self.dirty.store(true, Ordering::Release);
        }
        // Map (if needed) before taking the write lock so readers wait only for a swap.
        let fresh = self.view_for(slots, Some(&self.read_view()))?;
        let mut view = self.write_view();
        if fresh.map.is_some() {
            view.map = fresh.map;
        }
        view.slots = slots;
        Ok(())
    }

    fn write_at(&self, offset: u64, src: &[u8]) -> Result<()> {
        fsio::write_all_at(&self.file, &self.path, src, offset)
            .map_err(|e| StoreErr::io("write", &self.path, e))?;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    fn read_at(&self, end: u64, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let view = self.read_view();
        if end > view.slots {
            return false;
        }
        if self.pread {
            // `len` is at most the tier's cap (checked by the allocation layer against
            // the geometry), not a length read from the file.
            let mut buf = vec![0u8; len];
            if pread_exact(&self.file, &mut buf, offset).is_err() {
                return false;
            }
            f(&buf);
            return true;
        }
        // In range by the check above (slots * slot_len fits in the mapping and in usize,
        // since the mapping exists); `get` keeps it so even if that reasoning broke.
        let start = offset as usize;
        let Some(bytes) = view
            .map
            .as_deref()
            .and_then(|m| m.get(start..start.checked_add(len)?))
        else {
            return false;
        };
        f(bytes);
        true
    }

    /// Free slots at the end go back by truncation once two growth steps of them have
    /// piled up, keeping one step of slack, and at once when the tier holds nothing (an
    /// emptied tier takes 0 bytes); the ones inside by hole punching
    /// ([`TierMedium::release`]).
    fn shrink_target(&self, used: u64, slots: u64) -> Option<u64> {
        if used == 0 {
            return (slots > 0).then_some(0);
        }
        (slots - used >= 2 * self.min_grow).then_some(used + self.min_grow)
    }

    /// Readers never touch a free slot (a slot is freed only once no index entry refers
    /// to it), so unpublishing the cut slots first and cutting the file after is safe; the
    /// mapping keeps its address space.
    fn shrink_to(&self, slots: u64) -> Result<()> {
        let published = {
            let mut view = self.write_view();
            let before = view.slots;
            view.slots = view.slots.min(slots);
            before
        };
        if let Err(e) = fsio::set_len(&self.file, &self.path, slots * self.slot_len) {
            // The file keeps its length: publish its slots again.
            self.write_view().slots = published;
            return Err(StoreErr::io("truncate", &self.path, e));
        }
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Punch a hole over the whole pages inside the freed slot, or inside the free run
    /// a freed extent joined (`fallocate(PUNCH_HOLE | KEEP_SIZE)`: the file keeps its
    /// length and the bytes read as zeros until reused). Best effort: a file system
    /// without hole punching keeps the bytes, which costs space, never correctness, since
    /// the store only frees a block's bytes once no durable record and no reader refers
    /// to them. A page shared with a live neighbour stays; one the extent shared with a
    /// free neighbour goes with the run.
    fn release(&self, offset: u64, len: u64) {
        const PAGE: u64 = 4096;
        let start = offset.div_ceil(PAGE) * PAGE;
        let end = (offset + len) / PAGE * PAGE;
        if end > start {
            let _ = fsio::punch_hole(&self.file, &self.path, start, end - start);
        }
    }

    /// `fdatasync` if written since the last sync.
    fn sync(&self) -> Result<()> {
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = fsio::sync_data(&self.file, &self.path) {
                self.dirty.store(true, Ordering::Release);
                return Err(StoreErr::io("fsync", &self.path, e));
            }
        }
        Ok(())
    }

    /// The file's length and the bytes allocated to it on disk (`du`).
    fn size(&self) -> Option<(u64, u64)> {
        let meta = self.file.metadata().ok()?;
        let allocated = std::os::unix::fs::MetadataExt::blocks(&meta).saturating_mul(512);
        Some((meta.len(), allocated))
    }
}

impl std::fmt::Debug for MmapBlockIO {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usage = Tier::ALL.map(|t| BlockIO::usage(self, t));
        f.debug_struct("MmapBlockIO")
            .field("dir", &self.dir)
            .field("usage", &usage)
            .finish()
    }
}
