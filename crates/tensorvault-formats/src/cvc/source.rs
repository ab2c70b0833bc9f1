//! Where a reader's bytes come from: positioned reads over a file, a memory map or a
//! byte buffer.

use std::fs::File;
use std::io;

/// A byte source that supports positioned reads from several threads at once.
pub trait ReadAt: Send + Sync {
    /// Total length in bytes.
    fn len(&self) -> u64;

    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill `buf` from `offset`. Fails with `UnexpectedEof` if the source is shorter.
    ///
    /// # Errors
    /// The underlying I/O error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The whole source as a slice, when it is in memory (a map or a buffer); readers use
    /// it to decode without an intermediate copy.
    fn as_bytes(&self) -> Option<&[u8]> {
        None
    }

    /// Hint that `len` bytes at `offset` will be read soon, so that storage starts reading
    /// them in the background (`posix_fadvise` / `madvise` `WILLNEED`). Returns `false`
    /// when the source has no storage to read ahead from (bytes already in memory), so
    /// callers can stop hinting. Advice only: failures are ignored. The default does
    /// nothing and returns `false`.
    fn will_need(&self, offset: u64, len: u64) -> bool {
        let _ = (offset, len);
        false
    }

    /// Make `len` bytes at `offset` of [`ReadAt::as_bytes`] present before they are read:
    /// a memory map populates its page tables in one call (`MADV_POPULATE_READ`) instead
    /// of taking a fault per page. Advice only; the default does nothing.
    fn map_in(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

fn read_from_slice(src: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
    let end = start
        .checked_add(buf.len())
        .ok_or(io::ErrorKind::UnexpectedEof)?;
    let bytes = src.get(start..end).ok_or(io::ErrorKind::UnexpectedEof)?;
    buf.copy_from_slice(bytes);
    Ok(())
}

impl ReadAt for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_from_slice(self, buf, offset)
    }
    fn as_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_from_slice(self, buf, offset)
    }
    fn as_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn as_bytes(&self) -> Option<&[u8]> {
        (**self).as_bytes()
    }
    fn will_need(&self, offset: u64, len: u64) -> bool {
        (**self).will_need(offset, len)
    }
    fn map_in(&self, offset: u64, len: u64) {
        (**self).map_in(offset, len);
    }
}

#[cfg(unix)]
/// `(offset, len)` clipped to a source of `total` bytes, as `usize` for `madvise`.
fn clip(offset: u64, len: u64, total: usize) -> Option<(usize, usize)> {
    let start = usize::try_from(offset).ok().filter(|&s| s < total)?;
    let len = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(total - start);
    (len > 0).then_some((start, len))
}

impl ReadAt for memmap2::Mmap {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_from_slice(self, buf, offset)
    }
    fn as_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
    #[cfg(unix)]
    fn will_need(&self, offset: u64, len: u64) -> bool {
        if let Some((start, len)) = clip(offset, len, <[u8]>::len(self)) {
            // Advice only: a kernel that refuses it still serves the reads by faults.
            let _ = self.advise_range(memmap2::Advice::WillNeed, start, len);
        }
        true
    }
    #[cfg(target_os = "linux")]
    fn map_in(&self, offset: u64, len: u64) {
        if let Some((start, len)) = clip(offset, len, <[u8]>::len(self)) {
            // Linux 5.14+; older kernels return EINVAL and the pages fault in one by one.
            let _ = self.advise_range(memmap2::Advice::PopulateRead, start, len);
        }
    }
}

/// A file read with `pread`; its length is taken once, when the reader opens it.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    /// Wrap an open file.
    ///
    /// # Errors
    /// The error of `metadata()`.
    pub fn new(file: File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl ReadAt for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    #[cfg(unix)]
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }

    #[cfg(target_os = "linux")]
    fn will_need(&self, offset: u64, len: u64) -> bool {
        use std::os::fd::AsRawFd;
        if let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) {
            // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is
            // owned by `self.file` and open for the whole call. Advice only: the result
            // is ignored (a refused hint leaves the reads to the kernel's own readahead).
            let _ = unsafe {
                libc::posix_fadvise(self.file.as_raw_fd(), off, len, libc::POSIX_FADV_WILLNEED)
            };
        }
        true
    }

    #[cfg(windows)]
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt;
        while !buf.is_empty() {
            match self.file.seek_read(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}
