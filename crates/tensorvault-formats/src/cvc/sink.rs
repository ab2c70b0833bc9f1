//! Byte sinks for the writers: positioned writes into a file (thread-safe `pwrite`) or
//! into memory, and a counting sequential writer for assembling streamed files.

use std::fs::File;
use std::io::{self, Write};

use crate::FormatError;

/// Where the writers put bytes: at absolute offsets, from several threads at once.
pub(super) trait Sink: Sync {
    /// Write `bytes` at `offset`.
    fn put(&self, offset: u64, bytes: &[u8]) -> Result<(), FormatError>;
    /// The file is complete at `len` bytes (zero-extends a trailing gap).
    fn finish(&self, len: u64) -> Result<(), FormatError>;
}

/// An in-memory file.
pub(super) struct MemSink(pub(super) std::sync::Mutex<Vec<u8>>);

impl Sink for MemSink {
    fn put(&self, offset: u64, bytes: &[u8]) -> Result<(), FormatError> {
        let mut v = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (off, end) = (offset as usize, offset as usize + bytes.len());
        if v.len() < end {
            v.resize(end, 0);
        }
        v[off..end].copy_from_slice(bytes);
        Ok(())
    }
    fn finish(&self, len: u64) -> Result<(), FormatError> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .resize(len as usize, 0);
        Ok(())
    }
}

/// Positioned writes into a file (`pwrite`), safe from any number of threads.
pub(super) struct FileSink<'f> {
    pub(super) file: &'f File,
    pub(super) name: String,
}

impl Sink for FileSink<'_> {
    fn put(&self, offset: u64, bytes: &[u8]) -> Result<(), FormatError> {
        write_all_at(self.file, bytes, offset).map_err(FormatError::io("write", &self.name))
    }
    fn finish(&self, len: u64) -> Result<(), FormatError> {
        self.file
            .set_len(len)
            .map_err(FormatError::io("set length of", &self.name))
    }
}

#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_write(buf, offset)?;
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

pub(super) struct CountingWriter<W> {
    pub(super) inner: W,
    pub(super) pos: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub(super) fn pad_to<W: Write>(w: &mut CountingWriter<W>, offset: u64) -> Result<(), FormatError> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while w.pos < offset {
        let n = (offset - w.pos).min(ZEROS.len() as u64) as usize;
        w.write_all(&ZEROS[..n])
            .map_err(FormatError::io("write", "output"))?;
    }
    Ok(())
}
