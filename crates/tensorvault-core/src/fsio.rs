//! The file layer every durable writer of tensorvault goes through: positioned writes,
//! appends, truncation, hole punching, fsync / fdatasync, rename, hard link, removal and
//! directory fsync. Each function performs the plain `std`/`libc` call; before it, an
//! [`Observer`] registered for a directory containing the path (tests only) sees the
//! operation and may refuse it or skip a sync.
//!
//! This is the seam the power-cut suites use ([`power_cut`], feature `fault-injection`):
//! they count every operation, cut the power before operation `N + 1` and rebuild what a
//! disk would hold after the cut from what completed syncs covered. Without an observer
//! the cost is one relaxed atomic load per operation.
//!
//! Writes into a file that an observer does not see one by one (e.g. through a
//! `BufWriter` into an [`crate::atomic::AtomicFile`]) are still covered: a sync reads the
//! file's contents as they are at that moment.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

#[cfg(feature = "fault-injection")]
pub mod power_cut;

/// A file-system operation about to be performed.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Op<'a> {
    /// Positioned write of `len` bytes at `offset`.
    Write {
        /// The file.
        path: &'a Path,
        /// First byte written.
        offset: u64,
        /// Bytes written.
        len: u64,
    },
    /// Write of `len` bytes at the file's current position (an append).
    Append {
        /// The file.
        path: &'a Path,
        /// Bytes written.
        len: u64,
    },
    /// Truncate or extend to `len` bytes.
    SetLen {
        /// The file.
        path: &'a Path,
        /// New length.
        len: u64,
    },
    /// Deallocate `len` bytes at `offset` (they read as zeros; the length is kept).
    Punch {
        /// The file.
        path: &'a Path,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// fsync / fdatasync of a file: its data (and the size needed to read it) durable.
    Sync {
        /// The file.
        path: &'a Path,
    },
    /// Rename `from` over `to`.
    Rename {
        /// Old name.
        from: &'a Path,
        /// New name (replaced if it exists).
        to: &'a Path,
    },
    /// A second name `to` for the file `from` (fails if `to` exists).
    HardLink {
        /// Existing name.
        from: &'a Path,
        /// New name.
        to: &'a Path,
    },
    /// Remove the name `path`.
    Remove {
        /// The name.
        path: &'a Path,
    },
    /// fsync of a directory: its entries (creations, renames, removals) durable.
    SyncDir {
        /// The directory.
        dir: &'a Path,
    },
}

impl Op<'_> {
    /// The path the operation is filed under (a rename's or link's target directory is
    /// the source's in every use here).
    #[must_use]
    pub fn path(&self) -> &Path {
        match *self {
            Op::Write { path, .. }
            | Op::Append { path, .. }
            | Op::SetLen { path, .. }
            | Op::Punch { path, .. }
            | Op::Sync { path }
            | Op::Remove { path } => path,
            Op::Rename { from, .. } | Op::HardLink { from, .. } => from,
            Op::SyncDir { dir } => dir,
        }
    }

    /// Whether the operation is a file or directory sync.
    #[must_use]
    pub fn is_sync(&self) -> bool {
        matches!(self, Op::Sync { .. } | Op::SyncDir { .. })
    }
}

/// What an observer wants done with an operation it allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Perform it.
    Perform,
    /// Report success without performing it (a simulated disk makes syncs durable itself).
    Skip,
}

/// Sees operations on paths under the directory it was registered for.
pub trait Observer: Send + Sync {
    /// Called before `op` is performed.
    ///
    /// # Errors
    /// The error the operation then fails with (it is not performed).
    fn before(&self, op: &Op<'_>) -> io::Result<Verdict>;
}

static ACTIVE: AtomicUsize = AtomicUsize::new(0);

type Registered = (PathBuf, Arc<dyn Observer>);

static OBSERVERS: RwLock<Vec<Registered>> = RwLock::new(Vec::new());

/// Removes its observer when dropped.
#[must_use = "the observer is removed when the guard is dropped"]
pub struct ObserverGuard {
    root: PathBuf,
}

impl Drop for ObserverGuard {
    fn drop(&mut self) {
        let mut obs = OBSERVERS
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = obs.iter().position(|(r, _)| *r == self.root) {
            obs.remove(i);
            ACTIVE.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Register `observer` for every operation on a path under `root` (compared
/// component-wise as given: use the same spelling of `root` as the writer). One observer
/// per root.
///
/// # Panics
/// If `root` already has an observer (a test bug).
pub fn observe(root: &Path, observer: Arc<dyn Observer>) -> ObserverGuard {
    let mut obs = OBSERVERS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        obs.iter().all(|(r, _)| r != root),
        "{} already has an observer",
        root.display()
    );
    obs.push((root.to_path_buf(), observer));
    ACTIVE.fetch_add(1, Ordering::Release);
    ObserverGuard {
        root: root.to_path_buf(),
    }
}

fn consult(op: Op<'_>) -> io::Result<Verdict> {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        return Ok(Verdict::Perform);
    }
    let found = {
        let obs = OBSERVERS
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        obs.iter()
            .find(|(root, _)| op.path().starts_with(root))
            .map(|(_, o)| Arc::clone(o))
    };
    match found {
        Some(o) => o.before(&op),
        None => Ok(Verdict::Perform),
    }
}

/// Write all of `buf` at `offset` of `file` (named `path`).
///
/// # Errors
/// The write's error.
pub fn write_all_at(file: &File, path: &Path, buf: &[u8], offset: u64) -> io::Result<()> {
    let op = Op::Write {
        path,
        offset,
        len: buf.len() as u64,
    };
    if consult(op)? == Verdict::Skip {
        return Ok(());
    }
    pwrite_all(file, buf, offset)
}

#[cfg(unix)]
fn pwrite_all(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(not(unix))]
fn pwrite_all(mut file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(buf)
}

/// Write all of `buf` at the current position of `file` (named `path`).
///
/// # Errors
/// The write's error.
pub fn append(mut file: &File, path: &Path, buf: &[u8]) -> io::Result<()> {
    let op = Op::Append {
        path,
        len: buf.len() as u64,
    };
    if consult(op)? == Verdict::Skip {
        return Ok(());
    }
    file.write_all(buf)
}

/// Truncate or extend `file` (named `path`) to `len` bytes.
///
/// # Errors
/// The call's error.
pub fn set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    if consult(Op::SetLen { path, len })? == Verdict::Skip {
        return Ok(());
    }
    file.set_len(len)
}

/// Give `len` bytes at `offset` of `file` back to the file system (they read as zeros,
/// the length is kept). Returns whether the file system did it (`false` where hole
/// punching is unsupported, in which case nothing changed).
///
/// # Errors
/// Only an observer's refusal; the file system's own failures are `Ok(false)`.
pub fn punch_hole(file: &File, path: &Path, offset: u64, len: u64) -> io::Result<bool> {
    if len == 0 || consult(Op::Punch { path, offset, len })? == Verdict::Skip {
        return Ok(false);
    }
    Ok(punch(file, offset, len))
}

#[cfg(target_os = "linux")]
fn punch(file: &File, offset: u64, len: u64) -> bool {
    use std::os::unix::io::AsRawFd;
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return false;
    };
    // SAFETY: fallocate on an open descriptor with in-range arguments; it touches no
    // memory of ours.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            n,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn punch(_file: &File, _offset: u64, _len: u64) -> bool {
    false
}

/// fsync `file` (named `path`): data and metadata.
///
/// # Errors
/// The call's error.
pub fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    if consult(Op::Sync { path })? == Verdict::Skip {
        return Ok(());
    }
    file.sync_all()
}

/// fdatasync `file` (named `path`): data and the size needed to read it.
///
/// # Errors
/// The call's error.
pub fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    if consult(Op::Sync { path })? == Verdict::Skip {
        return Ok(());
    }
    file.sync_data()
}

/// Rename `from` over `to`.
///
/// # Errors
/// The call's error.
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    if consult(Op::Rename { from, to })? == Verdict::Skip {
        return Ok(());
    }
    std::fs::rename(from, to)
}

/// Give the file `from` the second name `to` (which must not exist).
///
/// # Errors
/// The call's error (`AlreadyExists` if `to` exists).
pub fn hard_link(from: &Path, to: &Path) -> io::Result<()> {
    if consult(Op::HardLink { from, to })? == Verdict::Skip {
        return Ok(());
    }
    std::fs::hard_link(from, to)
}

/// Remove the name `path`.
///
/// # Errors
/// The call's error.
pub fn remove_file(path: &Path) -> io::Result<()> {
    if consult(Op::Remove { path })? == Verdict::Skip {
        return Ok(());
    }
    std::fs::remove_file(path)
}

/// fsync the directory `dir`, so that creations, renames and removals in it are durable.
///
/// # Errors
/// The call's error.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    if consult(Op::SyncDir { dir })? == Verdict::Skip {
        return Ok(());
    }
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        Ok(())
    }
}
