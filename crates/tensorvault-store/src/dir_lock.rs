//! What an open directory store holds: the `flock`ed files of its collection and, for a
//! writer, its claim in this process's table of collections open for writing (so a
//! second writer in the same process is told so; `flock` cannot tell it from another
//! process).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreErr};

/// What an open directory store holds until it is dropped: its `flock`ed files and, for a
/// writer, its entry in this process's table of collections open for writing.
pub(crate) struct DirLock {
    _files: Vec<File>,
    _claim: Option<Claim>,
}

impl DirLock {
    /// Hold `files` (their `flock`s) and, for a writer, its `claim`.
    pub(crate) fn new(files: Vec<File>, claim: Option<Claim>) -> Self {
        Self {
            _files: files,
            _claim: claim,
        }
    }
}

/// A collection directory claimed for writing in this process; released on drop.
pub(crate) struct Claim(PathBuf);

impl Drop for Claim {
    fn drop(&mut self) {
        open_here().remove(&self.0);
    }
}

/// Collection directories this process holds open for writing: `flock` cannot tell a
/// second open in the same process from one in another, so the error would blame
/// "another process".
fn open_here() -> std::sync::MutexGuard<'static, std::collections::HashSet<PathBuf>> {
    static OPEN: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<PathBuf>>> =
        std::sync::OnceLock::new();
    OPEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Claim `dir` for writing in this process.
///
/// # Errors
/// [`StoreErr::Locked`] if this process already has it open for writing.
pub(crate) fn claim(dir: &Path) -> Result<Claim> {
    let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    if !open_here().insert(key.clone()) {
        return Err(StoreErr::Locked {
            path: dir.to_owned(),
            held: "already open for writing in this process (close the other store first, or open this one read-only)",
            waited: String::new(),
        });
    }
    Ok(Claim(key))
}
