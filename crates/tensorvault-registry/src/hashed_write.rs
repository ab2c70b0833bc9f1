//! Writing a version's files while hashing them, with progress in bytes through the
//! workspace's one progress layer ([`tensorvault_core::progress`]).
//!
//! A file is written in [`CHUNK_BYTES`] pieces on its own thread while this thread hashes
//! it (whole-file SHA-256, per-chunk BLAKE3 on the other cores). A byte counts as done when
//! it is both written and hashed, so the reported position never runs ahead of the slower
//! side; a file's end is reported once more after its `fsync`.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use tensorvault_core::progress::{report, ProgressFn};

use crate::digest::{digest_all_reporting, FileDigest, CHUNK_BYTES};
use crate::error::{RegistryError, Result};

/// Progress of one save over `total` bytes (the sum of the files it writes).
pub(crate) struct SaveProgress<'a> {
    progress: Option<&'a ProgressFn>,
    total: u64,
    /// Bytes of the files finished before the current one.
    base: u64,
}

impl<'a> SaveProgress<'a> {
    /// A save of `total` bytes reporting to `progress` (nothing when `None`).
    pub(crate) fn new(progress: Option<&'a ProgressFn>, total: u64) -> Self {
        report(progress, 0, total);
        SaveProgress {
            progress,
            total,
            base: 0,
        }
    }
}

/// Both sides of one file: bytes written and bytes hashed.
struct FileCounters<'p, 'a> {
    save: &'p SaveProgress<'a>,
    written: AtomicU64,
    hashed: AtomicU64,
}

impl FileCounters<'_, '_> {
    fn update(&self, counter: &AtomicU64, n: u64) {
        counter.store(n, Ordering::Relaxed);
        let done = self
            .written
            .load(Ordering::Relaxed)
            .min(self.hashed.load(Ordering::Relaxed));
        report(self.save.progress, self.save.base + done, self.save.total);
    }
}

/// Writes `bytes` to `path` (fsynced) while hashing them whole and per chunk, in parallel,
/// reporting the bytes both written and hashed to `progress`.
pub(crate) fn write_hashed(
    path: &Path,
    name: &str,
    bytes: &[u8],
    progress: &mut SaveProgress<'_>,
) -> Result<FileDigest> {
    let counters = FileCounters {
        save: progress,
        written: AtomicU64::new(0),
        hashed: AtomicU64::new(0),
    };
    let write = || -> Result<()> {
        let mut f = File::create(path).map_err(RegistryError::io(path))?;
        let mut done = 0u64;
        for part in bytes.chunks(CHUNK_BYTES as usize) {
            f.write_all(part).map_err(RegistryError::io(path))?;
            done += part.len() as u64;
            counters.update(&counters.written, done);
        }
        tensorvault_core::fsio::sync_all(&f, path).map_err(RegistryError::io(path))
    };
    // Writing and fsync wait mostly on the page cache and the device: they run on their
    // own thread so that both rayon workers hash.
    let (written, (whole, chunks)) = std::thread::scope(|s| {
        let w = s.spawn(write);
        let d = digest_all_reporting(bytes, &|n| counters.update(&counters.hashed, n));
        (w.join(), d)
    });
    written.unwrap_or_else(|_| {
        Err(RegistryError::Io {
            path: path.to_owned(),
            source: std::io::Error::other("writer thread panicked"),
        })
    })?;
    progress.base += bytes.len() as u64;
    // The two sides' reports may arrive in either order: the file's end is reported once
    // more, after its fsync, so the last position seen is exact.
    report(progress.progress, progress.base, progress.total);
    Ok(FileDigest {
        path: name.to_owned(),
        bytes: bytes.len() as u64,
        sha256: whole,
        chunks: Some(chunks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn reports_every_byte_of_every_file_in_order_and_never_past_the_total() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        let cb: ProgressFn = Arc::new(move |done, total| s.lock().unwrap().push((done, total)));
        // Two files: one of 2.5 chunks, one empty, one small.
        let a = vec![7u8; (CHUNK_BYTES as usize) * 5 / 2];
        let b: Vec<u8> = Vec::new();
        let c = vec![1u8; 1000];
        let total = (a.len() + b.len() + c.len()) as u64;
        let mut p = SaveProgress::new(Some(&cb), total);
        let da = write_hashed(&dir.path().join("a"), "a", &a, &mut p).unwrap();
        write_hashed(&dir.path().join("b"), "b", &b, &mut p).unwrap();
        write_hashed(&dir.path().join("c"), "c", &c, &mut p).unwrap();
        assert_eq!(da.bytes, a.len() as u64);
        assert_eq!(da.sha256, crate::digest::digest_all(&a).0);
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), a);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.first(), Some(&(0, total)));
        assert_eq!(seen.last(), Some(&(total, total)));
        assert!(seen.iter().all(|&(d, t)| t == total && d <= total));
        // The first file's chunk boundaries are reported on the way.
        assert!(seen.iter().any(|&(d, _)| d == CHUNK_BYTES));
    }

    #[test]
    fn without_a_callback_nothing_is_reported_and_the_digest_is_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let a = vec![3u8; 5000];
        let d = write_hashed(
            &dir.path().join("a"),
            "a",
            &a,
            &mut SaveProgress::new(None, 0),
        )
        .unwrap();
        assert_eq!(d.sha256, crate::digest::digest_all(&a).0);
    }
}
