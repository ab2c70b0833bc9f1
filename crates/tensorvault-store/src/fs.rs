//! Stores on a local file system: `<root>/<tenant>/<collection>/` holding `meta.log`,
//! `names.log`, `tier0.dat` .. `tier3.dat`, `delta.dat` / `factor.dat` (when used) and a
//! `LOCK` file, with names validated so no tenant or collection can point outside the
//! root.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::block_io::MmapBlockIO;
use crate::catalog::Catalog;
use crate::clock::{Clock, SystemClock};
use crate::config::StoreConfig;
use crate::dir_lock::{claim, DirLock};
use crate::error::{Result, StoreErr};
use crate::meta_log::FileMetaLog;
use crate::store::TensorStore;

/// A store over a collection directory.
pub type DirStore<C = SystemClock> = TensorStore<C, MmapBlockIO, FileMetaLog>;

/// MetaLog file name.
pub const META_LOG: &str = "meta.log";
/// Name catalog file name.
pub const NAMES_LOG: &str = "names.log";
/// Lock file name.
pub const LOCK_FILE: &str = "LOCK";

/// Check a tenant or collection name: 1..=128 bytes of `[A-Za-z0-9._-]`, not starting
/// with `.` (so never `.`, `..` or a hidden file) — a single, portable path component.
///
/// # Errors
/// [`StoreErr::InvalidName`] naming the field and the reason.
pub fn validate_component(field: &'static str, name: &str) -> Result<()> {
    let bad = |reason| {
        Err(StoreErr::InvalidName {
            field,
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 128 {
        return bad("longer than 128 bytes");
    }
    if name.starts_with('.') {
        return bad("starts with '.'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// `<root>/<tenant>/<collection>` after validating both names.
///
/// # Errors
/// [`StoreErr::InvalidName`].
pub fn collection_dir(root: &Path, tenant: &str, collection: &str) -> Result<PathBuf> {
    validate_component("tenant", tenant)?;
    validate_component("collection", collection)?;
    Ok(root.join(tenant).join(collection))
}

/// Every `(tenant, collection)` under `root` that holds a `meta.log` entry (of any file
/// type), sorted.
///
/// # Errors
/// [`StoreErr::Io`] if `root` cannot be read.
pub fn list_collections(root: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(root).map_err(|e| StoreErr::io("read dir", root, e))?;
    for t in rd.flatten() {
        let Ok(tenant) = t.file_name().into_string() else {
            continue;
        };
        // file_type() does not follow links: a linked tenant is not listed (and would be
        // refused at open).
        if validate_component("tenant", &tenant).is_err()
            || !t.file_type().is_ok_and(|ft| ft.is_dir())
        {
            continue;
        }
        let Ok(rd2) = std::fs::read_dir(t.path()) else {
            continue;
        };
        for c in rd2.flatten() {
            let Ok(coll) = c.file_name().into_string() else {
                continue;
            };
            if validate_component("collection", &coll).is_ok()
                && c.file_type().is_ok_and(|ft| ft.is_dir())
                // Any entry named meta.log, not only a regular file: a collection whose log
                // is a FIFO or device is listed, so opening it reports what it is rather
                // than the collection silently disappearing from `ls`.
                && std::fs::symlink_metadata(c.path().join(META_LOG)).is_ok()
            {
                out.push((tenant.clone(), coll));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The store never follows a symbolic link out of `root`: the tenant and collection
/// directories must be real directories and every entry of the collection directory (tier
/// files, logs, LOCK, lineage side files) a real file or directory. A link planted there
/// would otherwise have the store write through it to a place outside the root. (`root`
/// itself is the caller's choice and may be a link.)
fn refuse_links(root: &Path, dir: &Path) -> Result<()> {
    let is_link = |p: &Path| -> Result<bool> {
        match std::fs::symlink_metadata(p) {
            Ok(m) => Ok(m.file_type().is_symlink()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreErr::io("stat", p, e)),
        }
    };
    // The directories first: if one is a link, nothing below is even listed.
    for p in [dir.parent().unwrap_or(root), dir] {
        if p != root && is_link(p)? {
            return Err(StoreErr::SymlinkRefused { path: p.to_owned() });
        }
    }
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreErr::io("read dir", dir, e)),
    };
    for e in rd {
        let e = e.map_err(|e| StoreErr::io("read dir", dir, e))?;
        let ft = e
            .file_type()
            .map_err(|err| StoreErr::io("stat", e.path(), err))?;
        if ft.is_symlink() {
            return Err(StoreErr::SymlinkRefused { path: e.path() });
        }
    }
    Ok(())
}

/// Take the collection's exclusive lock (one process at a time): an advisory `flock` on
/// the `LOCK` file (what earlier versions take) and on the collection directory itself.
/// The directory lock cannot be lost: deleting or replacing `LOCK` while a process holds
/// it used to let a second process in (whose acknowledged writes the first then lost),
/// but a directory cannot be removed while it holds the store's files, and its lock
/// lives on the open descriptor.
fn lock(dir: &Path, wait: std::time::Duration) -> Result<DirLock> {
    // The claim is released on every early return below (DirLock's drop).
    let claim = claim(dir)?;
    Ok(DirLock::new(lock_files(dir, wait)?, Some(claim)))
}

fn lock_files(dir: &Path, wait: std::time::Duration) -> Result<Vec<File>> {
    let path = dir.join(LOCK_FILE);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StoreErr::io("open", &path, e))?;
    let d = File::open(dir).map_err(|e| StoreErr::io("open", dir, e))?;
    // The LOCK file: writers only, so a holder is another writer: fail at once.
    flock_exclusive(
        &f,
        &path,
        dir,
        std::time::Duration::ZERO,
        "open for writing in another process",
    )?;
    // The directory: readers hold it shared for a listing or a verify; wait for them.
    flock_exclusive(
        &d,
        dir,
        dir,
        wait,
        "open in another process (readers or a writer)",
    )?;
    Ok(vec![f, d])
}

/// Most time a shared (reader) open waits for a writer to release the collection.
pub const SHARED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Take the collection's shared lock (any number of readers, no writer): `flock(LOCK_SH)`
/// on the collection directory, waiting up to [`SHARED_LOCK_WAIT`] for a writer (a put or
/// a compaction in another process) to finish instead of failing at once.
fn lock_shared(dir: &Path, wait: std::time::Duration) -> Result<DirLock> {
    Ok(DirLock::new(lock_shared_files(dir, wait)?, None))
}

fn lock_shared_files(dir: &Path, wait: std::time::Duration) -> Result<Vec<File>> {
    let d = File::open(dir).map_err(|e| StoreErr::io("open", dir, e))?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            let rc = unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(StoreErr::io("lock", dir, e));
            }
            if start.elapsed() >= wait {
                return Err(StoreErr::Locked {
                    path: dir.to_owned(),
                    held: "open for writing in another process",
                    waited: if wait.is_zero() {
                        String::new()
                    } else {
                        format!(" (waited {:.1} s)", wait.as_secs_f64())
                    },
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(vec![d])
}

/// `flock(LOCK_EX | LOCK_NB)` on `f` (the file at `path`) guarding collection `dir`,
/// retried for up to `wait` while another process holds it (`held` says who, for
/// [`StoreErr::Locked`]).
fn flock_exclusive(
    f: &File,
    path: &Path,
    dir: &Path,
    wait: std::time::Duration,
    held: &'static str,
) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own for the duration of the call; no
            // memory is passed.
            let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(StoreErr::io("lock", path, e));
            }
            if start.elapsed() >= wait {
                return Err(StoreErr::Locked {
                    path: dir.to_owned(),
                    held,
                    waited: if wait.is_zero() {
                        String::new()
                    } else {
                        format!(" (waited {:.1} s)", wait.as_secs_f64())
                    },
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    #[cfg(not(unix))]
    let _ = (f, path, dir, wait, held);
    Ok(())
}

impl<C: Clock> TensorStore<C, MmapBlockIO, FileMetaLog> {
    /// Open the collection `<root>/<tenant>/<collection>`, creating it (with
    /// `cfg.collection` as its geometry) if `create` and it does not exist.
    ///
    /// # Errors
    /// [`StoreErr::InvalidName`]; [`StoreErr::CollectionNotFound`] for a missing
    /// collection without `create`; the log's and backend's errors;
    /// [`StoreErr::InvalidArgument`] if another process holds the collection.
    pub fn open_dir(
        root: &Path,
        tenant: &str,
        collection: &str,
        clock: C,
        mut cfg: StoreConfig,
        create: bool,
    ) -> Result<Self> {
        let dir = collection_dir(root, tenant, collection)?;
        // Before anything is created: a linked tenant must not receive a new directory.
        refuse_links(root, &dir)?;
        let log_path = dir.join(META_LOG);
        if !log_path.exists() {
            if !create {
                return Err(StoreErr::CollectionNotFound {
                    tenant: tenant.to_owned(),
                    collection: collection.to_owned(),
                    path: log_path,
                });
            }
            cfg.collection.validate()?;
            std::fs::create_dir_all(&dir).map_err(|e| StoreErr::io("create dir", &dir, e))?;
        }
        refuse_links(root, &dir)?;
        let lock = lock(&dir, cfg.lock_wait)?;
        let log = if log_path.exists() {
            FileMetaLog::open(&log_path)?
        } else {
            let log = FileMetaLog::create(&log_path, &cfg.collection)?;
            if let Some(parent) = dir.parent() {
                // Make the new tenant/collection directories themselves durable.
                let _ = tensorvault_core::atomic::sync_dir(parent);
            }
            log
        };
        let geo = crate::meta_log::MetaLog::collection(&log);
        let io = MmapBlockIO::open(&dir, &geo)?;
        let catalog = Catalog::open(&dir.join(NAMES_LOG))?;
        // Compaction at open (`compact_ratio`) also rewrites the lineage side files, so it
        // must run once the directory's lineage store is installed, not with the
        // in-memory placeholder `TensorStore::open` starts with.
        let ratio = std::mem::take(&mut cfg.compact_ratio);
        let store = TensorStore::open(tenant, collection, clock, io, log, catalog, cfg)?;
        let lineage = crate::lineage::LineageStore::open_dir(&dir)?;
        store.attach_directory(lineage, lock, ratio)
    }
}

impl<C: Clock> TensorStore<C, MmapBlockIO, FileMetaLog> {
    /// Open an existing collection for reading, sharing it with other readers: the
    /// directory's lock is taken shared (waiting up to [`SHARED_LOCK_WAIT`] for a writer to
    /// finish), the MetaLog is opened without write access (so a write through this store
    /// fails with [`StoreErr::Io`] before anything is logged), access statistics are not
    /// flushed and nothing is compacted. For listing, statistics and verification while
    /// other processes read the same collection.
    ///
    /// # Errors
    /// As [`TensorStore::open_dir`] without `create`; [`StoreErr::InvalidArgument`] if a
    /// writer keeps the collection for longer than [`SHARED_LOCK_WAIT`].
    pub fn open_dir_shared(
        root: &Path,
        tenant: &str,
        collection: &str,
        clock: C,
        cfg: StoreConfig,
    ) -> Result<Self> {
        Self::open_dir_shared_waiting(root, tenant, collection, clock, cfg, SHARED_LOCK_WAIT)
    }

    /// [`TensorStore::open_dir_shared`] waiting at most `wait` for a writer (zero: fail at
    /// once with [`StoreErr::Locked`], so a caller can say what it waits for before it
    /// waits).
    ///
    /// # Errors
    /// As [`TensorStore::open_dir_shared`].
    pub fn open_dir_shared_waiting(
        root: &Path,
        tenant: &str,
        collection: &str,
        clock: C,
        mut cfg: StoreConfig,
        wait: std::time::Duration,
    ) -> Result<Self> {
        let dir = collection_dir(root, tenant, collection)?;
        refuse_links(root, &dir)?;
        let log_path = dir.join(META_LOG);
        if !log_path.exists() {
            return Err(StoreErr::CollectionNotFound {
                tenant: tenant.to_owned(),
                collection: collection.to_owned(),
                path: log_path,
            });
        }
        let lock = lock_shared(&dir, wait)?;
        let log = FileMetaLog::open_read_only(&log_path)?;
        let geo = crate::meta_log::MetaLog::collection(&log);
        let io = MmapBlockIO::open(&dir, &geo)?;
        let catalog = Catalog::open_read_only(&dir.join(NAMES_LOG))?;
        cfg.compact_ratio = 0;
        cfg.access_flush_every = u32::MAX;
        let store = TensorStore::open(tenant, collection, clock, io, log, catalog, cfg)?;
        let lineage = crate::lineage::LineageStore::open_dir(&dir)?;
        store.attach_directory(lineage, lock, 0)
    }
}

impl<C: Clock> TensorStore<C, MmapBlockIO, FileMetaLog> {
    /// Open a read-only snapshot of an existing collection without taking any lock, so a
    /// reader never waits for a writer (in this process or another): the MetaLog, append
    /// only with a CRC per record, is replayed up to its current end (a record torn by a
    /// concurrent append is skipped as a torn tail; a compaction renames a new log in, and
    /// this reader keeps the file it opened); tier files are opened read-only and read
    /// with `pread` ([`MmapBlockIO::open_snapshot`]). Nothing is ever written: no access
    /// statistics, no compaction, no lineage repair (the lineage side files are not
    /// opened). The snapshot is the collection as of the open: a block that a writer
    /// moves or deletes afterwards may read back as [`StoreErr::Corruption`] (its slot's
    /// checksum no longer matches) or not found; reopen for a newer snapshot. For
    /// `store ls`, `store stats` and Python `Store(..., read_only=True)`.
    ///
    /// # Errors
    /// As [`TensorStore::open_dir`] without `create`.
    pub fn open_dir_snapshot(
        root: &Path,
        tenant: &str,
        collection: &str,
        clock: C,
        mut cfg: StoreConfig,
    ) -> Result<Self> {
        let dir = collection_dir(root, tenant, collection)?;
        refuse_links(root, &dir)?;
        let log_path = dir.join(META_LOG);
        if !log_path.exists() {
            return Err(StoreErr::CollectionNotFound {
                tenant: tenant.to_owned(),
                collection: collection.to_owned(),
                path: log_path,
            });
        }
        let log = FileMetaLog::open_read_only(&log_path)?;
        let geo = crate::meta_log::MetaLog::collection(&log);
        let io = MmapBlockIO::open_snapshot(&dir, &geo)?;
        let catalog = Catalog::open_read_only(&dir.join(NAMES_LOG))?;
        cfg.compact_ratio = 0;
        cfg.access_flush_every = u32::MAX;
        TensorStore::open(tenant, collection, clock, io, log, catalog, cfg)
    }
}

impl DirStore<SystemClock> {
    /// [`TensorStore::open_dir_snapshot`] with the system clock.
    ///
    /// # Errors
    /// As [`TensorStore::open_dir_snapshot`].
    pub fn open_path_snapshot(
        root: &Path,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
    ) -> Result<Self> {
        Self::open_dir_snapshot(root, tenant, collection, SystemClock::new(), cfg)
    }

    /// [`TensorStore::open_dir_shared`] with the system clock.
    ///
    /// # Errors
    /// As [`TensorStore::open_dir_shared`].
    pub fn open_path_shared(
        root: &Path,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
    ) -> Result<Self> {
        Self::open_dir_shared(root, tenant, collection, SystemClock::new(), cfg)
    }

    /// [`TensorStore::open_dir`] with the system clock.
    ///
    /// # Errors
    /// As [`TensorStore::open_dir`].
    pub fn open_path(
        root: &Path,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
        create: bool,
    ) -> Result<Self> {
        Self::open_dir(root, tenant, collection, SystemClock::new(), cfg, create)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_the_root() {
        for bad in [
            "",
            "..",
            ".",
            ".hidden",
            "a/b",
            "a\\b",
            "x\0",
            "../../etc",
            "é",
        ] {
            assert!(validate_component("tenant", bad).is_err(), "{bad:?}");
        }
        for good in ["acme", "kv-cache_01", "v1.2"] {
            validate_component("collection", good).unwrap();
        }
        assert!(collection_dir(Path::new("/r"), "t", "../x").is_err());
    }
}
