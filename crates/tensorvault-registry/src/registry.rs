//! The versioned weight registry: versions on disk, fallback chain, rollback, hot swap.
//!
//! Layout under the root: `registry.json` (the version history, golden marker, current
//! pointer and retention, replaced atomically) and `versions/<version>/` checkpoint
//! directories. A version is listed only once its directory is complete and the manifest
//! naming it is durable, so a crash mid-save never lists a half-written version.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwapOption;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::checkpoint::{self, load_checkpoint_dir, CheckpointMetadata, LoadOptions};
use crate::error::{RegistryError, Result};
use crate::initializer::WeightInitializer;
use crate::strategy::{InitializationStrategy, KaimingMode, Nonlinearity};
use crate::version::{now_rfc3339, validate_version, TrainingMetrics, WeightVersion};
use crate::weights::{FusionConfig, LoadedWeights};

/// Manifest file name in the registry root.
pub const MANIFEST_FILE: &str = "registry.json";
/// Largest `registry.json` the registry reads (about 200 bytes per version: room for
/// hundreds of thousands of versions).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// Directory (under the root) holding one checkpoint directory per version.
pub const VERSIONS_DIR: &str = "versions";

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

/// `format_version` of the manifests this build writes: 2 adds `manifest_crc32c`.
pub const MANIFEST_FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Manifest {
    format_version: u32,
    versions: Vec<WeightVersion>,
    golden: Option<String>,
    current: Option<String>,
    retention: Option<usize>,
    /// CRC-32C (8 lowercase hex digits) of the manifest's compact JSON serialization
    /// without this field (`docs/formats/registry.md`); absent in format version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    manifest_crc32c: Option<String>,
}

impl Manifest {
    /// The checksum of everything else in the manifest.
    fn crc(&self) -> u32 {
        let body = Manifest {
            manifest_crc32c: None,
            ..self.clone()
        };
        tensorvault_core::checksum::crc32c(&serde_json::to_vec(&body).unwrap_or_default())
    }

    /// The manifest as written: the current format version and its checksum.
    fn sealed(&self) -> Manifest {
        let mut m = Manifest {
            format_version: MANIFEST_FORMAT_VERSION,
            manifest_crc32c: None,
            ..self.clone()
        };
        m.manifest_crc32c = Some(format!("{:08x}", m.crc()));
        m
    }

    /// A format-2 manifest must carry its checksum and match it (a format-1 manifest,
    /// written before the checksum existed, has none; the next save seals it).
    fn check_crc(&self, path: &Path) -> Result<()> {
        let computed = format!("{:08x}", self.crc());
        match &self.manifest_crc32c {
            Some(stored) if *stored == computed => Ok(()),
            None if self.format_version < 2 => Ok(()),
            stored => Err(RegistryError::ManifestChecksum {
                path: path.to_owned(),
                stored: stored.clone().unwrap_or_else(|| "(missing)".into()),
                computed,
            }),
        }
    }

    /// Every version string the manifest names must be one the CLI would accept: the
    /// manifest is a file, and a crafted one (`"../../victim"`) must never choose which
    /// directory retention deletes or which one a load reads.
    fn validate(&self, path: &Path) -> Result<()> {
        let named = self
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("versions[{i}].version"), &v.version))
            .chain(self.golden.iter().map(|v| ("golden".to_owned(), v)))
            .chain(self.current.iter().map(|v| ("current".to_owned(), v)));
        for (field, version) in named {
            if let Err(e) = validate_version(version) {
                let reason = match e {
                    RegistryError::InvalidVersion { reason, .. } => reason,
                    other => other.to_string(),
                };
                return Err(RegistryError::ManifestInvalidVersion {
                    path: path.to_owned(),
                    field,
                    version: version.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }
}

/// FuseMoE weight registry. All methods take `&self` and are safe to call from many threads.
pub struct WeightRegistry {
    root: PathBuf,
    fusion: FusionConfig,
    init: InitializationConfig,
    current: ArcSwapOption<LoadedWeights>,
    manifest: Mutex<Manifest>,
    attempts: Mutex<Vec<LoadAttempt>>,
}

impl std::fmt::Debug for WeightRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightRegistry")
            .field("root", &self.root)
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
        let root = root.as_ref().to_owned();
        let vdir = root.join(VERSIONS_DIR);
        fs::create_dir_all(&vdir).map_err(RegistryError::io(&vdir))?;
        for entry in fs::read_dir(&vdir).map_err(RegistryError::io(&vdir))? {
            let entry = entry.map_err(RegistryError::io(&vdir))?;
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                warn!(path = %entry.path().display(), "removing leftover of an interrupted save");
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let mpath = root.join(MANIFEST_FILE);
        let manifest = match RegistryError::read_bounded(&mpath, MAX_MANIFEST_BYTES) {
            Ok(b) => {
                let b = b?;
                let m: Manifest =
                    serde_json::from_slice(&b).map_err(RegistryError::json(&mpath))?;
                m.check_crc(&mpath)?;
                m.validate(&mpath)?;
                m
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest {
                format_version: 1,
                ..Manifest::default()
            },
            Err(e) => return Err(RegistryError::io(&mpath)(e)),
        };
        Ok(Self {
            root,
            fusion,
            init,
            current: ArcSwapOption::empty(),
            manifest: Mutex::new(manifest),
            attempts: Mutex::new(Vec::new()),
        })
    }

    /// The registry root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
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
        validate_version(version)?;
        Ok(self.root.join(VERSIONS_DIR).join(version))
    }

    fn persist(&self, m: &Manifest) -> Result<()> {
        let mpath = self.root.join(MANIFEST_FILE);
        let json = serde_json::to_vec_pretty(&m.sealed()).map_err(RegistryError::json(&mpath))?;
        tensorvault_core::atomic::write_atomic(&mpath, &json).map_err(|e| RegistryError::Io {
            path: mpath.clone(),
            source: std::io::Error::other(e.to_string()),
        })
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
                self.load_dir(&self.root.join(path), *strict)
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
                format!("checkpoint:{}", self.root.join(path).display())
            }
            other => format!("initialize:{}", other.name()),
        }
    }

    fn chain_versions(&self) -> Vec<String> {
        let m = lock(&self.manifest);
        let mut out: Vec<String> = Vec::new();
        for v in m
            .golden
            .iter()
            .chain(m.current.iter())
            .chain(m.versions.iter().rev().map(|v| &v.version))
        {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        out
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
        let dir = self.version_dir(version)?;
        if !lock(&self.manifest)
            .versions
            .iter()
            .any(|v| v.version == version)
        {
            return Err(RegistryError::VersionNotFound {
                version: version.to_owned(),
            });
        }
        let w = Arc::new(self.load_dir(&dir, true)?);
        self.activate(w.clone())?;
        Ok(w)
    }

    fn activate(&self, w: Arc<LoadedWeights>) -> Result<()> {
        let v = w.version.version.clone();
        let old = self.current.swap(Some(w));
        info!(
            from = old.as_ref().map_or("<none>", |o| o.version.version.as_str()),
            to = %v,
            "weights swapped"
        );
        let mut m = lock(&self.manifest);
        if m.versions.iter().any(|x| x.version == v) && m.current.as_deref() != Some(&v) {
            let mut next = m.clone();
            next.current = Some(v);
            self.persist(&next)?;
            *m = next;
        }
        Ok(())
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
        self.activate(Arc::new(new))
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
        lock(&self.manifest).versions.clone()
    }

    /// The golden version, if marked.
    #[must_use]
    pub fn golden(&self) -> Option<String> {
        lock(&self.manifest).golden.clone()
    }

    /// The current-version pointer recorded on disk.
    #[must_use]
    pub fn current_pointer(&self) -> Option<String> {
        lock(&self.manifest).current.clone()
    }

    /// Marks `version` golden (verified first).
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], verification errors.
    pub fn set_golden(&self, version: &str) -> Result<()> {
        self.verify_version(version)?;
        let mut m = lock(&self.manifest);
        let mut next = m.clone();
        next.golden = Some(version.to_owned());
        self.persist(&next)?;
        *m = next;
        Ok(())
    }

    /// Verifies checkpoint directory `path` (checksum + safetensors header).
    ///
    /// # Errors
    /// See [`checkpoint::verify_checkpoint`].
    pub fn verify_checkpoint(&self, path: impl AsRef<Path>) -> Result<CheckpointMetadata> {
        checkpoint::verify_checkpoint(path.as_ref())
    }

    /// Verifies registry version `version`.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], see [`checkpoint::verify_checkpoint`].
    pub fn verify_version(&self, version: &str) -> Result<CheckpointMetadata> {
        let dir = self.version_dir(version)?;
        if !lock(&self.manifest)
            .versions
            .iter()
            .any(|v| v.version == version)
        {
            return Err(RegistryError::VersionNotFound {
                version: version.to_owned(),
            });
        }
        checkpoint::verify_checkpoint(&dir)
    }

    /// Saves `weights` as a new version. The version string is `weights.version.version`
    /// when that is valid and new, otherwise the highest existing version with its patch
    /// number bumped. Applies retention afterwards.
    ///
    /// # Errors
    /// Validation, I/O and JSON errors; nothing is listed unless everything is durable.
    pub fn save_checkpoint(
        &self,
        weights: &LoadedWeights,
        metrics: Option<TrainingMetrics>,
    ) -> Result<WeightVersion> {
        let mut m = lock(&self.manifest);
        let wanted = &weights.version.version;
        let version = if validate_version(wanted).is_ok()
            && !m.versions.iter().any(|v| &v.version == wanted)
        {
            wanted.clone()
        } else {
            let mut max = semver::Version::new(0, 0, 0);
            for v in &m.versions {
                if let Ok(p) = semver::Version::parse(&v.version) {
                    max = max.max(p);
                }
            }
            semver::Version::new(max.major, max.minor, max.patch + 1).to_string()
        };
        let mut w = weights.clone();
        w.version = WeightVersion {
            version: version.clone(),
            source_id: weights.version.source_id.clone(),
            created_at: now_rfc3339(),
            checksum: String::new(),
            metrics,
        };
        let dir = self.version_dir(&version)?;
        let saved = checkpoint::write_checkpoint(&dir, &w, &self.fusion)?;
        let mut next = m.clone();
        next.versions.push(saved.clone());
        self.persist(&next)?;
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
        {
            let mut m = lock(&self.manifest);
            let mut next = m.clone();
            next.retention = keep;
            self.persist(&next)?;
            *m = next;
        }
        self.apply_retention()
    }

    /// Keeps the `N` newest versions and deletes older ones, except the golden version, the
    /// current pointer and the active weights. Returns the deleted versions.
    ///
    /// # Errors
    /// I/O errors writing the manifest (directory removal failures are only logged).
    pub fn apply_retention(&self) -> Result<Vec<String>> {
        let active = self.current_version().map(|v| v.version);
        let mut m = lock(&self.manifest);
        let Some(keep) = m.retention else {
            return Ok(Vec::new());
        };
        let protected = |v: &str| {
            m.golden.as_deref() == Some(v)
                || m.current.as_deref() == Some(v)
                || active.as_deref() == Some(v)
        };
        let cutoff = m.versions.len().saturating_sub(keep);
        let removed: Vec<String> = m.versions[..cutoff]
            .iter()
            .filter(|v| !protected(&v.version))
            .map(|v| v.version.clone())
            .collect();
        if removed.is_empty() {
            return Ok(removed);
        }
        let mut next = m.clone();
        next.versions.retain(|v| !removed.contains(&v.version));
        // The manifest goes first: a crash after it leaves an unlisted directory, never a
        // listed version without files.
        self.persist(&next)?;
        *m = next;
        for v in &removed {
            // validated again here: nothing outside versions/ is ever removed.
            let dir = self.version_dir(v)?;
            if let Err(e) = fs::remove_dir_all(&dir) {
                warn!(path = %dir.display(), error = %e, "could not remove pruned version");
            }
            info!(version = %v, "pruned by retention");
        }
        Ok(removed)
    }
}
