//! A registry of any safetensors checkpoints: the same `registry.json`, versions, golden
//! marker, retention, rollback and lock-free hot swap as [`crate::WeightRegistry`], for
//! versions holding named tensors of any dtype (single-file or sharded checkpoints, copied
//! verbatim; see [`crate::model`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tensorvault_core::progress::ProgressFn;
use tracing::{info, warn};

use crate::error::{RegistryError, Result};
use crate::manifest::ManifestStore;
use crate::model::{
    copy_checkpoint_reporting, resolve_source, write_model_checkpoint, ModelMetadata, Preset,
    Verify, SINGLE_FILE,
};
use crate::model_tensor::{load_model_dir, verify_model_dir, LoadedModel};
use crate::version::{now_rfc3339, TrainingMetrics, WeightVersion};

/// What to record for a new version.
#[derive(Debug, Clone, Default)]
pub struct SaveOptions {
    /// Version string. `Some` is used as given: an invalid string is
    /// [`RegistryError::InvalidVersion`], a listed one [`RegistryError::VersionExists`].
    /// `None` picks the highest listed version with its patch number bumped.
    pub version: Option<String>,
    /// Where the weights came from (default: the source path, or `in-memory`).
    pub source_id: Option<String>,
    /// Training metrics.
    pub metrics: Option<TrainingMetrics>,
}

/// A versioned registry of safetensors checkpoints. All methods take `&self` and are safe
/// to call from many threads; readers of [`Self::current`] never block.
pub struct ModelRegistry {
    store: ManifestStore,
    preset: Preset,
    verify: Verify,
    current: ArcSwapOption<LoadedModel>,
}

impl std::fmt::Debug for ModelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRegistry")
            .field("root", &self.store.root())
            .field("preset", &self.preset)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

impl ModelRegistry {
    /// Opens (or creates) the registry at `root`. New versions must satisfy `preset`;
    /// loads verify per-chunk digests ([`Verify::Chunks`]).
    ///
    /// # Errors
    /// I/O and JSON errors, [`RegistryError::ManifestChecksum`],
    /// [`RegistryError::ManifestInvalidVersion`].
    pub fn open(root: impl AsRef<Path>, preset: Preset) -> Result<Self> {
        Ok(Self {
            store: ManifestStore::open(root.as_ref())?,
            preset,
            verify: Verify::default(),
            current: ArcSwapOption::empty(),
        })
    }

    /// Sets how loads verify the files.
    #[must_use]
    pub fn with_verify(mut self, verify: Verify) -> Self {
        self.verify = verify;
        self
    }

    /// The registry root.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The preset new versions are checked against.
    #[must_use]
    pub fn preset(&self) -> &Preset {
        &self.preset
    }

    /// Directory of `version` (validated: no path tricks).
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`].
    pub fn version_dir(&self, version: &str) -> Result<PathBuf> {
        self.store.version_dir(version)
    }

    fn save_with(
        &self,
        opts: SaveOptions,
        default_source: String,
        write: impl FnOnce(&Path, WeightVersion) -> Result<ModelMetadata>,
    ) -> Result<WeightVersion> {
        let mut m = self.store.lock();
        let version = m.claim_version(opts.version.as_deref())?;
        let v = WeightVersion {
            version: version.clone(),
            source_id: opts.source_id.unwrap_or(default_source),
            created_at: now_rfc3339(),
            checksum: String::new(),
            metrics: opts.metrics,
        };
        let meta = write(&self.store.version_dir(&version)?, v)?;
        let mut next = m.clone();
        next.versions.push(meta.version.clone());
        self.store.persist(&next)?;
        *m = next;
        drop(m);
        info!(version = %meta.version.version, checksum = %meta.version.checksum, files = meta.files.len(), "model version saved");
        self.apply_retention()?;
        Ok(meta.version)
    }

    /// Saves the checkpoint at `src` (a `.safetensors` file, an index JSON, or a Hugging
    /// Face model directory) as a new version: its files are validated (headers, index,
    /// preset) and copied byte for byte, with their SHA-256 and per-chunk digests.
    /// Applies retention afterwards. Does not change the current version.
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`], [`RegistryError::VersionExists`] (see
    /// [`SaveOptions::version`]), [`RegistryError::NotACheckpoint`],
    /// [`RegistryError::UnsafeFileName`] (an index naming a shard outside its directory),
    /// safetensors, preset and I/O errors; nothing is listed unless everything is durable.
    pub fn save_from_path(&self, src: &Path, opts: SaveOptions) -> Result<WeightVersion> {
        self.save_from_path_progress(src, opts, None)
    }

    /// [`Self::save_from_path`], reporting to `progress` (the workspace's one progress
    /// layer, [`tensorvault_core::progress`]) `(done, total)` in bytes: the checkpoint's
    /// files (shards, then the index) written and hashed, out of their sum. The first call
    /// is `(0, total)` once the source is validated, the last `(total, total)` once every
    /// file is durable (the metadata file and the listing follow).
    ///
    /// # Errors
    /// See [`Self::save_from_path`].
    pub fn save_from_path_progress(
        &self,
        src: &Path,
        opts: SaveOptions,
        progress: Option<&ProgressFn>,
    ) -> Result<WeightVersion> {
        let source = resolve_source(src)?;
        self.save_with(opts, src.display().to_string(), |dir, v| {
            copy_checkpoint_reporting(dir, &source, v, &self.preset, progress)
        })
    }

    /// Saves in-memory `model` as a new version (one `model.safetensors`). Does not change
    /// the current version.
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`], [`RegistryError::VersionExists`] (see
    /// [`SaveOptions::version`]), preset, safetensors and I/O errors.
    pub fn save_model(&self, model: &LoadedModel, opts: SaveOptions) -> Result<WeightVersion> {
        let bytes = model.to_safetensors()?;
        self.save_with(opts, "in-memory".into(), |dir, v| {
            write_model_checkpoint(
                dir,
                &[(SINGLE_FILE.to_owned(), &bytes[..])],
                None,
                v,
                &self.preset,
            )
        })
    }

    /// Loads `version` (verified as configured) without activating it.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], [`RegistryError::InvalidVersion`], load errors.
    pub fn read_version(&self, version: &str) -> Result<LoadedModel> {
        let dir = self.store.listed_dir(version)?;
        load_model_dir(&dir, self.verify)
    }

    fn install(&self, model: Arc<LoadedModel>) -> Result<()> {
        let v = model.version.version.clone();
        let old = self.current.swap(Some(model));
        info!(
            from = old.as_ref().map_or("<none>", |o| o.version.version.as_str()),
            to = %v,
            "model swapped"
        );
        self.store.set_current(&v)
    }

    /// Loads `version`, makes it active and records it as the current version on disk.
    ///
    /// # Errors
    /// See [`Self::read_version`].
    pub fn load_version(&self, version: &str) -> Result<Arc<LoadedModel>> {
        let m = Arc::new(self.read_version(version)?);
        self.install(m.clone())?;
        Ok(m)
    }

    /// Makes an existing `version` the current one, forward or back: loads and verifies it,
    /// swaps it in atomically for this process's readers of [`Self::current`] (they see the
    /// old model or the new one, never a mix) and records it as current on disk. The layout
    /// may differ from the active model's: naming the version is the explicit choice (use
    /// [`Self::hot_swap_version`] to require the same layout). Saving never does this.
    ///
    /// # Errors
    /// See [`Self::read_version`]; nothing changes on error.
    pub fn activate(&self, version: &str) -> Result<Arc<LoadedModel>> {
        info!(version, "activation requested");
        self.load_version(version)
    }

    /// Rolls back to an existing `version` ([`Self::activate`] under the name operators use
    /// for going back).
    ///
    /// # Errors
    /// See [`Self::read_version`].
    pub fn rollback(&self, version: &str) -> Result<Arc<LoadedModel>> {
        info!(version, "rollback requested");
        self.load_version(version)
    }

    /// Swaps `model` in atomically after checking it against the preset and, when a model
    /// is active, that it keeps the active model's tensor names, dtypes and shapes. Readers
    /// see the old model or the new one, never a mix. When `model`'s version is listed, it
    /// becomes the current version on disk.
    ///
    /// # Errors
    /// Preset and layout errors (the active model is unchanged then), I/O errors.
    pub fn hot_swap(&self, model: LoadedModel) -> Result<()> {
        model.check_preset(&self.preset)?;
        if let Some(active) = self.current.load_full() {
            active.check_same_layout(&model)?;
        }
        self.install(Arc::new(model))
    }

    /// Loads `version` and hot-swaps it in ([`Self::hot_swap`]'s checks).
    ///
    /// # Errors
    /// See [`Self::read_version`] and [`Self::hot_swap`].
    pub fn hot_swap_version(&self, version: &str) -> Result<Arc<LoadedModel>> {
        let m = self.read_version(version)?;
        self.hot_swap(m)?;
        self.current()
            .ok_or_else(|| RegistryError::VersionNotFound {
                version: version.to_owned(),
            })
    }

    /// The active model, loading one if none is: the golden version, then the current
    /// pointer, then every version newest first; a version that fails to load (damaged,
    /// deleted) is logged and skipped.
    ///
    /// # Errors
    /// [`RegistryError::FallbackExhausted`] when no version loads.
    pub fn load(&self) -> Result<Arc<LoadedModel>> {
        if let Some(m) = self.current.load_full() {
            return Ok(m);
        }
        let chain = self.store.snapshot().chain();
        let mut last = String::from("the registry has no versions");
        for v in &chain {
            match self.read_version(v) {
                Ok(m) => {
                    let m = Arc::new(m);
                    self.install(m.clone())?;
                    return Ok(m);
                }
                Err(e) => {
                    warn!(version = %v, error = %e, "version failed to load; trying the next");
                    last = e.to_string();
                }
            }
        }
        Err(RegistryError::FallbackExhausted {
            attempts: chain.len(),
            last,
        })
    }

    /// The active model, if any (lock-free).
    #[must_use]
    pub fn current(&self) -> Option<Arc<LoadedModel>> {
        self.current.load_full()
    }

    /// Version of the active model.
    #[must_use]
    pub fn current_version(&self) -> Option<WeightVersion> {
        self.current.load().as_ref().map(|m| m.version.clone())
    }

    /// Version history, oldest first.
    #[must_use]
    pub fn list_versions(&self) -> Vec<WeightVersion> {
        self.store.lock().versions.clone()
    }

    /// The golden version, if marked.
    #[must_use]
    pub fn golden(&self) -> Option<String> {
        self.store.lock().golden.clone()
    }

    /// The current-version pointer recorded on disk.
    #[must_use]
    pub fn current_pointer(&self) -> Option<String> {
        self.store.lock().current.clone()
    }

    /// `version`'s metadata (files and digests), read and checked, not verified.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], see [`crate::model::read_model_metadata`].
    pub fn metadata(&self, version: &str) -> Result<ModelMetadata> {
        crate::model::read_model_metadata(&self.store.listed_dir(version)?)
    }

    /// Verifies `version` fully: every file's SHA-256 and every chunk digest, the version
    /// checksum against the manifest's, every header and the index.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], [`RegistryError::ChecksumMismatch`],
    /// [`RegistryError::ChunkChecksumMismatch`],
    /// [`RegistryError::ListedChecksumMismatch`], see [`verify_model_dir`].
    pub fn verify_version(&self, version: &str) -> Result<ModelMetadata> {
        let dir = self.store.listed_dir(version)?;
        let meta = verify_model_dir(&dir, Verify::Both)?;
        self.store
            .check_listed_checksum(version, &dir, &meta.version.checksum)?;
        Ok(meta)
    }

    /// Marks `version` golden (fully verified first).
    ///
    /// # Errors
    /// See [`Self::verify_version`].
    pub fn set_golden(&self, version: &str) -> Result<()> {
        self.verify_version(version)?;
        self.store
            .update(|next| next.golden = Some(version.to_owned()))
    }

    /// Keeps the `keep` newest versions (plus golden, current and active); `None` keeps
    /// all. Persisted, applied now and after every save. Returns the deleted versions.
    ///
    /// # Errors
    /// I/O errors writing the manifest.
    pub fn set_retention(&self, keep: Option<usize>) -> Result<Vec<String>> {
        self.store.update(|next| next.retention = keep)?;
        self.apply_retention()
    }

    /// Applies the persisted retention now. Returns the deleted versions.
    ///
    /// # Errors
    /// I/O errors writing the manifest (directory removal failures are only logged).
    pub fn apply_retention(&self) -> Result<Vec<String>> {
        let active = self.current_version().map(|v| v.version);
        self.store.apply_retention(active.as_deref())
    }
}
