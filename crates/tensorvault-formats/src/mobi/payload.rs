//! [`Payload`]: the bytes of a constant tensor, owned or shared with the read-only memory
//! map of the file it was read from (so [`super::Model::open`] copies no weights).
//!
//! A payload is a cheap-to-clone, immutable byte handle (`bytes::Bytes` inside): cloning
//! a model, a tensor or a payload never copies the bytes. Payloads built in memory (the
//! ONNX importer, the quantizer, the builder) own their bytes; payloads read by
//! [`super::Model::open`] from an uncompressed tensor point into the file's map, which
//! stays mapped as long as any payload (or a runtime session holding one) is alive.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// The bytes of a constant tensor: `dtype.size() * product(shape)` little-endian bytes,
/// owned or borrowed from a shared read-only memory map.
#[derive(Clone, Default)]
pub struct Payload {
    bytes: Bytes,
    mapped: bool,
}

impl Payload {
    /// A payload owning `bytes` (no copy).
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        Payload {
            bytes: Bytes::from(bytes),
            mapped: false,
        }
    }

    /// `range` of a shared buffer, without copying; `mapped` says whether that buffer is
    /// a memory map of a file. `None` if the range is not inside the buffer.
    pub(crate) fn share(buffer: &Bytes, start: usize, len: usize, mapped: bool) -> Option<Payload> {
        let end = start.checked_add(len)?;
        (end <= buffer.len()).then(|| Payload {
            bytes: buffer.slice(start..end),
            mapped,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the bytes live in the memory map of the file the model was opened from
    /// (not copied into memory of their own).
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// Give back to the kernel the resident pages of a mapped payload that no longer need
    /// to stay in memory (a caller that made its own copy of the values, e.g. packed
    /// weights): `madvise(MADV_DONTNEED)` over the whole pages inside the payload. The
    /// map is a read-only file mapping that is never written, so the bytes stay the same:
    /// a later read faults the file's pages back in. Returns the bytes released from the
    /// process's mapping (0 for a payload that is not mapped, one shorter than a page, or
    /// on a platform or kernel without the call). Peak memory, not correctness, is at
    /// stake: reading the payload afterwards is as valid as before.
    pub fn release_pages(&self) -> usize {
        if !self.mapped {
            return 0;
        }
        release(&self.bytes)
    }

    /// The bytes as a cheap-clone `bytes::Bytes` handle (shares the same memory).
    pub fn to_bytes(&self) -> Bytes {
        self.bytes.clone()
    }
}

/// `madvise(MADV_DONTNEED)` over the whole pages inside `bytes` (part of a read-only file
/// mapping); returns the bytes released.
#[cfg(target_os = "linux")]
fn release(bytes: &[u8]) -> usize {
    // SAFETY: sysconf only reads its integer argument.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let Ok(page) = usize::try_from(page) else {
        return 0;
    };
    if page == 0 {
        return 0;
    }
    let begin = bytes.as_ptr() as usize;
    let (start, end) = (
        begin.div_ceil(page) * page,
        (begin + bytes.len()) / page * page,
    );
    if end <= start {
        return 0;
    }
    // SAFETY: `start..end` is a whole number of pages inside `bytes`, which lie in a
    // read-only (PROT_READ) file mapping kept alive by `self` (only payloads of
    // `Model::open`'s map are `mapped`); nothing writes through it. MADV_DONTNEED on a
    // file mapping drops the page-table entries only: the memory stays mapped and a
    // later access refills it from the file, so every reference into the range keeps
    // seeing the same bytes (the map's usual caveat: the file is not modified meanwhile).
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    if rc == 0 {
        end - start
    } else {
        0
    }
}

#[cfg(not(target_os = "linux"))]
fn release(_bytes: &[u8]) -> usize {
    0
}

impl Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Payload::from_vec(v)
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        Payload::from_vec(v.to_vec())
    }
}

impl FromIterator<u8> for Payload {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        Payload::from_vec(iter.into_iter().collect())
    }
}

/// Equal when the bytes are equal (where they live does not matter).
impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Payload {}

/// Prints the length and where the bytes live, never the bytes (a weight tensor can be
/// megabytes).
impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Payload")
            .field("len", &self.bytes.len())
            .field("mapped", &self.mapped)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_shared_and_equality() {
        let p = Payload::from_vec(vec![1, 2, 3, 4]);
        assert!(!p.is_mapped());
        assert_eq!(&p[..], &[1, 2, 3, 4]);
        let buf = Bytes::from(vec![9u8, 1, 2, 3, 4, 9]);
        let s = Payload::share(&buf, 1, 4, true).unwrap();
        assert!(s.is_mapped());
        assert_eq!(s, p, "equality is by content");
        // No copy: the shared payload points into the buffer.
        assert_eq!(s.as_ptr(), buf[1..].as_ptr());
        assert!(Payload::share(&buf, 3, 4, true).is_none());
        assert!(Payload::share(&buf, usize::MAX, 2, true).is_none());
        assert_eq!(format!("{s:?}"), "Payload { len: 4, mapped: true }");
        let c: Payload = [5u8, 6].into_iter().collect();
        assert_eq!(c.as_slice(), &[5, 6]);
        // Owned bytes are never released (advice on them would zero anonymous memory).
        let big = Payload::share(&Bytes::from(vec![7u8; 1 << 16]), 0, 1 << 16, false).unwrap();
        assert_eq!(big.release_pages(), 0);
        assert!(big.iter().all(|&b| b == 7));
    }
}
