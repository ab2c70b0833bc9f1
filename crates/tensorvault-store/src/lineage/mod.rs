//! What a corrupt `Delta` or `Factor` block is rebuilt from (ADR-018 sections 3.6 and
//! 3.12): `delta.dat` holds each `Delta` block's difference from its lineage parent,
//! `factor.dat` each `Factor` block's low-rank factors. Both are append-only files of
//! CRC-protected entries (byte layout in [`mod@format`] and docs/formats/store.md, "Lineage
//! files"); the latest valid entry per block wins, and a file is rewritten atomically
//! when more than half of it is garbage.
//!
//! A [`LineageStore`] lives inside every [`crate::TensorStore`]: directory stores keep
//! the files in the collection directory; in-memory stores keep the same bytes in
//! memory, with an optional host persistence hook (the WASM path), and restore them
//! with [`LineageStore::from_bytes`].

pub mod format;
pub(crate) mod payload;
mod side_file;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

pub use format::SideKind;
pub use side_file::ScanStats;
pub(crate) use side_file::SideFile;

use crate::error::{Result, StoreErr};

/// Knobs of reconstruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineageConfig {
    /// Rank `r` of the factors kept for `Factor` blocks (clamped to `1..=min(m, n)`).
    pub factor_rank: usize,
    /// How many corrupt `Delta` ancestors one rehydration may rebuild on its way to an
    /// intact one (deeper chains fail with [`StoreErr::LineageTooDeep`]).
    pub max_chain_depth: usize,
}

impl Default for LineageConfig {
    fn default() -> Self {
        Self {
            factor_rank: 8,
            max_chain_depth: 8,
        }
    }
}

/// Sizes of the lineage files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineageStats {
    /// Blocks with a delta entry.
    pub delta_entries: u64,
    /// `delta.dat` length in bytes (0: no file).
    pub delta_bytes: u64,
    /// Superseded or corrupt bytes in `delta.dat`.
    pub delta_garbage: u64,
    /// Blocks with a factor entry.
    pub factor_entries: u64,
    /// `factor.dat` length in bytes (0: no file).
    pub factor_bytes: u64,
    /// Superseded or corrupt bytes in `factor.dat`.
    pub factor_garbage: u64,
    /// What the scans on open found, both files summed.
    pub scan: ScanStats,
}

/// The lineage files of one collection. See the module docs.
pub struct LineageStore {
    cfg: Mutex<LineageConfig>,
    /// Indexed by `SideKind as usize - 1`.
    files: [Mutex<SideFile>; 2],
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned { lock: "lineage" }
}

impl Default for LineageStore {
    fn default() -> Self {
        Self::in_memory()
    }
}

impl std::fmt::Debug for LineageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineageStore")
            .field("config", &self.config())
            .field("stats", &self.stats().ok())
            .finish()
    }
}

impl LineageStore {
    fn from_files(delta: SideFile, factor: SideFile) -> Self {
        Self {
            cfg: Mutex::new(LineageConfig::default()),
            files: [Mutex::new(delta), Mutex::new(factor)],
        }
    }

    /// Empty lineage files in memory (what [`crate::TensorStore::open`] starts with).
    #[must_use]
    pub fn in_memory() -> Self {
        Self::from_files(
            SideFile::in_memory(SideKind::Delta),
            SideFile::in_memory(SideKind::Factor),
        )
    }

    /// In-memory lineage files restored from the bytes their persistence hooks received
    /// (or read from `delta.dat` / `factor.dat`); empty vectors for files never written.
    /// Entries failing their CRC are skipped and a torn tail is cut, as on open.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] if non-empty bytes do not start with a valid header.
    pub fn from_bytes(delta: Vec<u8>, factor: Vec<u8>) -> Result<Self> {
        Ok(Self::from_files(
            SideFile::from_bytes(SideKind::Delta, delta)?,
            SideFile::from_bytes(SideKind::Factor, factor)?,
        ))
    }

    /// The lineage files of the collection directory `dir` (created on first use).
    /// Temp files of an interrupted rewrite are removed.
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn open_dir(dir: &Path) -> Result<Self> {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let stale = [SideKind::Delta, SideKind::Factor].iter().any(|s| {
                    name.starts_with(&format!(".{}.", s.file_name())) && name.ends_with(".tmp")
                });
                if stale {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(Self::from_files(
            SideFile::open(SideKind::Delta, &dir.join(SideKind::Delta.file_name()))?,
            SideFile::open(SideKind::Factor, &dir.join(SideKind::Factor.file_name()))?,
        ))
    }

    /// Builder form of [`LineageStore::set_config`].
    #[must_use]
    pub fn with_config(self, cfg: LineageConfig) -> Self {
        if let Ok(mut c) = self.cfg.lock() {
            *c = cfg;
        }
        self
    }

    /// Change the configuration (applies to later puts and repairs).
    pub fn set_config(&self, cfg: LineageConfig) {
        if let Ok(mut c) = self.cfg.lock() {
            *c = cfg;
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> LineageConfig {
        self.cfg.lock().map(|c| *c).unwrap_or_default()
    }

    /// Install the persistence hook of an in-memory file: called with the file's whole
    /// content on every sync that follows a change (ignored for directory stores).
    ///
    /// # Errors
    /// Only if a thread panicked while holding the lineage lock.
    pub fn set_persist_hook(
        &self,
        side: SideKind,
        hook: impl FnMut(&[u8]) + Send + 'static,
    ) -> Result<()> {
        self.file(side)?.set_hook(Box::new(hook));
        Ok(())
    }

    /// The bytes of an in-memory file (what a `delta.dat` / `factor.dat` would hold);
    /// empty for directory stores.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the lineage lock.
    pub fn to_bytes(&self, side: SideKind) -> Result<Vec<u8>> {
        Ok(self.file(side)?.mem_bytes().to_vec())
    }

    /// Sizes of both files.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the lineage lock.
    pub fn stats(&self) -> Result<LineageStats> {
        let d = self.file(SideKind::Delta)?;
        let f = self.file(SideKind::Factor)?;
        let (ds, fs) = (d.scan_stats(), f.scan_stats());
        Ok(LineageStats {
            delta_entries: d.entries() as u64,
            delta_bytes: d.len(),
            delta_garbage: d.garbage(),
            factor_entries: f.entries() as u64,
            factor_bytes: f.len(),
            factor_garbage: f.garbage(),
            scan: ScanStats {
                skipped_entries: ds.skipped_entries + fs.skipped_entries,
                skipped_bytes: ds.skipped_bytes + fs.skipped_bytes,
                truncated_bytes: ds.truncated_bytes + fs.truncated_bytes,
            },
        })
    }

    /// Make both files durable.
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn sync(&self) -> Result<()> {
        self.file(SideKind::Delta)?.sync()?;
        self.file(SideKind::Factor)?.sync()
    }

    pub(crate) fn file(&self, side: SideKind) -> Result<MutexGuard<'_, SideFile>> {
        self.files[side as usize - 1].lock().map_err(poisoned)
    }
}
