//! File-backed MetaLog (`meta.log`): a 128-byte header, then 128-byte records appended
//! with one positioned write per batch. Replay streams the file in large chunks and cuts
//! a torn tail; compaction writes `meta.log.compact` and renames it over the log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use tensorvault_core::fsio;

use super::file_replay::replay_body;
use super::layout::RECORD_LEN;
use super::record::{decode_header, encode_checked, encode_header};
use super::replayer::Replayer;
use super::{MetaLog, MetaRecord, ReplayStats};
use crate::config::{CollectionConfig, RecoveryMode};
use crate::error::{Result, StoreErr};

/// Compaction writes in batches of this many bytes.
const WRITE_BATCH: usize = 8192 * RECORD_LEN;

/// File-backed log.
#[derive(Debug)]
pub struct FileMetaLog {
    file: File,
    path: PathBuf,
    config: CollectionConfig,
    generation: u64,
    /// Current file length: where the next append goes once `replayed`.
    len: u64,
    /// Appends are allowed: the log was just created or compacted, or replay has cut
    /// any torn tail.
    replayed: bool,
    /// A write failed; the file may end in a partial batch. Reopen to recover.
    poisoned: bool,
    /// Reused encode buffer for appends.
    scratch: Vec<u8>,
    /// Length the file must be cut to before the next append (replay found a torn or
    /// corrupt tail). The cut waits for a write so that opening, listing and verifying a
    /// store never modify it: the damaged bytes stay on disk for `verify` to report.
    pending_cut: Option<u64>,
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `<path>.compact`: the compaction (and creation) temp file next to the log.
fn temp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".compact");
    PathBuf::from(s)
}

fn fsync_dir(path: &Path) -> Result<()> {
    let dir = parent_of(path);
    fsio::sync_dir(&dir).map_err(|e| StoreErr::io("fsync directory", dir, e))
}

/// Remove a leftover temp file (a compaction or creation that never got renamed in).
fn remove_leftover_temp(path: &Path) -> Result<()> {
    let tmp = temp_path(path);
    match fsio::remove_file(&tmp) {
        Ok(()) => {
            tracing::warn!(path = %tmp.display(), "metalog: removed a leftover compaction file");
            fsync_dir(path)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreErr::io("remove", tmp, e)),
    }
}

impl FileMetaLog {
    /// Create a new log at `path` holding only the header for `config` (generation 0),
    /// durably: the header is written to `<path>.compact`, fsynced and linked in as
    /// `path` (which must not exist), then the directory is fsynced. A crash leaves
    /// either no log or a complete header.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for an invalid geometry; [`StoreErr::Io`] if `path`
    /// exists (kind `AlreadyExists`) or any file operation fails.
    pub fn create(path: impl AsRef<Path>, config: &CollectionConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        config.validate()?;
        if path.exists() {
            return Err(StoreErr::io(
                "create",
                path,
                io::Error::new(io::ErrorKind::AlreadyExists, "the MetaLog already exists"),
            ));
        }
        remove_leftover_temp(&path)?;
        let tmp = temp_path(&path);
        let header = encode_header(config, 0);
        let result = (|| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| StoreErr::io("create", &tmp, e))?;
            fsio::append(&f, &tmp, &header).map_err(|e| StoreErr::io("write", &tmp, e))?;
            fsio::sync_all(&f, &tmp).map_err(|e| StoreErr::io("fsync", &tmp, e))?;
            // A hard link fails if `path` appeared meanwhile: never clobber a log.
            match fsio::hard_link(&tmp, &path) {
                Ok(()) => fsio::remove_file(&tmp).map_err(|e| StoreErr::io("remove", &tmp, e))?,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(StoreErr::io("create", &path, e));
                }
                // Filesystems without hard links: rename (the existence check above
                // already ran).
                Err(_) => {
                    fsio::rename(&tmp, &path).map_err(|e| StoreErr::io("rename", &path, e))?
                }
            }
            Ok(f)
        })();
        let file = match result {
            Ok(f) => f,
            Err(e) => {
                let _ = fsio::remove_file(&tmp);
                return Err(e);
            }
        };
        fsync_dir(&path)?;
        Ok(Self {
            file,
            path,
            config: *config,
            generation: 0,
            len: RECORD_LEN as u64,
            replayed: true,
            poisoned: false,
            scratch: Vec::new(),
            pending_cut: None,
        })
    }

    /// Open an existing log: remove a leftover `<path>.compact` (a compaction that never
    /// got renamed in), read and check the header. Records are read by
    /// [`MetaLog::replay`], which must run before the first append.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] if the header is missing or invalid; [`StoreErr::Io`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), true)
    }

    /// Open an existing log for reading only (a shared, read-only store): the file is
    /// opened without write access and nothing is removed, so replay reads it as it is and
    /// any append fails with [`StoreErr::Io`].
    ///
    /// # Errors
    /// As [`FileMetaLog::open`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), false)
    }

    fn open_with(path: &Path, writable: bool) -> Result<Self> {
        let path = path.to_path_buf();
        if writable {
            remove_leftover_temp(&path)?;
        }
        let mut file =
            StoreErr::open_regular("open", &path, OpenOptions::new().read(true).write(writable))?;
        let len = file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &path, e))?
            .len();
        let mut header = Vec::with_capacity(RECORD_LEN);
        (&mut file)
            .take(RECORD_LEN as u64)
            .read_to_end(&mut header)
            .map_err(|e| StoreErr::io("read", &path, e))?;
        let (config, generation) = decode_header(&header)?;
        Ok(Self {
            file,
            path,
            config,
            generation,
            len,
            replayed: false,
            poisoned: false,
            scratch: Vec::new(),
            pending_cut: None,
        })
    }

    /// [`FileMetaLog::open`] if `path` exists, [`FileMetaLog::create`] with `config`
    /// otherwise. An existing log keeps its own geometry: compare
    /// [`MetaLog::collection`] with `config` if it matters.
    ///
    /// # Errors
    /// As [`FileMetaLog::open`] and [`FileMetaLog::create`].
    pub fn open_or_create(path: impl AsRef<Path>, config: &CollectionConfig) -> Result<Self> {
        let path = path.as_ref();
        if path.exists() {
            Self::open(path)
        } else {
            Self::create(path, config)
        }
    }

    /// The log file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Generation of the header: the number of compactions this log went through.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Current length of the file in bytes.
    #[must_use]
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    fn write_compacted(
        &self,
        tmp: &Path,
        snapshot: &mut dyn Iterator<Item = MetaRecord>,
    ) -> Result<(File, u64)> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)
            .map_err(|e| StoreErr::io("create", tmp, e))?;
        let mut buf = Vec::with_capacity(WRITE_BATCH + RECORD_LEN);
        buf.extend_from_slice(&encode_header(&self.config, self.generation + 1));
        let mut len = 0u64;
        for r in snapshot {
            encode_checked(std::slice::from_ref(&r), len + buf.len() as u64, &mut buf)?;
            if buf.len() >= WRITE_BATCH {
                fsio::append(&f, tmp, &buf).map_err(|e| StoreErr::io("write", tmp, e))?;
                len += buf.len() as u64;
                buf.clear();
            }
        }
        fsio::append(&f, tmp, &buf).map_err(|e| StoreErr::io("write", tmp, e))?;
        len += buf.len() as u64;
        fsio::sync_all(&f, tmp).map_err(|e| StoreErr::io("fsync", tmp, e))?;
        Ok((f, len))
    }
}

impl MetaLog for FileMetaLog {
    fn collection(&self) -> CollectionConfig {
        self.config
    }

    fn append(&mut self, recs: &[MetaRecord]) -> Result<()> {
        if self.poisoned {
            return Err(StoreErr::NotWritable {
                op: "append",
                path: self.path.clone(),
                poisoned: true,
            });
        }
        if !self.replayed {
            return Err(StoreErr::InvalidArgument {
                field: "append",
                reason: "the log must be replayed (torn tail cut) before the first append".into(),
            });
        }
        if recs.is_empty() {
            return Ok(());
        }
        if let Some(cut) = self.pending_cut {
            // The torn or corrupt tail replay found goes now, before anything follows it
            // (appends land at `len`, which replay set to the cut).
            fsio::set_len(&self.file, &self.path, cut).map_err(|e| {
                self.poisoned = true;
                StoreErr::io("truncate", &self.path, e)
            })?;
            fsio::sync_data(&self.file, &self.path).map_err(|e| {
                self.poisoned = true;
                StoreErr::io("fsync", &self.path, e)
            })?;
            self.pending_cut = None;
        }
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let res = encode_checked(recs, self.len, &mut buf).and_then(|()| {
            fsio::write_all_at(&self.file, &self.path, &buf, self.len).map_err(|e| {
                self.poisoned = true;
                StoreErr::io("write", &self.path, e)
            })
        });
        if res.is_ok() {
            self.len += buf.len() as u64;
        }
        self.scratch = buf;
        res
    }

    fn sync(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(StoreErr::NotWritable {
                op: "fsync",
                path: self.path.clone(),
                poisoned: true,
            });
        }
        fsio::sync_data(&self.file, &self.path).map_err(|e| StoreErr::io("fsync", &self.path, e))
    }

    fn replay(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        self.replay_at(mode, &mut |_, rec| visit(rec))
    }

    fn replay_at(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(Option<u64>, MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        let visit = &mut |at: u64, rec| visit(Some(at), rec);
        let len = self
            .file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &self.path, e))?
            .len();
        let mut r = Replayer::new(mode);
        replay_body(&self.file, &self.path, len, &mut r, visit)?;
        let (stats, cut) = r.finish(len);
        self.pending_cut = (cut < len).then_some(cut);
        self.len = cut;
        self.replayed = true;
        self.poisoned = false;
        Ok(stats)
    }

    fn compact(&mut self, snapshot: &mut dyn Iterator<Item = MetaRecord>) -> Result<()> {
        let tmp = temp_path(&self.path);
        let (file, len) = match self.write_compacted(&tmp, snapshot).and_then(|fl| {
            fsio::rename(&tmp, &self.path)
                .map(|()| fl)
                .map_err(|e| StoreErr::io("rename", &self.path, e))
        }) {
            Ok(fl) => fl,
            Err(e) => {
                let _ = fsio::remove_file(&tmp);
                return Err(e);
            }
        };
        // Renamed in: the open handle is now the log (whatever the directory fsync says).
        self.file = file;
        self.len = len;
        self.pending_cut = None;
        self.generation += 1;
        self.replayed = true;
        self.poisoned = false;
        fsync_dir(&self.path)
    }

    fn record_count(&self) -> u64 {
        self.len.saturating_sub(RECORD_LEN as u64) / RECORD_LEN as u64
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
