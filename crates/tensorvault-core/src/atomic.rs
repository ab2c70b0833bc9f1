//! Atomic file replacement: write to a temporary file in the destination's directory,
//! fsync it, rename it over the destination, then fsync the directory.
//!
//! A reader never sees a half-written file, and after [`AtomicFile::commit`] returns the
//! new contents survive a crash. Dropping an uncommitted [`AtomicFile`] removes the
//! temporary file, so a failed write leaves no partial output behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{fsio, CoreError};

/// Temporary files of the [`AtomicFile`]s alive in this process, for
/// [`remove_live_temps`], and whether the process is terminating (no new temporary files
/// then).
struct LiveTemps {
    paths: Vec<PathBuf>,
    closing: bool,
}

static LIVE_TEMPS: Mutex<LiveTemps> = Mutex::new(LiveTemps {
    paths: Vec::new(),
    closing: false,
});

fn live_temps() -> std::sync::MutexGuard<'static, LiveTemps> {
    LIVE_TEMPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn forget_temp(tmp: &Path) {
    let mut live = live_temps();
    if let Some(i) = live.paths.iter().position(|p| p == tmp) {
        live.paths.swap_remove(i);
    }
}

/// Remove the temporary file of every uncommitted [`AtomicFile`] of this process and
/// return how many there were. For a process about to exit on a signal (SIGTERM,
/// SIGINT), where destructors do not run: call it from a normal thread (e.g. one that
/// waits for the signal with `sigwait`), never from a signal handler.
///
/// After it, [`AtomicFile::create`] fails in this process: a temporary file is created
/// and registered under one lock, so a file either exists and is removed here, or is
/// never created (no window in which a signal leaves one behind).
pub fn remove_live_temps() -> usize {
    let mut live = live_temps();
    live.closing = true;
    let paths = std::mem::take(&mut live.paths);
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    paths.len()
}

/// A file being written that replaces `dest` only when committed.
#[derive(Debug)]
pub struct AtomicFile {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
}

impl AtomicFile {
    /// Create a temporary file next to `dest`.
    ///
    /// # Errors
    /// [`CoreError::Io`] if the temporary file cannot be created.
    pub fn create(dest: impl AsRef<Path>) -> Result<Self, CoreError> {
        let dest = dest.as_ref().to_path_buf();
        let dir = parent_dir(&dest);
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".to_owned());
        let mut attempt = 0u32;
        loop {
            let tmp = dir.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
            // Create and register under the lock `remove_live_temps` takes.
            let mut live = live_temps();
            if live.closing {
                return Err(CoreError::Io {
                    op: "create temporary file for",
                    path: dest.display().to_string(),
                    source: io::Error::other("the process is terminating"),
                });
            }
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
            {
                Ok(file) => {
                    live.paths.push(tmp.clone());
                    return Ok(AtomicFile {
                        file: Some(file),
                        tmp,
                        dest,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1;
                }
                Err(source) => {
                    // Named by the destination the caller gave: the temporary name was
                    // never created and means nothing to whoever reads the error.
                    return Err(CoreError::Io {
                        op: "create temporary file for",
                        path: dest.display().to_string(),
                        source,
                    });
                }
            }
        }
    }

    /// The open temporary file (for positioned writes, `set_len`, ...).
    #[must_use]
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("file is present until commit")
    }

    /// The temporary file's path.
    #[must_use]
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The destination path.
    #[must_use]
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// fsync the data, rename over the destination and fsync the directory.
    ///
    /// # Errors
    /// [`CoreError::Io`] if any of the steps fails; the temporary file is removed.
    pub fn commit(self) -> Result<(), CoreError> {
        self.commit_with(true)
    }

    /// Rename over the destination; with `durable` (what [`AtomicFile::commit`] does) the
    /// data is fsynced first and the directory after. Without it the replacement is still
    /// atomic for readers, but a crash soon after may lose the new contents: for scratch
    /// outputs and benchmarks only.
    ///
    /// # Errors
    /// [`CoreError::Io`] if any of the steps fails; the temporary file is removed.
    pub fn commit_with(mut self, durable: bool) -> Result<(), CoreError> {
        let file = self.file.take().expect("file is present until commit");
        fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CoreError {
            let path = path.display().to_string();
            move |source| CoreError::Io { op, path, source }
        }
        // A replaced file keeps its permissions (a private 0600 file stays private).
        if let Ok(meta) = std::fs::metadata(&self.dest) {
            file.set_permissions(meta.permissions())
                .map_err(io_err("set permissions of", &self.tmp))?;
        }
        if durable {
            fsio::sync_all(&file, &self.tmp).map_err(io_err("fsync", &self.tmp))?;
        }
        drop(file);
        fsio::rename(&self.tmp, &self.dest).map_err(io_err("rename", &self.dest))?;
        forget_temp(&self.tmp);
        if durable {
            let dir = parent_dir(&self.dest);
            sync_dir(&dir).map_err(io_err("fsync directory", &dir))?;
        }
        // The temp name no longer exists; make Drop a no-op.
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file
            .as_ref()
            .expect("file is present until commit")
            .write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file
            .as_ref()
            .expect("file is present until commit")
            .flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
            forget_temp(&self.tmp);
        }
    }
}

/// Write `bytes` to `dest` atomically.
///
/// # Errors
/// [`CoreError::Io`] if the write or any durability step fails.
pub fn write_atomic(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<(), CoreError> {
    let mut f = AtomicFile::create(dest)?;
    f.write_all(bytes).map_err(|source| CoreError::Io {
        op: "write",
        path: f.dest.display().to_string(),
        source,
    })?;
    f.commit()
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

pub use crate::fsio::sync_dir;

#[cfg(test)]
mod tests {
    use super::*;

    /// An output in a directory that does not exist: the error names the path the caller
    /// gave, not the temporary name that was never created (issue 25 class 5).
    #[test]
    fn a_failed_create_names_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("missing").join("out.npy");
        match AtomicFile::create(&dest) {
            Err(CoreError::Io { op, path, source }) => {
                assert_eq!(op, "create temporary file for");
                assert_eq!(path, dest.display().to_string());
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(write_atomic(&dest, b"x")
            .unwrap_err()
            .to_string()
            .ends_with(&format!(
                "for {}: No such file or directory (os error 2)",
                dest.display()
            )));
    }

    #[test]
    fn commit_replaces_and_drop_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.bin");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"half").unwrap();
            // dropped without commit
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomic(&dest, b"new").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
