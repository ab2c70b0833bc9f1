//! `registry.json` and what every registry does with it, whatever its versions hold: the
//! version list, golden marker, current pointer and retention, persisted atomically with a
//! CRC-32C seal (`docs/formats/registry.md`). Shared by [`crate::WeightRegistry`] (the
//! FuseMoE weights) and [`crate::ModelRegistry`] (any safetensors checkpoint).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::error::{RegistryError, Result};
use crate::version::{validate_version, WeightVersion};

/// Manifest file name in the registry root.
pub const MANIFEST_FILE: &str = "registry.json";
/// Largest `registry.json` the registry reads (about 200 bytes per version: room for
/// hundreds of thousands of versions).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// Directory (under the root) holding one checkpoint directory per version.
pub const VERSIONS_DIR: &str = "versions";
/// `format_version` of the manifests this build writes: 2 adds `manifest_crc32c`.
pub const MANIFEST_FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) format_version: u32,
    pub(crate) versions: Vec<WeightVersion>,
    pub(crate) golden: Option<String>,
    pub(crate) current: Option<String>,
    pub(crate) retention: Option<usize>,
    /// CRC-32C (8 lowercase hex digits) of the manifest's compact JSON serialization
    /// without this field (`docs/formats/registry.md`); absent in format version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) manifest_crc32c: Option<String>,
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
        if self.format_version > MANIFEST_FORMAT_VERSION {
            return Err(RegistryError::ManifestFormatTooNew {
                path: path.to_owned(),
                found: self.format_version,
                supported: MANIFEST_FORMAT_VERSION,
            });
        }
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
        let mut seen: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(self.versions.len());
        for (i, v) in self.versions.iter().enumerate() {
            if let Some(&first) = seen.get(v.version.as_str()) {
                return Err(RegistryError::ManifestDuplicateVersion {
                    path: path.to_owned(),
                    version: v.version.clone(),
                    first,
                    second: i,
                });
            }
            seen.insert(&v.version, i);
        }
        for (field, named) in [("golden", &self.golden), ("current", &self.current)] {
            if let Some(v) = named {
                if !seen.contains_key(v.as_str()) {
                    return Err(RegistryError::ManifestUnlistedVersion {
                        path: path.to_owned(),
                        field,
                        version: v.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether `version` is listed.
    pub(crate) fn contains(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v.version == version)
    }

    /// The version string a new version gets: `wanted` itself when given (it must be a
    /// valid version string that is not listed yet), otherwise the highest listed semantic
    /// version with its patch number bumped. The one place both registries (and so the CLI
    /// and Python) decide a new version's name.
    ///
    /// # Errors
    /// [`RegistryError::InvalidVersion`] for an invalid `wanted`,
    /// [`RegistryError::VersionExists`] for a listed one.
    pub(crate) fn claim_version(&self, wanted: Option<&str>) -> Result<String> {
        if let Some(wanted) = wanted {
            validate_version(wanted)?;
            if self.contains(wanted) {
                return Err(RegistryError::VersionExists {
                    version: wanted.to_owned(),
                });
            }
            return Ok(wanted.to_owned());
        }
        let mut max = semver::Version::new(0, 0, 0);
        for v in &self.versions {
            if let Ok(p) = semver::Version::parse(&v.version) {
                max = max.max(p);
            }
        }
        let mut next = semver::Version::new(max.major, max.minor, max.patch + 1);
        // The maximum's successor is never listed; the loop only makes that explicit.
        while self.contains(&next.to_string()) {
            next.patch += 1;
        }
        Ok(next.to_string())
    }

    /// Golden, then the current pointer, then every version newest first, without repeats:
    /// the order a fallback chain tries versions in.
    pub(crate) fn chain(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for v in self
            .golden
            .iter()
            .chain(self.current.iter())
            .chain(self.versions.iter().rev().map(|v| &v.version))
        {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the manifest half-updated on disk (it is
    // replaced atomically), so a poisoned lock's data is still usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The registry root and its manifest, in memory and on disk.
#[derive(Debug)]
pub(crate) struct ManifestStore {
    root: PathBuf,
    manifest: Mutex<Manifest>,
}

impl ManifestStore {
    /// Opens (or creates) the registry directory `root`: creates `versions/`, removes
    /// leftover `.tmp-*` directories of interrupted saves, reads and checks `registry.json`.
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let root = root.to_owned();
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
            manifest: Mutex::new(manifest),
        })
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The manifest, locked: hold it across a save so two saves cannot pick one version.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Manifest> {
        lock(&self.manifest)
    }

    /// A copy of the manifest.
    pub(crate) fn snapshot(&self) -> Manifest {
        self.lock().clone()
    }

    /// Directory of `version` (validated: no path tricks).
    pub(crate) fn version_dir(&self, version: &str) -> Result<PathBuf> {
        validate_version(version)?;
        Ok(self.root.join(VERSIONS_DIR).join(version))
    }

    /// `version`'s directory, if the manifest lists it.
    pub(crate) fn listed_dir(&self, version: &str) -> Result<PathBuf> {
        let dir = self.version_dir(version)?;
        if self.lock().contains(version) {
            Ok(dir)
        } else {
            Err(RegistryError::VersionNotFound {
                version: version.to_owned(),
            })
        }
    }

    /// Checks that `found`, the checksum a version's verified metadata records, is the one
    /// the manifest lists for `version` (in directory `dir`).
    ///
    /// # Errors
    /// [`RegistryError::VersionNotFound`], [`RegistryError::ListedChecksumMismatch`].
    pub(crate) fn check_listed_checksum(
        &self,
        version: &str,
        dir: &Path,
        found: &str,
    ) -> Result<()> {
        let listed = self
            .lock()
            .versions
            .iter()
            .find(|v| v.version == version)
            .map(|v| v.checksum.clone())
            .ok_or_else(|| RegistryError::VersionNotFound {
                version: version.to_owned(),
            })?;
        if listed.eq_ignore_ascii_case(found) {
            return Ok(());
        }
        Err(RegistryError::ListedChecksumMismatch {
            version: version.to_owned(),
            path: dir.join(crate::checkpoint::METADATA_FILE),
            listed,
            found: found.to_owned(),
        })
    }

    /// Writes `m` (sealed) to `registry.json` atomically.
    pub(crate) fn persist(&self, m: &Manifest) -> Result<()> {
        let mpath = self.root.join(MANIFEST_FILE);
        let json = serde_json::to_vec_pretty(&m.sealed()).map_err(RegistryError::json(&mpath))?;
        tensorvault_core::atomic::write_atomic(&mpath, &json).map_err(|e| RegistryError::Io {
            path: mpath.clone(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Applies `f` to a copy of the manifest, persists it, then makes it the one in memory
    /// (so memory never runs ahead of the disk).
    pub(crate) fn update(&self, f: impl FnOnce(&mut Manifest)) -> Result<()> {
        let mut m = self.lock();
        let mut next = m.clone();
        f(&mut next);
        self.persist(&next)?;
        *m = next;
        Ok(())
    }

    /// Records `version` as the current one when it is listed and not already current.
    pub(crate) fn set_current(&self, version: &str) -> Result<()> {
        let mut m = self.lock();
        if m.contains(version) && m.current.as_deref() != Some(version) {
            let mut next = m.clone();
            next.current = Some(version.to_owned());
            self.persist(&next)?;
            *m = next;
        }
        Ok(())
    }

    /// Keeps the `N` newest versions (the manifest's retention) and deletes older ones,
    /// except the golden version, the current pointer and `active`. Returns the deleted
    /// versions.
    pub(crate) fn apply_retention(&self, active: Option<&str>) -> Result<Vec<String>> {
        let mut m = self.lock();
        let Some(keep) = m.retention else {
            return Ok(Vec::new());
        };
        let cutoff = m.versions.len().saturating_sub(keep);
        // What is kept is decided by name, and deletion goes by name: a name is removed
        // only when no kept entry carries it (a manifest with a repeated name is refused at
        // open, and this holds even if one slipped through).
        let kept: std::collections::HashSet<&str> = m.versions[cutoff..]
            .iter()
            .map(|v| v.version.as_str())
            .chain(m.golden.as_deref())
            .chain(m.current.as_deref())
            .chain(active)
            .collect();
        let mut removed: Vec<String> = Vec::new();
        for v in &m.versions[..cutoff] {
            if !kept.contains(v.version.as_str()) && !removed.contains(&v.version) {
                removed.push(v.version.clone());
            }
        }
        if removed.is_empty() {
            return Ok(removed);
        }
        let mut next = m.clone();
        next.versions.retain(|v| !removed.contains(&v.version));
        // The manifest goes first: a crash after it leaves an unlisted directory, never a
        // listed version without files.
        self.persist(&next)?;
        *m = next;
        drop(m);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: &str) -> WeightVersion {
        WeightVersion {
            version: version.into(),
            source_id: "test".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            checksum: "none".into(),
            metrics: None,
        }
    }

    /// Open refuses a repeated name; should one reach retention anyway (a manifest built in
    /// memory), a name inside the kept window is never deleted.
    #[test]
    fn retention_never_deletes_a_name_it_keeps() {
        let tmp = tempfile::tempdir().unwrap();
        let store = ManifestStore::open(tmp.path()).unwrap();
        for v in ["1.0.0", "1.0.1", "1.0.2"] {
            fs::create_dir_all(store.version_dir(v).unwrap()).unwrap();
        }
        store
            .update(|m| {
                m.versions = ["1.0.2", "1.0.0", "1.0.1", "1.0.2"]
                    .into_iter()
                    .map(entry)
                    .collect();
                m.retention = Some(2);
            })
            .unwrap();
        assert_eq!(store.apply_retention(None).unwrap(), ["1.0.0"]);
        assert!(store.version_dir("1.0.2").unwrap().exists());
        assert!(!store.version_dir("1.0.0").unwrap().exists());
        let kept: Vec<String> = store
            .snapshot()
            .versions
            .into_iter()
            .map(|v| v.version)
            .collect();
        assert_eq!(kept, ["1.0.2", "1.0.1", "1.0.2"]);
    }
}
