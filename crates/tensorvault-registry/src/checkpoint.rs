//! Checkpoint directories: `metadata.json` + `weights.safetensors`.
//!
//! Writing is atomic: both files go into a hidden temporary directory next to the
//! destination, each is fsynced, the temporary directory is fsynced, renamed to its final
//! name, and the parent directory is fsynced. A crash leaves either no checkpoint or a
//! complete one (plus perhaps a `.tmp-*` directory, which the registry removes on open).
//!
//! Loading maps `weights.safetensors` (memmap2), checks the SHA-256 recorded in the
//! metadata, lets the `safetensors` crate validate the header (offsets, lengths, overlap),
//! then checks each expected tensor's name, dtype and shape. Aligned little-endian f32
//! tensors are zero-copy views of the map; f16 and bf16 are widened to f32 with `half`.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use tensorvault_core::atomic::sync_dir;
use tensorvault_core::progress::{report, ProgressFn};
use tracing::{debug, warn};

use crate::digest::{digest_all_reporting, verify_chunks, ChunkDigests};
use crate::error::{RegistryError, Result};
use crate::initializer::{assemble, WeightInitializer};
use crate::st_error::st_err;
use crate::version::WeightVersion;
use crate::weights::{FusionConfig, LoadedWeights, WeightTensor};

/// Name of the metadata document inside a checkpoint directory.
pub const METADATA_FILE: &str = "metadata.json";
/// Name of the weights file inside a checkpoint directory.
pub const WEIGHTS_FILE: &str = "weights.safetensors";
/// Value of [`CheckpointMetadata::format`].
pub const FORMAT_NAME: &str = "tensorvault-registry-checkpoint";
/// Current [`CheckpointMetadata::format_version`].
pub const FORMAT_VERSION: u32 = 1;
pub use crate::digest::CHECKSUM_PREFIX;

/// Contents of `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] at write time.
    pub format_version: u32,
    /// Version metadata; `checksum` is `sha256:` of `weights.safetensors`.
    #[serde(flatten)]
    pub version: WeightVersion,
    /// Shapes the weights were written for.
    pub config: FusionConfig,
    /// Per-chunk BLAKE3 digests of `weights.safetensors` (absent in checkpoints written
    /// before they existed): verified loads hash the chunks on all cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunkDigests>,
}

/// Options for [`load_checkpoint_dir`].
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions<'a> {
    /// Missing or extra tensors are errors.
    pub strict: bool,
    /// Check the SHA-256 of the weights file before parsing it.
    pub verify_checksum: bool,
    /// Fills missing tensors in a non-strict load (missing tensors are errors without it).
    pub fallback: Option<&'a WeightInitializer>,
}

/// `sha256:<hex>` of `bytes`.
#[must_use]
pub fn checksum_of(bytes: &[u8]) -> String {
    format!(
        "{CHECKSUM_PREFIX}{}",
        tensorvault_core::checksum::hex(&sha2::Sha256::digest(bytes))
    )
}

fn f32_le_bytes(data: &[f32]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        std::borrow::Cow::Borrowed(bytemuck::cast_slice(data))
    } else {
        std::borrow::Cow::Owned(data.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

fn fsync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| tensorvault_core::fsio::sync_all(&f, path))
        .map_err(RegistryError::io(path))
}

/// Writes `weights` as a checkpoint directory `dest` (which must not exist), atomically.
/// Returns the version with its `checksum` filled in.
///
/// # Errors
/// I/O errors, [`RegistryError::VersionExists`] if `dest` exists, safetensors errors.
pub fn write_checkpoint(
    dest: &Path,
    weights: &LoadedWeights,
    config: &FusionConfig,
) -> Result<WeightVersion> {
    write_checkpoint_reporting(dest, weights, config, None)
}

/// [`write_checkpoint`], reporting to `progress` `(done, total)` in bytes of
/// `weights.safetensors` hashed, from `(0, total)` once the file is serialized to
/// `(total, total)` once it is durable.
///
/// # Errors
/// See [`write_checkpoint`].
pub fn write_checkpoint_reporting(
    dest: &Path,
    weights: &LoadedWeights,
    config: &FusionConfig,
    progress: Option<&ProgressFn>,
) -> Result<WeightVersion> {
    weights.validate(config)?;
    if dest.exists() {
        return Err(RegistryError::VersionExists {
            version: weights.version.version.clone(),
        });
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    let leaf = dest
        .file_name()
        .map_or_else(|| "ckpt".into(), |s| s.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = parent.join(format!(".tmp-{leaf}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&tmp).map_err(RegistryError::io(&tmp))?;
    let result = write_into(&tmp, weights, config, progress).and_then(|version| {
        sync_dir(&tmp).map_err(RegistryError::io(&tmp))?;
        tensorvault_core::fsio::rename(&tmp, dest).map_err(RegistryError::io(dest))?;
        sync_dir(parent).map_err(RegistryError::io(parent))?;
        Ok(version)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn write_into(
    dir: &Path,
    weights: &LoadedWeights,
    config: &FusionConfig,
    progress: Option<&ProgressFn>,
) -> Result<WeightVersion> {
    let wpath = dir.join(WEIGHTS_FILE);
    let named = weights.named_tensors();
    let bytes: Vec<(String, std::borrow::Cow<'_, [u8]>, Vec<usize>)> = named
        .iter()
        .map(|(n, t)| (n.clone(), f32_le_bytes(t.data()), t.shape().to_vec()))
        .collect();
    let views = bytes
        .iter()
        .map(|(n, b, s)| {
            TensorView::new(Dtype::F32, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| st_err(&wpath, None, &e))
        })
        .collect::<Result<Vec<_>>>()?;
    // One key only: safetensors writes `__metadata__` in HashMap order, so two keys would
    // make the file bytes (and the checksum) differ from run to run.
    let info = HashMap::from([("format".to_owned(), FORMAT_NAME.to_owned())]);
    safetensors::serialize_to_file(views, &Some(info), &wpath)
        .map_err(|e| st_err(&wpath, None, &e))?;
    let map = map_file(&wpath)?;
    let total = map.len() as u64;
    report(progress, 0, total);
    // The digests are computed from the page cache while the file is flushed to disk: the
    // fsync waits on the device, not the CPU, so it runs on its own thread and both rayon
    // workers hash.
    let (synced, (whole, chunks)) = std::thread::scope(|s| {
        let sync = s.spawn(|| fsync_file(&wpath));
        let d = digest_all_reporting(&map, &|n| report(progress, n, total));
        (sync.join(), d)
    });
    synced.unwrap_or_else(|_| {
        Err(RegistryError::Io {
            path: wpath.clone(),
            source: std::io::Error::other("fsync thread panicked"),
        })
    })?;
    report(progress, total, total);
    let mut version = weights.version.clone();
    version.checksum = whole;
    let meta = CheckpointMetadata {
        format: FORMAT_NAME.into(),
        format_version: FORMAT_VERSION,
        version: version.clone(),
        config: config.clone(),
        chunks: Some(chunks),
    };
    let mpath = dir.join(METADATA_FILE);
    let json = serde_json::to_vec_pretty(&meta).map_err(RegistryError::json(&mpath))?;
    fs::write(&mpath, json).map_err(RegistryError::io(&mpath))?;
    fsync_file(&mpath)?;
    Ok(version)
}

/// Maps a file read-only; it must be a regular file.
///
/// # Errors
/// [`RegistryError::NotRegularFile`] (a FIFO, device, socket or directory: refused without
/// blocking), [`RegistryError::Io`].
pub fn map_file(path: &Path) -> Result<Arc<memmap2::Mmap>> {
    let file = RegistryError::open_regular(path).map_err(RegistryError::io(path))??;
    // SAFETY: the map is read-only and checkpoint files are never modified in place (they are
    // written once into a temp directory and renamed). A process that truncates the file
    // behind our back could still cause SIGBUS; that is outside the registry's contract.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(RegistryError::io(path))?;
    Ok(Arc::new(map))
}

/// Largest `metadata.json` the registry reads (the ones it writes are a few KiB).
pub const MAX_METADATA_BYTES: u64 = 16 << 20;

/// Reads and parses `metadata.json` of checkpoint `dir`.
///
/// # Errors
/// [`RegistryError::MissingMetadata`], [`RegistryError::FileTooLarge`] (over
/// [`MAX_METADATA_BYTES`]), [`RegistryError::Json`], [`RegistryError::Io`],
/// [`RegistryError::InvalidMetadata`] (a `format_version` newer than
/// [`FORMAT_VERSION`], a `config` larger than the weights file).
pub fn read_metadata(dir: &Path) -> Result<CheckpointMetadata> {
    let mpath = dir.join(METADATA_FILE);
    let bytes = match RegistryError::read_bounded(&mpath, MAX_METADATA_BYTES) {
        Ok(b) => b?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RegistryError::MissingMetadata {
                dir: dir.to_owned(),
            })
        }
        Err(e) => return Err(RegistryError::io(&mpath)(e)),
    };
    let meta: CheckpointMetadata =
        serde_json::from_slice(&bytes).map_err(RegistryError::json(&mpath))?;
    // A newer layout is refused, not read as this one (as the manifest's format_version).
    if meta.format_version > FORMAT_VERSION {
        return Err(RegistryError::InvalidMetadata {
            path: mpath,
            field: "format_version",
            reason: format!(
                "{} is newer than this build reads (up to {FORMAT_VERSION})",
                meta.format_version
            ),
        });
    }
    check_config_size(dir, &mpath, &meta.config)?;
    Ok(meta)
}

/// Most experts a `config` may name when no weights file bounds it.
pub const MAX_EXPERTS_WITHOUT_WEIGHTS: usize = 1 << 16;

/// No checksum covers `metadata.json`'s `config`, yet its sizes decide what a load
/// allocates (one name per expert tensor, one buffer per tensor). It must describe no more
/// values than the weights file can hold (every value takes at least 2 bytes: f16/bf16),
/// or, without a weights file, at most [`MAX_EXPERTS_WITHOUT_WEIGHTS`] experts.
fn check_config_size(dir: &Path, mpath: &Path, c: &FusionConfig) -> Result<()> {
    let bad = |reason: String| RegistryError::InvalidMetadata {
        path: mpath.to_owned(),
        field: "config",
        reason,
    };
    let values = c
        .checked_value_count()
        .ok_or_else(|| bad(format!("{c:?} describes more than 2^64 values")))?;
    let wpath = dir.join(WEIGHTS_FILE);
    match fs::metadata(&wpath) {
        // The length of a FIFO or device says nothing: name what the file is.
        Ok(m) if !m.is_file() => Err(RegistryError::NotRegularFile {
            kind: tensorvault_core::regular::FileKind::of(m.file_type())
                .unwrap_or(tensorvault_core::regular::FileKind::Unknown),
            path: wpath,
        }),
        Ok(m) if values.saturating_mul(2) > m.len() => Err(bad(format!(
            "{values} values cannot fit in the {}-byte {WEIGHTS_FILE}",
            m.len()
        ))),
        Ok(_) => Ok(()),
        Err(_) if c.num_experts > MAX_EXPERTS_WITHOUT_WEIGHTS => Err(bad(format!(
            "num_experts {} exceeds {MAX_EXPERTS_WITHOUT_WEIGHTS} (and there is no {WEIGHTS_FILE})",
            c.num_experts
        ))),
        Err(_) => Ok(()),
    }
}

pub(crate) use crate::digest::check_checksum_format;

fn check_checksum(path: &Path, bytes: &[u8], expected: &str) -> Result<()> {
    crate::digest::verify_whole(path, bytes, expected)
}

/// Verifies the checksum of checkpoint `dir` and that its safetensors header is valid.
///
/// # Errors
/// [`RegistryError::MissingMetadata`], [`RegistryError::ChecksumMismatch`],
/// [`RegistryError::Safetensors`], I/O and JSON errors.
pub fn verify_checkpoint(dir: &Path) -> Result<CheckpointMetadata> {
    let meta = read_metadata(dir)?;
    let wpath = dir.join(WEIGHTS_FILE);
    let map = map_file(&wpath)?;
    let _ = map.advise(memmap2::Advice::WillNeed);
    check_checksum(&wpath, &map, &meta.version.checksum)?;
    if let Some(c) = &meta.chunks {
        verify_chunks(&wpath, &map, c)?;
    }
    SafeTensors::deserialize(&map).map_err(|e| st_err(&wpath, Some(&map), &e))?;
    Ok(meta)
}

/// Converts one safetensors tensor to f32: zero copy for aligned little-endian F32,
/// widened for F16 and BF16.
///
/// # Errors
/// [`RegistryError::UnsupportedDtype`] for other dtypes.
pub fn tensor_to_f32(
    name: &str,
    view: &TensorView<'_>,
    map: &Arc<memmap2::Mmap>,
) -> Result<WeightTensor> {
    let shape = view.shape().to_vec();
    let data = view.data();
    let lossless = |v: Vec<f32>| {
        let found = v.len();
        WeightTensor::new(shape.clone(), v).ok_or_else(|| RegistryError::LengthMismatch {
            name: name.to_owned(),
            shape: shape.clone(),
            found,
        })
    };
    match view.dtype() {
        Dtype::F32 => {
            // The view must lie inside `map` for a zero-copy view; otherwise copy.
            let (base, p) = (map.as_ptr() as usize, data.as_ptr() as usize);
            let start = p.wrapping_sub(base);
            let inside = p >= base
                && start
                    .checked_add(data.len())
                    .is_some_and(|e| e <= map.len());
            let view = inside
                .then(|| {
                    WeightTensor::mapped(shape.clone(), map.clone(), start..start + data.len())
                })
                .flatten();
            if let Some(t) = view {
                return Ok(t);
            }
            debug!(name, "f32 tensor not aligned in place; copying");
            lossless(
                data.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )
        }
        Dtype::F16 => lossless(
            data.chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        Dtype::BF16 => lossless(
            data.chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        other => Err(RegistryError::UnsupportedDtype {
            name: name.to_owned(),
            dtype: format!("{other:?}"),
        }),
    }
}

/// Loads checkpoint `dir` for `config`.
///
/// # Errors
/// Everything [`verify_checkpoint`] reports, plus [`RegistryError::MissingTensor`],
/// [`RegistryError::UnexpectedTensor`] (strict), [`RegistryError::ShapeMismatch`] and
/// [`RegistryError::UnsupportedDtype`].
pub fn load_checkpoint_dir(
    dir: &Path,
    config: &FusionConfig,
    opts: LoadOptions<'_>,
) -> Result<LoadedWeights> {
    let meta = read_metadata(dir)?;
    let wpath: PathBuf = dir.join(WEIGHTS_FILE);
    let map = map_file(&wpath)?;
    if opts.verify_checksum {
        // Every byte is about to be hashed: ask for the whole file at once.
        let _ = map.advise(memmap2::Advice::WillNeed);
        match &meta.chunks {
            // The chunks on all cores; their list came with the whole-file checksum.
            Some(c) => {
                check_checksum_format(&meta.version.checksum)?;
                verify_chunks(&wpath, &map, c)?;
            }
            None => check_checksum(&wpath, &map, &meta.version.checksum)?,
        }
    }
    let st = SafeTensors::deserialize(&map).map_err(|e| st_err(&wpath, Some(&map), &e))?;
    let specs = config.tensor_specs();
    if opts.strict {
        let expected: BTreeSet<&str> = specs.iter().map(|(n, _)| n.as_str()).collect();
        if let Some(extra) = st
            .names()
            .into_iter()
            .find(|n| !expected.contains(n.as_str()))
        {
            return Err(RegistryError::UnexpectedTensor {
                name: extra.clone(),
                path: wpath,
            });
        }
    }
    let mut filled = Vec::new();
    let mut tensors = Vec::with_capacity(specs.len());
    for (name, shape) in &specs {
        match st.tensor(name) {
            Ok(view) => {
                if view.shape() != shape.as_slice() {
                    return Err(RegistryError::ShapeMismatch {
                        name: name.clone(),
                        expected: shape.clone(),
                        found: view.shape().to_vec(),
                    });
                }
                tensors.push(tensor_to_f32(name, &view, &map)?);
            }
            Err(_) => match (opts.strict, opts.fallback) {
                (false, Some(init)) => {
                    warn!(tensor = %name, dir = %dir.display(), "tensor missing; initialized by fallback");
                    tensors.push(init.initialize_named(name, shape)?);
                    filled.push(name.clone());
                }
                _ => {
                    return Err(RegistryError::MissingTensor {
                        name: name.clone(),
                        path: wpath,
                    })
                }
            },
        }
    }
    let mut weights = assemble(config, tensors, meta.version);
    weights.filled_by_fallback = filled;
    Ok(weights)
}

/// Loads only the tensors `names` from checkpoint `dir`, touching only their bytes (plus the
/// header). The file checksum covers the whole file, so it is not checked here; use
/// [`verify_checkpoint`] for that.
///
/// # Errors
/// [`RegistryError::MissingTensor`], [`RegistryError::Safetensors`],
/// [`RegistryError::UnsupportedDtype`], I/O errors.
pub fn load_tensors(dir: &Path, names: &[&str]) -> Result<Vec<WeightTensor>> {
    let wpath = dir.join(WEIGHTS_FILE);
    let map = map_file(&wpath)?;
    let st = SafeTensors::deserialize(&map).map_err(|e| st_err(&wpath, Some(&map), &e))?;
    names
        .iter()
        .map(|&name| {
            let view = st.tensor(name).map_err(|_| RegistryError::MissingTensor {
                name: name.to_owned(),
                path: wpath.clone(),
            })?;
            tensor_to_f32(name, &view, &map)
        })
        .collect()
}
