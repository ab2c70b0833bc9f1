//! Owned, 64-byte-aligned buffers.

use std::fmt;
use std::marker::PhantomData;

use bytemuck::{Pod, Zeroable};

/// The alignment of every [`AlignedBuf`]: one cache line, and enough for AVX-512 loads.
pub const ALIGNMENT: usize = 64;

/// One aligned block of storage for small buffers.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Block([u8; ALIGNMENT]);

/// Buffers at least this large are anonymous memory maps advised for transparent huge
/// pages: on a machine where every 4 KiB page fault costs microseconds (VMs), a fresh
/// 600 MB buffer otherwise costs more to fault in than to fill. numpy does the same for
/// its large arrays.
pub const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

enum Storage {
    Heap(Vec<Block>),
    Map(memmap2::MmapMut),
}

impl Storage {
    fn zeroed(bytes: usize) -> Self {
        if bytes >= HUGE_PAGE_THRESHOLD {
            if let Ok(map) = memmap2::MmapMut::map_anon(bytes) {
                #[cfg(target_os = "linux")]
                {
                    // Advice only; a kernel without THP simply ignores it.
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                return Storage::Map(map);
            }
        }
        Storage::Heap(bytemuck::zeroed_vec::<Block>(bytes.div_ceil(ALIGNMENT)))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Heap(v) => bytemuck::cast_slice(v),
            Storage::Map(m) => m,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Heap(v) => bytemuck::cast_slice_mut(v),
            Storage::Map(m) => m,
        }
    }
}

/// An owned buffer of `len` elements of `T`, starting on a 64-byte boundary.
///
/// Allocation is zeroed lazily by the OS (`calloc`, or an anonymous map with huge pages
/// for large buffers), so a large buffer costs no memory traffic until it is written.
/// The buffer never grows: its length is fixed at construction, from a length the caller
/// has already validated.
pub struct AlignedBuf<T: Pod> {
    storage: Storage,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> Clone for AlignedBuf<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self.as_slice())
    }
}

impl<T: Pod> AlignedBuf<T> {
    /// A zero-filled buffer of `len` elements.
    ///
    /// # Panics
    /// If `len * size_of::<T>()` overflows `usize` (callers validate lengths first), or
    /// if `T` needs more than 64-byte alignment.
    #[must_use]
    pub fn zeroed(len: usize) -> Self {
        assert!(
            std::mem::align_of::<T>() <= ALIGNMENT,
            "element alignment above 64"
        );
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("AlignedBuf length overflows usize");
        AlignedBuf {
            storage: Storage::zeroed(bytes),
            len,
            _elem: PhantomData,
        }
    }

    /// A buffer holding a copy of `data`.
    #[must_use]
    pub fn from_slice(data: &[T]) -> Self {
        let mut buf = Self::zeroed(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        buf
    }

    /// Number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements.
    #[must_use]
    pub fn as_slice(&self) -> &[T] {
        let bytes = self.len * std::mem::size_of::<T>();
        bytemuck::cast_slice(&self.storage.bytes()[..bytes])
    }

    /// The elements, mutably.
    #[must_use]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        let bytes = self.len * std::mem::size_of::<T>();
        bytemuck::cast_slice_mut(&mut self.storage.bytes_mut()[..bytes])
    }

    /// The raw bytes of the elements.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.as_slice())
    }

    /// The raw bytes of the elements, mutably.
    #[must_use]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self.as_mut_slice())
    }

    /// Reinterpret the buffer as elements of another plain-old-data type of the same total
    /// byte length, without copying. Returns `None` when the byte length is not a multiple
    /// of `U`'s size.
    #[must_use]
    pub fn cast<U: Pod>(self) -> Option<AlignedBuf<U>> {
        let bytes = self.len * std::mem::size_of::<T>();
        let usz = std::mem::size_of::<U>();
        if usz == 0 || !bytes.is_multiple_of(usz) || std::mem::align_of::<U>() > ALIGNMENT {
            return None;
        }
        Some(AlignedBuf {
            storage: self.storage,
            len: bytes / usz,
            _elem: PhantomData,
        })
    }
}

impl<T: Pod> std::ops::Deref for AlignedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Pod> std::ops::DerefMut for AlignedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for AlignedBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<T: Pod + PartialEq> PartialEq for AlignedBuf<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0usize, 1, 15, 16, 17, 1000] {
            let b = AlignedBuf::<f32>::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
            assert!(b.iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn large_buffers_are_mapped_aligned_and_zeroed() {
        let mut b = AlignedBuf::<f32>::zeroed(HUGE_PAGE_THRESHOLD);
        assert!(matches!(b.storage, Storage::Map(_)));
        assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
        assert!(b.iter().step_by(4096).all(|&x| x == 0.0));
        let n = b.len();
        b[n - 1] = 7.0;
        let c = b.clone();
        assert_eq!(c[n - 1], 7.0);
        assert_eq!(c.cast::<u8>().unwrap().len(), n * 4);
    }

    #[test]
    fn write_read_and_cast() {
        let mut b = AlignedBuf::<u32>::zeroed(3);
        b.copy_from_slice(&[1, 2, 0xFFFF_FFFF]);
        assert_eq!(&b[..], &[1, 2, 0xFFFF_FFFF]);
        let bytes = b.clone().cast::<u8>().unwrap();
        assert_eq!(bytes.len(), 12);
        assert_eq!(bytes[8..12], [0xFF; 4]);
        assert!(AlignedBuf::<u8>::zeroed(3).cast::<u16>().is_none());
        assert_eq!(
            AlignedBuf::from_slice(&[1.5f32, 2.5]).as_slice(),
            &[1.5, 2.5]
        );
    }
}
