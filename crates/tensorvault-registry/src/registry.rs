//! The versioned weight registry: versions on disk, fallback chain, rollback, hot swap.
//!
//! Layout under the root: `registry.json` (the version history, golden marker, current
//! pointer and retention, replaced atomically) and `versions/<version>/` checkpoint
//! directories. A version is listed only once its directory is complete and the manifest
//! naming it is durable, so a crash mid-save never lists a half-written version.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwapOption;
use tensorvault_core::progress::ProgressFn;
use tracing::{info, warn};

use crate::checkpoint::{self, load_checkpoint_dir, CheckpointMetadata, LoadOptions};
use crate::error::{RegistryError, Result};
use crate::initializer::WeightInitializer;
use crate::manifest::ManifestStore;
use crate::model::{Preset, Verify};
use crate::model_tensor::{load_model_dir, verify_model_dir};
use crate::strategy::{InitializationStrategy, KaimingMode, Nonlinearity};
use crate::version::{now_rfc3339, TrainingMetrics, WeightVersion};
use crate::weights::{FusionConfig, LoadedWeights};

pub use crate::manifest::{
    MANIFEST_FILE, MANIFEST_FORMAT_VERSION, MAX_MANIFEST_BYTES, VERSIONS_DIR,
};

/// Where weights live. Only the CPU is supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// Host memory.
    #[default]
    Cpu,
    /// A CUDA device (rejected with [`RegistryError::Unsupported`]).
    Cuda(usize),
}

/// Strategies and seed for [`WeightRegistry::load_weights`].
#[derive(Debug, Clone)]
pub struct InitializationConfig {
    /// Tried first (usually a golden checkpoint; relative paths resolve against the root).
    pub primary: InitializationStrategy,
    /// Used when the primary and every registry version failed.
    pub fallback: InitializationStrategy,
    /// Seed of the deterministic initializer.
    pub seed: u64,
    /// Verify SHA-256 checksums when loading.
    pub verify_checksum: bool,
}

impl Default for InitializationConfig {
    fn default() -> Self {
        Self {
            primary: InitializationStrategy::Checkpoint {
                path: PathBuf::from("artifacts/fusemoe/golden.ckpt"),
                strict: true,
            },
            fallback: InitializationStrategy::KaimingUniform {
                mode: KaimingMode::FanIn,
                nonlinearity: Nonlinearity::ReLU,
            },
            seed: 42,
            verify_checksum: true,
        }
    }
}

/// One step of the last [`WeightRegistry::load_weights`] run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// What was tried (`primary:<path>`, `version:<v>`, `fallback:<strategy>`).
    pub source: String,
    /// `None` on success, else the error.
    pub error: Option<String>,
}

/// FuseMoE weight registry. All methods take `&self` and are safe to call from many threads.
pub struct WeightRegistry {
    fusion: FusionConfig,
    init: InitializationConfig,
    current: ArcSwapOption<LoadedWeights>,
    store: ManifestStore,
    attempts: Mutex<Vec<LoadAttempt>>,
}

impl std::fmt::Debug for WeightRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightRegistry")
            .field("root", &self.store.root())
            .field("fusion", &self.fusion)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the manifest half-updated on disk (it is
    // replaced atomically), so a poisoned lock's data is still usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WeightRegistry {
    /// Opens (or creates) the registry at `root` with default config and shapes.
    ///
    /// # Errors
    /// See [`WeightRegistry::with_config`].
    pub fn new(root: impl AsRef<Path>, device: Device) -> Result<Self> {
        Self::with_config(
            root,
            device,
            InitializationConfig::default(),
            FusionConfig::default(),
        )
    }

    /// Opens (or creates) the registry at `root`. Removes leftover `.tmp-*` directories of
    /// interrupted saves.
    ///
    /// # Errors
    /// [`RegistryError::Unsupported`] for CUDA, I/O and JSON errors for the manifest.
    pub fn with_config(
        root: impl AsRef<Path>,
        device: Device,
        init: InitializationConfig,
        fusion: FusionConfig,
    ) -> Result<Self> {
        if let Device::Cuda(i) = device {
            return Err(RegistryError::Unsupported {
                what: format!("device cuda:{i}; the registry keeps weights in host memory"),
            });
        }
        let store = ManifestStore::open(root.as_ref())?;
        Ok(Self {
            fusion,
            init,
            current: ArcSwapOption::empty(),
            store,
            attempts: Mutex::new(Vec::new()),
        })
    }

    /// The registry root.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The shapes this registry expects.
    #[must_use]
    pub fn fusion_config(&self) -> &FusionConfig {
        &self.fusion
    }

    /// Directory of `version` (validated: no path tricks).
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`].
    pub fn version_dir(&self, version: &str) -> Result<PathBuf> {
        self.store.version_dir(version)
    }

    fn initializer(&self, strategy: &InitializationStrategy) -> WeightInitializer {
        WeightInitializer::with_strategy(self.init.seed, strategy.clone())
    }

    /// Initializes all weights from scratch with `strategy` (rayon-parallel, deterministic).
    ///
    /// # Errors
    /// [`RegistryError::Unsupported`] for `Checkpoint`; see [`crate::strategy::sample`].
    pub fn initialize_weights(&self, strategy: &InitializationStrategy) -> Result<LoadedWeights> {
        self.initializer(strategy).init_all(&self.fusion, true)
    }

    fn load_dir(&self, dir: &Path, strict: bool) -> Result<LoadedWeights> {
        // A version saved through the model registry with the FuseMoE preset.
        if crate::model::checkpoint_format(dir)? == crate::model::MODEL_FORMAT_NAME {
            let verify = if self.init.verify_checksum {
                Verify::Chunks
            } else {
                Verify::None
            };
            return load_model_dir(dir, verify)?.to_fusemoe(&self.fusion);
        }
        let fb = match &self.init.fallback {
            InitializationStrategy::Checkpoint { .. } => None,
            s => Some(self.initializer(s)),
        };
        load_checkpoint_dir(
            dir,
            &self.fusion,
            LoadOptions {
                strict,
                verify_checksum: self.init.verify_checksum,
                fallback: fb.as_ref(),
            },
        )
    }

    fn try_strategy(&self, s: &InitializationStrategy) -> Result<LoadedWeights> {
        match s {
            InitializationStrategy::Checkpoint { path, strict } => {
                self.load_dir(&self.root().join(path), *strict)
            }
            other => self.initialize_weights(other),
        }
    }

    /// Returns the active weights, loading them if none are active yet. The chain: cache ->
    /// primary strategy -> registry versions (golden, then current pointer, then newest
    /// first) -> fallback strategy. Every step is logged; see [`Self::last_load_attempts`].
    ///
    /// # Errors
    /// [`RegistryError::FallbackExhausted`] when every step failed.
    pub fn load_weights(&self) -> Result<Arc<LoadedWeights>> {
        if let Some(w) = self.current.load_full() {
            return Ok(w);
        }
        let mut attempts = Vec::new();
        type Step<'a> = Box<dyn Fn() -> Result<LoadedWeights> + 'a>;
        let mut candidates: Vec<(String, Step<'_>)> = vec![(
            self.try_strategy_label(&self.init.primary),
            Box::new(|| self.try_strategy(&self.init.primary)),
        )];
        for v in self.chain_versions() {
            let label = format!("version:{v}");
            candidates.push((
                label,
                Box::new(move || self.load_dir(&self.version_dir(&v)?, true)),
            ));
        }
        candidates.push((
            self.try_strategy_label(&self.init.fallback),
            Box::new(|| self.try_strategy(&self.init.fallback)),
        ));
        let mut last = String::new();
        for (label, f) in candidates {
            match f() {
                Ok(w) => {
                    info!(source = %label, version = %w.version.version, "weights loaded");
                    attempts.push(LoadAttempt {
                        source: label,
                        error: None,
                    });
                    *lock(&self.attempts) = attempts;
                    let w = Arc::new(w);
                    self.current.store(Some(w.clone()));
                    return Ok(w);
                }
                Err(e) => {
                    warn!(source = %label, error = %e, "load step failed; continuing the fallback chain");
                    last = e.to_string();
                    attempts.push(LoadAttempt {
                        source: label,
                        error: Some(last.clone()),
                    });
                }
            }
        }
        let n = attempts.len();
        *lock(&self.attempts) = attempts;
        Err(RegistryError::FallbackExhausted { attempts: n, last })
    }

    fn try_strategy_label(&self, s: &InitializationStrategy) -> String {
        match s {
            InitializationStrategy::Checkpoint { path, .. } => {
                format!("checkpoint:{}", self.root().join(path).display())
            }
            other => format!("initialize:{}", other.name()),
        }
    }

    fn chain_versions(&self) -> Vec<String> {
        self.store.snapshot().chain()
    }

    /// The steps of the last [`Self::load_weights`] that went past the cache.
    #[must_use]
    pub fn last_load_attempts(&self) -> Vec<LoadAttempt> {
        lock(&self.attempts).clone()
    }

    /// Loads `version` (strict, checksum per config), makes it active and records it as the
    /// current version on disk.
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`], [`RegistryError::VersionNotFound`], load errors.
    pub fn load_checkpoint(&self, version: &str) -> Result<Arc<LoadedWeights>> {
        let dir = self.store.listed_dir(version)?;
        let w = Arc::new(self.load_dir(&dir, true)?);
        self.install(w.clone())?;
        Ok(w)
    }

    fn install(&self, w: Arc<LoadedWeights>) -> Result<()> {
        let v = w.version.version.clone();
        let old = self.current.swap(Some(w));
        info!(
            from = old.as_ref().map_or("<none>", |o| o.version.version.as_str()),
            to = %v,
            "weights swapped"
        );
        self.store.set_current(&v)
    }

    /// Makes an existing `version` the current one, forward or back: loads and verifies it,
    /// swaps it in atomically for this process's readers of [`Self::current`] and records it
    /// as current on disk (same as [`Self::load_checkpoint`]). Saving never does this.
    ///
    /// # Errors
    /// See [`Self::load_checkpoint`]; nothing changes on error.
    pub fn activate(&self, version: &str) -> Result<Arc<LoadedWeights>> {
        info!(version, "activation requested");
        self.load_checkpoint(version)
    }

    /// Rolls back to an existing `version` (same as [`Self::load_checkpoint`]).
    ///
    /// # Errors
    /// See [`Self::load_checkpoint`].
    pub fn rollback(&self, version: &str) -> Result<Arc<LoadedWeights>> {
        info!(version, "rollback requested");
        self.load_checkpoint(version)
    }

    /// Validates `new` against the registry's shapes, then swaps it in atomically: readers
    /// see either the old set or the new set, never a mix. The old set is freed when its
    /// last reader drops it.
    ///
    /// # Errors
    /// Shape/name validation errors; the active set is unchanged then.
    pub fn hot_swap(&self, new: LoadedWeights) -> Result<()> {
        new.validate(&self.fusion)?;
        self.install(Arc::new(new))
    }

    /// The active weights, if any (lock-free; for readers on the hot path).
    #[must_use]
    pub fn current(&self) -> Option<Arc<LoadedWeights>> {
        self.current.load_full()
    }

    /// Version of the active weights.
    #[must_use]
    pub fn current_version(&self) -> Option<WeightVersion> {
        self.current.load().as_ref().map(|w| w.version.clone())
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

    /// Marks `version` golden (verified first).
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], verification errors.
    pub fn set_golden(&self, version: &str) -> Result<()> {
        self.verify_version(version)?;
        self.store
            .update(|next| next.golden = Some(version.to_owned()))
    }

    /// Verifies checkpoint directory `path` (checksum + safetensors header).
    ///
    /// # Errors
    /// See [`checkpoint::verify_checkpoint`].
    pub fn verify_checkpoint(&self, path: impl AsRef<Path>) -> Result<CheckpointMetadata> {
        checkpoint::verify_checkpoint(path.as_ref())
    }

    /// Verifies registry version `version`: its files against its `metadata.json`, and that
    /// metadata's checksum against the one `registry.json` lists for the version.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], [`RegistryError::ListedChecksumMismatch`], see
    /// [`checkpoint::verify_checkpoint`].
    pub fn verify_version(&self, version: &str) -> Result<CheckpointMetadata> {
        let dir = self.store.listed_dir(version)?;
        if crate::model::checkpoint_format(&dir)? == crate::model::MODEL_FORMAT_NAME {
            let meta = verify_model_dir(&dir, Verify::Both)?;
            self.store
                .check_listed_checksum(version, &dir, &meta.version.checksum)?;
            return Ok(CheckpointMetadata {
                format: meta.format,
                format_version: meta.format_version,
                version: meta.version,
                config: match meta.preset {
                    Preset::FuseMoe(c) => c,
                    Preset::Any => self.fusion.clone(),
                },
                chunks: None,
            });
        }
        let meta = checkpoint::verify_checkpoint(&dir)?;
        // The files match their own metadata; the metadata must also be the one the
        // manifest listed at save (a replaced directory is self-consistent too).
        self.store
            .check_listed_checksum(version, &dir, &meta.version.checksum)?;
        Ok(meta)
    }

    /// Saves `weights` as a new version. The version string is `weights.version.version`
    /// as given; an empty string (no version asked for) picks the highest listed version
    /// with its patch number bumped. Applies retention afterwards. Does not change the
    /// current version.
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`] (an invalid version string),
    /// [`RegistryError::VersionExists`] (a listed one), both before anything is written;
    /// validation, I/O and JSON errors; nothing is listed unless everything is durable.
    pub fn save_checkpoint(
        &self,
        weights: &LoadedWeights,
        metrics: Option<TrainingMetrics>,
    ) -> Result<WeightVersion> {
        self.save_checkpoint_progress(weights, metrics, None)
    }

    /// [`Self::save_checkpoint`], reporting to `progress` (the workspace's one progress
    /// layer, [`tensorvault_core::progress`]) `(done, total)` in bytes of the new
    /// `weights.safetensors` hashed, up to `(total, total)` once it is durable.
    ///
    /// # Errors
    /// See [`Self::save_checkpoint`].
    pub fn save_checkpoint_progress(
        &self,
        weights: &LoadedWeights,
        metrics: Option<TrainingMetrics>,
        progress: Option<&ProgressFn>,
    ) -> Result<WeightVersion> {
        let mut m = self.store.lock();
        let wanted = Some(weights.version.version.as_str()).filter(|v| !v.is_empty());
        let version = m.claim_version(wanted)?;
        let mut w = weights.clone();
        w.version = WeightVersion {
            version: version.clone(),
            source_id: weights.version.source_id.clone(),
            created_at: now_rfc3339(),
            checksum: String::new(),
            metrics,
        };
        let dir = self.version_dir(&version)?;
        let saved = checkpoint::write_checkpoint_reporting(&dir, &w, &self.fusion, progress)?;
        let mut next = m.clone();
        next.versions.push(saved.clone());
        self.store.persist(&next)?;
        *m = next;
        info!(version = %saved.version, checksum = %saved.checksum, "checkpoint saved");
        drop(m);
        self.apply_retention()?;
        Ok(saved)
    }

    /// Keeps the `keep` newest versions (plus golden and current); `None` keeps all.
    /// Persisted in the manifest and applied now and after every save.
    ///
    /// # Errors
    /// I/O errors writing the manifest.
    pub fn set_retention(&self, keep: Option<usize>) -> Result<Vec<String>> {
        self.store.update(|next| next.retention = keep)?;
        self.apply_retention()
    }

    /// Keeps the `N` newest versions and deletes older ones, except the golden version, the
    /// current pointer and the active weights. Returns the deleted versions.
    ///
    /// # Errors
    /// I/O errors writing the manifest (directory removal failures are only logged).
    pub fn apply_retention(&self) -> Result<Vec<String>> {
        let active = self.current_version().map(|v| v.version);
        self.store.apply_retention(active.as_deref())
    }
}
