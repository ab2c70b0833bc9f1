//! Block payload storage (ADR-018 section 3.13): one file (or buffer) per tier made of
//! fixed-size slots, sized per tier by [`crate::CollectionConfig::slot_len`], or (with
//! [`crate::CollectionConfig::extents`]) of payload-sized extents in units of
//! `slot_align`.
//!
//! Slot `i` of a tier starts at byte `i * slot_len`; an extent starts at any multiple of
//! `slot_align` and takes `roundup(len, slot_align)` bytes. A slot or extent is either
//! live (referenced by the index) or free; the free list is not persisted: after replay
//! the store calls [`BlockIO::reset_allocation`] with every live block and everything
//! else inside the file becomes free. Writes only ever go to free slots (or, for an in-place repair, to
//! a slot whose bytes are known to be corrupt), so a crash between a data write and its
//! MetaLog record leaves only an unreferenced slot, which the next open frees.
//!
//! The local backends share one slot layer (`slot_store.rs`: allocation, growth, the undo
//! of a failed write, frees, the reset after replay) over a small per-backend byte medium
//! (`mmap.rs`: tier files; `buffer.rs`: in-memory buffers); `slots.rs` holds the slot
//! allocator and its geometry checks, `extents.rs` the extent allocator and its checks.

mod buffer;
mod extents;
#[cfg(feature = "mmap")]
mod mmap;
mod slot_store;
mod slots;

pub use buffer::{BufferBlockIO, PersistHook};
#[cfg(feature = "mmap")]
pub use mmap::MmapBlockIO;

use crate::error::Result;
use crate::types::{BlockKey, Tier};

/// Per-tier occupancy, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierUsage {
    /// Worst-case slot length in bytes.
    pub slot_len: u32,
    /// Allocation unit in bytes: `slot_len`, or `slot_align` with extent allocation.
    pub alloc_unit: u32,
    /// Allocation units in the file (live + free): slots, or extent units.
    pub slots: u64,
    /// Free allocation units.
    pub free_slots: u64,
    /// Bytes the live blocks take in the file (their slots or extents; at least their
    /// payload bytes).
    pub live_bytes: u64,
    /// Bytes the tier occupies on its medium (file length).
    pub bytes: u64,
    /// Bytes the medium actually holds for it: for files, the blocks allocated on disk
    /// (`du`; less than `bytes` where growth is sparse or freed slots were punched out),
    /// else `bytes`.
    pub allocated_bytes: u64,
}

/// Block-level I/O. All methods take `&self`: implementations synchronize internally so
/// many threads can read while one writes.
pub trait BlockIO: Send + Sync {
    /// Slot length of `tier` in bytes.
    fn slot_len(&self, tier: Tier) -> u32;

    /// Longest payload [`BlockIO::write_block`] takes for `tier`: the slot length, or the
    /// tier's cap with extent allocation ([`crate::CollectionConfig::max_block_len`]).
    fn max_block_len(&self, tier: Tier) -> u32 {
        self.slot_len(tier)
    }

    /// Write `src` (at most [`BlockIO::max_block_len`] bytes) into a free slot or extent
    /// of `tier` (growing the tier if none is free) and return `(offset, len)`. It is
    /// live from now on. Durable only after [`BlockIO::sync`].
    ///
    /// # Errors
    /// [`crate::StoreErr::CapacityExceeded`] if `src` is longer than that;
    /// [`crate::StoreErr::Io`].
    fn write_block(&self, tier: Tier, key: BlockKey, src: &[u8]) -> Result<(u64, u32)>;

    /// Overwrite the live slot or extent at `offset` in place (repair of a corrupt block).
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] if `offset` is not a live slot or extent
    /// start inside the tier or `src` is longer than it; [`crate::StoreErr::Io`].
    fn rewrite_block(&self, tier: Tier, offset: u64, src: &[u8]) -> Result<()>;

    /// Call `f` with the `len` payload bytes at `offset` (borrowed from the mapping or
    /// buffer when possible, so a reader can checksum and decode without a copy).
    ///
    /// # Errors
    /// [`crate::StoreErr::NotFound`] if the range lies outside the tier;
    /// [`crate::StoreErr::Io`].
    fn with_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()>;

    /// Copy the payload at `offset` into `dst` (which must hold `len` bytes); returns `len`.
    ///
    /// # Errors
    /// As [`BlockIO::with_block`]; [`crate::StoreErr::InvalidArgument`] if `dst` is short.
    fn read_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        dst: &mut [u8],
    ) -> Result<usize> {
        let n = len as usize;
        if dst.len() < n {
            return Err(crate::StoreErr::InvalidArgument {
                field: "dst",
                reason: format!("{} bytes, block needs {n}", dst.len()),
            });
        }
        self.with_block(tier, key, offset, len, &mut |b| dst[..n].copy_from_slice(b))?;
        Ok(n)
    }

    /// Return the slot or extent at `offset` to the free list.
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] if `offset` is not a live slot or extent start
    /// inside the tier.
    fn free_block(&self, tier: Tier, offset: u64) -> Result<()>;

    /// Rebuild every tier's free list: the blocks in `live` (`(tier, data_offset,
    /// data_len)`) are in use, every other byte inside the tier is free. A live block
    /// beyond the tier's end (its data never reached the medium, e.g. after power loss
    /// under a relaxed durability policy) extends the tier with zeros, so reading it fails
    /// its checksum instead of aliasing a new block.
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] naming the first entry that is not a slot or
    /// extent start inside its tier, or is longer than the tier allows (replay validates
    /// offsets first, so this means a bug); two entries on one slot (`InvalidArgument`) or
    /// overlapping extents ([`crate::StoreErr::ExtentOverlap`]): the store resolves those.
    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64, u32)>) -> Result<()>;

    /// Make every write so far durable (fsync, or the persistence hook).
    ///
    /// # Errors
    /// [`crate::StoreErr::Io`].
    fn sync(&self) -> Result<()>;

    /// Occupancy of `tier`.
    fn usage(&self, tier: Tier) -> TierUsage;
}

/// Implement [`BlockIO`] for a public wrapper type by forwarding every method to its
/// `SlotStore` field (the slot layer in `slot_store.rs`).
macro_rules! forward_block_io {
    ($ty:ty, $field:ident) => {
        impl $crate::block_io::BlockIO for $ty {
            fn slot_len(&self, tier: $crate::types::Tier) -> u32 {
                $crate::block_io::BlockIO::slot_len(&self.$field, tier)
            }

            fn max_block_len(&self, tier: $crate::types::Tier) -> u32 {
                $crate::block_io::BlockIO::max_block_len(&self.$field, tier)
            }

            fn write_block(
                &self,
                tier: $crate::types::Tier,
                key: $crate::types::BlockKey,
                src: &[u8],
            ) -> $crate::error::Result<(u64, u32)> {
                $crate::block_io::BlockIO::write_block(&self.$field, tier, key, src)
            }

            fn rewrite_block(
                &self,
                tier: $crate::types::Tier,
                offset: u64,
                src: &[u8],
            ) -> $crate::error::Result<()> {
                $crate::block_io::BlockIO::rewrite_block(&self.$field, tier, offset, src)
            }

            fn with_block(
                &self,
                tier: $crate::types::Tier,
                key: $crate::types::BlockKey,
                offset: u64,
                len: u32,
                f: &mut dyn FnMut(&[u8]),
            ) -> $crate::error::Result<()> {
                $crate::block_io::BlockIO::with_block(&self.$field, tier, key, offset, len, f)
            }

            fn free_block(
                &self,
                tier: $crate::types::Tier,
                offset: u64,
            ) -> $crate::error::Result<()> {
                $crate::block_io::BlockIO::free_block(&self.$field, tier, offset)
            }

            fn reset_allocation(
                &self,
                live: &mut dyn Iterator<Item = ($crate::types::Tier, u64, u32)>,
            ) -> $crate::error::Result<()> {
                $crate::block_io::BlockIO::reset_allocation(&self.$field, live)
            }

            fn sync(&self) -> $crate::error::Result<()> {
                $crate::block_io::BlockIO::sync(&self.$field)
            }

            fn usage(&self, tier: $crate::types::Tier) -> $crate::block_io::TierUsage {
                $crate::block_io::BlockIO::usage(&self.$field, tier)
            }
        }
    };
}
pub(crate) use forward_block_io;
