//! The O_DIRECT read path: the stand-in for cuFile (GPU Direct Storage), which reads
//! page-aligned file ranges into page-aligned buffers bypassing the page cache.
//!
//! Records are read with `O_DIRECT` into a 4096-aligned buffer, covering the record's
//! range rounded out to 4096-byte boundaries, and decoded from there. Linux only; other
//! systems, and filesystems that refuse `O_DIRECT` (tmpfs), give
//! [`FormatError::Io`] with operation `"open with O_DIRECT"`.

use std::fs::File;
use std::path::Path;

use super::batch::batch_paths;
use super::codec::decode_ref;
use super::embedding::FusedEmbeddingRef;
use super::error::CgebError;
use super::extent::check_extent;
use super::index::BatchIndex;
use super::layout::DIRECT_IO_ALIGNMENT as PAGE;
use crate::FormatError;

/// The operation named in the error when the data file cannot be opened with O_DIRECT.
pub const DIRECT_OPEN_OP: &str = "open with O_DIRECT";

/// A page-aligned scratch buffer (safe code: over-allocate, then start at the first
/// 4096-aligned byte).
#[derive(Debug, Default)]
struct PageBuf {
    raw: Vec<u8>,
    start: usize,
}

impl PageBuf {
    fn get(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + PAGE || self.start + len > self.raw.len() {
            self.raw = vec![0u8; len + PAGE];
        }
        self.start = self.raw.as_ptr().align_offset(PAGE).min(PAGE);
        &mut self.raw[self.start..self.start + len]
    }
}

/// Reads records of a batch through `O_DIRECT`.
#[derive(Debug)]
pub struct DirectReader {
    file: File,
    index: BatchIndex,
    data_len: u64,
    verify: bool,
    buf: PageBuf,
}

impl DirectReader {
    /// Open the batch at `path` (`NAME.cgeb` with O_DIRECT, `NAME.cgei` read normally and
    /// checked against the data file's length; the data hash is not recomputed here, use
    /// [`super::BatchReader`] for that).
    ///
    /// # Errors
    /// [`FormatError::Io`] (operation [`DIRECT_OPEN_OP`] if the system or filesystem
    /// refuses O_DIRECT), and every rejection of [`BatchIndex::parse`].
    pub fn open(path: &Path, verify_records: bool) -> Result<Self, FormatError> {
        let (data_path, index_path) = batch_paths(path);
        let index_bytes = FormatError::read_regular(&index_path)?;
        // O_DIRECT cannot be combined with the non-blocking open of `open_regular`: refuse
        // a FIFO, socket, device or directory by its type first (a FIFO open would block).
        if let Some(kind) = tensorvault_core::regular::FileKind::of_path(&data_path) {
            return Err(FormatError::Core(
                tensorvault_core::CoreError::NotRegularFile {
                    path: data_path,
                    kind,
                },
            ));
        }
        let file = open_direct(&data_path)
            .map_err(FormatError::io(DIRECT_OPEN_OP, data_path.display()))?;
        let data_len = file
            .metadata()
            .map_err(FormatError::io("stat", data_path.display()))?
            .len();
        let index = BatchIndex::parse(&index_bytes, data_len)?;
        Ok(DirectReader {
            file,
            index,
            data_len,
            verify: verify_records,
            buf: PageBuf::default(),
        })
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the batch holds no records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Read record `i` with one aligned O_DIRECT read and decode it from the buffer.
    ///
    /// # Errors
    /// [`CgebError::IndexOutOfRange`], [`FormatError::Io`], a short read as
    /// [`CgebError::BufferTooShort`], every decode rejection (file offsets), and the
    /// batch layout rules of [`super::BatchReader::get`] ([`CgebError::GapNotZero`],
    /// [`CgebError::TrailingData`]).
    pub fn read(&mut self, i: usize) -> Result<FusedEmbeddingRef<'_>, FormatError> {
        let Some((start, end)) = self.index.range(i, self.data_len) else {
            return Err(CgebError::IndexOutOfRange {
                index: i as u64,
                count: self.index.len() as u64,
            }
            .into());
        };
        let page = PAGE as u64;
        let lo = start - start % page;
        let hi = end.div_ceil(page) * page;
        let len = usize::try_from(hi - lo).map_err(|_| FormatError::InvalidArgument {
            name: "record",
            reason: "record range does not fit in memory".into(),
        })?;
        let buf = self.buf.get(len);
        let mut done = 0usize;
        while done < len {
            let n = read_at(&self.file, &mut buf[done..], lo + done as u64)
                .map_err(FormatError::io("read (O_DIRECT)", "cgeb data file"))?;
            if n == 0 {
                break;
            }
            done += n;
        }
        let skip = (start - lo) as usize;
        let want = (end - lo) as usize;
        if done < want {
            return Err(CgebError::BufferTooShort {
                format: super::layout::FORMAT,
                what: "record (O_DIRECT read)",
                offset: start,
                needed: end - start,
                available: (done.saturating_sub(skip)) as u64,
            }
            .into());
        }
        let last = i + 1 == self.index.len();
        let r = decode_ref(&buf[skip..want], start, self.verify)?;
        check_extent(i as u64, start, &buf[skip..want], r.record_len(), last)?;
        Ok(r)
    }
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> std::io::Result<File> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "O_DIRECT reads are implemented on Linux only",
    ))
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, off)
}

#[cfg(not(unix))]
fn read_at(_f: &File, _buf: &mut [u8], _off: u64) -> std::io::Result<usize> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "positioned reads are implemented on Unix only",
    ))
}
