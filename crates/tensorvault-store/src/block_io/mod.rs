//! Block payload storage (ADR-018 section 3.13): one file (or buffer) per tier made of
//! fixed-size slots, sized per tier by [`crate::CollectionConfig::slot_len`].
//!
//! Slot `i` of a tier starts at byte `i * slot_len`. A slot is either live (referenced by
//! the index) or free; the free list is not persisted: after replay the store calls
//! [`BlockIO::reset_allocation`] with every live slot and everything else inside the
//! file becomes free. Writes only ever go to free slots (or, for an in-place repair, to
//! a slot whose bytes are known to be corrupt), so a crash between a data write and its
//! MetaLog record leaves only an unreferenced slot, which the next open frees.
//!
//! The local backends share one slot layer (`slot_store.rs`: allocation, growth, the undo
//! of a failed write, frees, the reset after replay) over a small per-backend byte medium
//! (`mmap.rs`: tier files; `buffer.rs`: in-memory buffers); `slots.rs` holds the
//! allocator and the geometry checks.

mod buffer;
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
    /// Slot length in bytes.
    pub slot_len: u32,
    /// Slots in the file (live + free).
    pub slots: u64,
    /// Free slots.
    pub free_slots: u64,
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

    /// Write `src` (at most one slot) into a free slot of `tier` (growing the tier if none
    /// is free) and return `(offset, len)`. The slot is live from now on. Durable only
    /// after [`BlockIO::sync`].
    ///
    /// # Errors
    /// [`crate::StoreErr::CapacityExceeded`] if `src` is longer than a slot;
    /// [`crate::StoreErr::Io`].
    fn write_block(&self, tier: Tier, key: BlockKey, src: &[u8]) -> Result<(u64, u32)>;

    /// Overwrite the live slot at `offset` in place (repair of a corrupt block).
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] if `offset` is not a slot start inside the
    /// tier or `src` is longer than a slot; [`crate::StoreErr::Io`].
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

    /// Return the slot at `offset` to the free list.
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] if `offset` is not a slot start inside the tier.
    fn free_block(&self, tier: Tier, offset: u64) -> Result<()>;

    /// Rebuild every tier's free list: the slots in `live` are in use, every other slot
    /// inside the tier is free. A live slot beyond the tier's end (its data never reached
    /// the medium, e.g. after power loss under a relaxed durability policy) extends the
    /// tier with zeros, so reading it fails its checksum instead of aliasing a new block.
    ///
    /// # Errors
    /// [`crate::StoreErr::InvalidArgument`] naming the first entry that is not a slot
    /// start inside its tier (replay validates offsets first, so this means a bug).
    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64)>) -> Result<()>;

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
                live: &mut dyn Iterator<Item = ($crate::types::Tier, u64)>,
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
