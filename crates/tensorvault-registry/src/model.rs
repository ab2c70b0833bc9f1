//! Any safetensors checkpoint as a registry version: a single `model.safetensors` or a
//! sharded Hugging Face layout (`model.safetensors.index.json` + shards), copied verbatim
//! (so it stays bit-exact and readable by every safetensors reader), with a whole-file
//! SHA-256 and per-chunk BLAKE3 digests of every file in the version's `metadata.json`.
//!
//! Files are copied byte for byte; tensors load as zero-copy views of the mapped files in
//! any dtype. See `docs/formats/registry.md` for the layout and the verification modes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::ops::Range;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};
use tensorvault_core::atomic::sync_dir;
use tensorvault_core::progress::ProgressFn;

use crate::checkpoint::{self, map_file, CHECKSUM_PREFIX, METADATA_FILE, WEIGHTS_FILE};
use crate::digest::sha256_hex;
pub use crate::digest::FileDigest;
use crate::error::{RegistryError, Result};
use crate::hashed_write::{write_hashed, SaveProgress};
use crate::st_error::st_err;
use crate::version::WeightVersion;
use crate::weights::FusionConfig;

/// `format` of a model checkpoint's `metadata.json`.
pub const MODEL_FORMAT_NAME: &str = "tensorvault-model-checkpoint";
/// Current `format_version` of a model checkpoint's `metadata.json`.
pub const MODEL_FORMAT_VERSION: u32 = 1;
/// The weights file of a single-file checkpoint (the Hugging Face name).
pub const SINGLE_FILE: &str = "model.safetensors";
/// The index of a sharded checkpoint (the Hugging Face name).
pub const INDEX_FILE: &str = "model.safetensors.index.json";
pub use crate::digest::{CHUNK_BYTES, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};
/// Largest index JSON the registry reads.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;
/// Most files one version may hold.
pub const MAX_FILES: usize = 4096;

/// What a version's tensors must be: anything, or the FuseMoE layout of a [`FusionConfig`]
/// (exact names and shapes, float dtypes).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Any tensors of any dtype.
    #[default]
    Any,
    /// The FuseMoE tensors of this configuration, F32, F16 or BF16.
    #[serde(rename = "fusemoe")]
    FuseMoe(FusionConfig),
}

impl Preset {
    /// Checks `tensors` (`name -> (dtype, shape)`) against the preset.
    ///
    /// # Errors
    /// [`RegistryError::MissingTensor`], [`RegistryError::UnexpectedTensor`],
    /// [`RegistryError::ShapeMismatch`], [`RegistryError::UnsupportedDtype`].
    pub fn check<'a>(
        &self,
        tensors: impl IntoIterator<Item = (&'a str, Dtype, &'a [usize])>,
        path: &Path,
    ) -> Result<()> {
        let Preset::FuseMoe(config) = self else {
            return Ok(());
        };
        let specs: BTreeMap<String, Vec<usize>> = config.tensor_specs().into_iter().collect();
        let mut seen = BTreeSet::new();
        for (name, dtype, shape) in tensors {
            let Some(want) = specs.get(name) else {
                return Err(RegistryError::UnexpectedTensor {
                    name: name.to_owned(),
                    path: path.to_owned(),
                });
            };
            if want.as_slice() != shape {
                return Err(RegistryError::ShapeMismatch {
                    name: name.to_owned(),
                    expected: want.clone(),
                    found: shape.to_vec(),
                });
            }
            if !matches!(dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                return Err(RegistryError::UnsupportedDtype {
                    name: name.to_owned(),
                    dtype: format!("{dtype:?}"),
                });
            }
            seen.insert(name);
        }
        match specs.keys().find(|n| !seen.contains(n.as_str())) {
            Some(missing) => Err(RegistryError::MissingTensor {
                name: missing.clone(),
                path: path.to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// Contents of a model version's `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMetadata {
    /// [`MODEL_FORMAT_NAME`] (or the FuseMoE checkpoint format for FuseMoE versions).
    pub format: String,
    /// [`MODEL_FORMAT_VERSION`] at write time.
    pub format_version: u32,
    /// Version metadata; `checksum` as described in [`version_checksum`].
    #[serde(flatten)]
    pub version: WeightVersion,
    /// What the tensors were checked against at save.
    pub preset: Preset,
    /// The index file of a sharded checkpoint (one of `files`), else `None`.
    pub index: Option<String>,
    /// Every file of the version with its digests (shards and index).
    pub files: Vec<FileDigest>,
}

impl ModelMetadata {
    /// The safetensors files (every file but the index).
    pub fn shards(&self) -> impl Iterator<Item = &FileDigest> {
        self.files
            .iter()
            .filter(move |f| Some(&f.path) != self.index.as_ref())
    }
}

/// How much a load checks of the files against `metadata.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verify {
    /// Nothing (only the safetensors headers are validated).
    None,
    /// Every chunk's SHA-256, hashed on all cores (the whole-file SHA-256 when the
    /// version has no chunk digests). The default for loads.
    #[default]
    Chunks,
    /// Every file's whole-file SHA-256 (files in parallel, each on one core).
    Full,
    /// Both: what `verify` runs.
    Both,
}

/// Checks that `name` is a plain file name, safe to join to a checkpoint directory: 1 to
/// 255 bytes of `[0-9A-Za-z._-]`, no leading `.`, no `..`, not `metadata.json`. So it has
/// no separator, is not absolute and cannot climb out of the directory.
///
/// # Errors
/// The reason, as a static string.
pub fn validate_file_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() || name.len() > 255 {
        return Err("length must be 1..=255");
    }
    if name.contains(['/', '\\']) {
        return Err("path separators are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("only [0-9A-Za-z._-] allowed");
    }
    if name.starts_with('.') || name.contains("..") {
        return Err("no leading '.' and no '..'");
    }
    if name == METADATA_FILE {
        return Err("reserved for the version's metadata");
    }
    Ok(())
}

fn check_name(file: &Path, field: impl FnOnce() -> String, name: &str) -> Result<()> {
    validate_file_name(name).map_err(|reason| RegistryError::UnsafeFileName {
        file: file.to_owned(),
        field: field(),
        name: name.to_owned(),
        reason: reason.to_owned(),
    })
}

/// The version checksum: `sha256:` of the file for a single safetensors file, else
/// `sha256:` of the `sha256sum`-style listing of every file (`<hex>  <name>\n`, in
/// `files` order).
#[must_use]
pub fn version_checksum(files: &[FileDigest], index: Option<&str>) -> String {
    match files {
        [one] if index.is_none() => one.sha256.clone(),
        _ => {
            let listing: String = files
                .iter()
                .map(|f| {
                    let hex = f.sha256.strip_prefix(CHECKSUM_PREFIX).unwrap_or(&f.sha256);
                    format!("{hex}  {}\n", f.path)
                })
                .collect();
            format!("{CHECKSUM_PREFIX}{}", sha256_hex(listing.as_bytes()))
        }
    }
}

/// The files a source path names, to copy into a version.
#[derive(Debug, Clone)]
pub struct CheckpointSource {
    /// `(source file, name in the version)` of every safetensors file.
    pub shards: Vec<(PathBuf, String)>,
    /// `(source index, name in the version)` of a sharded checkpoint.
    pub index: Option<(PathBuf, String)>,
}

#[derive(Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

fn read_index(path: &Path) -> Result<BTreeMap<String, String>> {
    let bytes =
        RegistryError::read_bounded(path, MAX_INDEX_BYTES).map_err(RegistryError::io(path))??;
    let index: Index = serde_json::from_slice(&bytes).map_err(RegistryError::json(path))?;
    for (tensor, shard) in &index.weight_map {
        check_name(path, || format!("weight_map[{tensor:?}]"), shard)?;
        if shard == INDEX_FILE {
            return Err(RegistryError::UnsafeFileName {
                file: path.to_owned(),
                field: format!("weight_map[{tensor:?}]"),
                name: shard.clone(),
                reason: "a shard cannot be the index".into(),
            });
        }
    }
    Ok(index.weight_map)
}

/// Resolves `path`: a `.safetensors` file, an index JSON (`*.index.json`) or a Hugging Face
/// model directory (its `model.safetensors.index.json`, else its `model.safetensors`).
/// Shard names in an index are validated ([`validate_file_name`]).
///
/// # Errors
/// [`RegistryError::NotACheckpoint`], [`RegistryError::UnsafeFileName`], I/O and JSON
/// errors.
pub fn resolve_source(path: &Path) -> Result<CheckpointSource> {
    // A FIFO, socket or device where a file is expected is named as such (opening it
    // later never blocks either: every read goes through `open_regular`).
    let special = |p: &Path| match tensorvault_core::regular::FileKind::of_path(p) {
        Some(kind) if kind != tensorvault_core::regular::FileKind::Directory => {
            Err(RegistryError::NotRegularFile {
                path: p.to_owned(),
                kind,
            })
        }
        _ => Ok(()),
    };
    let (dir, index) = if path.is_dir() {
        special(&path.join(INDEX_FILE))?;
        special(&path.join(SINGLE_FILE))?;
        if path.join(INDEX_FILE).is_file() {
            (path.to_owned(), path.join(INDEX_FILE))
        } else if path.join(SINGLE_FILE).is_file() {
            return Ok(CheckpointSource {
                shards: vec![(path.join(SINGLE_FILE), SINGLE_FILE.into())],
                index: None,
            });
        } else {
            return Err(RegistryError::NotACheckpoint {
                path: path.to_owned(),
                reason: format!("a directory without {INDEX_FILE} or {SINGLE_FILE}"),
            });
        }
    } else if path.is_file() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.as_deref().is_some_and(|n| n.ends_with(".index.json")) {
            let dir = path.parent().unwrap_or(Path::new(".")).to_owned();
            (dir, path.to_owned())
        } else {
            return Ok(CheckpointSource {
                shards: vec![(path.to_owned(), SINGLE_FILE.into())],
                index: None,
            });
        }
    } else {
        special(path)?;
        return Err(RegistryError::NotACheckpoint {
            path: path.to_owned(),
            reason: "no such file or directory".into(),
        });
    };
    let map = read_index(&index)?;
    let names: BTreeSet<&String> = map.values().collect();
    if names.is_empty() || names.len() > MAX_FILES {
        return Err(RegistryError::NotACheckpoint {
            path: index,
            reason: format!("weight_map names {} shards (1..={MAX_FILES})", names.len()),
        });
    }
    Ok(CheckpointSource {
        shards: names
            .into_iter()
            .map(|n| (dir.join(n), n.clone()))
            .collect(),
        index: Some((index, INDEX_FILE.into())),
    })
}

/// `(name, dtype, shape, shard index, byte range in the shard)` of every tensor of the
/// mapped `shards`, checked against the index's `weight_map` when there is one: every
/// mapped tensor is in its shard and every shard tensor is mapped to that shard.
pub(crate) type TensorEntry = (String, Dtype, Vec<usize>, usize, Range<usize>);

pub(crate) fn parse_shards(
    shards: &[(PathBuf, &[u8])],
    weight_map: Option<(&Path, &BTreeMap<String, String>)>,
    names: &[String],
) -> Result<Vec<TensorEntry>> {
    let mut out: Vec<TensorEntry> = Vec::new();
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (path, map)) in shards.iter().enumerate() {
        let st = SafeTensors::deserialize(map).map_err(|e| st_err(path, Some(map), &e))?;
        let base = map.as_ptr() as usize;
        for (name, view) in st.tensors() {
            if let Some(&first) = owner.get(&name) {
                return Err(RegistryError::DuplicateTensor {
                    name,
                    first: shards[first].0.clone(),
                    second: path.clone(),
                });
            }
            if let Some((ipath, wm)) = weight_map {
                if wm.get(&name) != Some(&names[i]) {
                    return Err(RegistryError::UnexpectedTensor {
                        name: format!("{name} (not mapped to {} in {})", names[i], ipath.display()),
                        path: path.clone(),
                    });
                }
            }
            let start = view.data().as_ptr() as usize - base;
            let range = start..start + view.data().len();
            owner.insert(name.clone(), i);
            out.push((name, view.dtype(), view.shape().to_vec(), i, range));
        }
    }
    if let Some((ipath, wm)) = weight_map {
        if let Some((name, _)) = wm.iter().find(|(n, _)| !owner.contains_key(*n)) {
            return Err(RegistryError::MissingTensor {
                name: name.clone(),
                path: ipath.to_owned(),
            });
        }
    }
    Ok(out)
}

fn fsync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| tensorvault_core::fsio::sync_all(&f, path))
        .map_err(RegistryError::io(path))
}

/// Creates `dest` (which must not exist) atomically: `fill` writes into a hidden temporary
/// sibling directory, which is fsynced and renamed into place, then the parent is fsynced.
pub(crate) fn write_dir_atomically<T>(
    dest: &Path,
    version: &str,
    fill: impl FnOnce(&Path) -> Result<T>,
) -> Result<T> {
    if dest.exists() {
        return Err(RegistryError::VersionExists {
            version: version.to_owned(),
        });
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = parent.join(format!(".tmp-{version}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&tmp).map_err(RegistryError::io(&tmp))?;
    let result = fill(&tmp).and_then(|v| {
        sync_dir(&tmp).map_err(RegistryError::io(&tmp))?;
        tensorvault_core::fsio::rename(&tmp, dest).map_err(RegistryError::io(dest))?;
        sync_dir(parent).map_err(RegistryError::io(parent))?;
        Ok(v)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Writes a model version directory `dest` from in-memory file contents: `shards` are
/// `(name, bytes)` of safetensors files, `index` the index JSON of a sharded checkpoint.
/// Headers are validated (and the index's `weight_map` against the shards) and `preset`
/// checked before anything is written. Returns the metadata written, `version.checksum`
/// filled in.
///
/// # Errors
/// [`RegistryError::VersionExists`], safetensors, preset and I/O errors.
pub fn write_model_checkpoint(
    dest: &Path,
    shards: &[(String, &[u8])],
    index: Option<(&Path, &[u8])>,
    version: WeightVersion,
    preset: &Preset,
) -> Result<ModelMetadata> {
    write_model_checkpoint_reporting(dest, shards, index, version, preset, None)
}

/// [`write_model_checkpoint`], reporting to `progress` the bytes of the files (shards, then
/// the index) written and hashed, out of their sum.
///
/// # Errors
/// See [`write_model_checkpoint`].
pub fn write_model_checkpoint_reporting(
    dest: &Path,
    shards: &[(String, &[u8])],
    index: Option<(&Path, &[u8])>,
    version: WeightVersion,
    preset: &Preset,
    progress: Option<&ProgressFn>,
) -> Result<ModelMetadata> {
    let origins: Vec<PathBuf> = shards.iter().map(|(n, _)| dest.join(n)).collect();
    write_named(
        dest, shards, &origins, dest, index, version, preset, progress,
    )
}

/// [`write_model_checkpoint_reporting`] with `origins[i]`, the path shard `i` was read
/// from, and `checkpoint`, the checkpoint as given, named in errors about the source bytes
/// (a bad source file is reported under its own path, not the destination that is never
/// made).
#[allow(clippy::too_many_arguments)]
fn write_named(
    dest: &Path,
    shards: &[(String, &[u8])],
    origins: &[PathBuf],
    checkpoint: &Path,
    index: Option<(&Path, &[u8])>,
    mut version: WeightVersion,
    preset: &Preset,
    progress: Option<&ProgressFn>,
) -> Result<ModelMetadata> {
    let named: Vec<(PathBuf, &[u8])> = origins
        .iter()
        .zip(shards)
        .map(|(o, (_, m))| (o.clone(), *m))
        .collect();
    let names: Vec<String> = shards.iter().map(|(n, _)| n.clone()).collect();
    for n in &names {
        check_name(checkpoint, || "shard".into(), n)?;
    }
    let wm = match index {
        Some((ipath, bytes)) => {
            let parsed: Index =
                serde_json::from_slice(bytes).map_err(RegistryError::json(ipath))?;
            Some((ipath.to_owned(), parsed.weight_map))
        }
        None => None,
    };
    let entries = parse_shards(&named, wm.as_ref().map(|(p, m)| (p.as_path(), m)), &names)?;
    preset.check(
        entries
            .iter()
            .map(|(n, d, s, _, _)| (n.as_str(), *d, s.as_slice())),
        checkpoint,
    )?;
    let v = version.version.clone();
    let total = shards.iter().map(|(_, m)| m.len() as u64).sum::<u64>()
        + index.map_or(0, |(_, b)| b.len() as u64);
    write_dir_atomically(dest, &v, |tmp| {
        let mut p = SaveProgress::new(progress, total);
        let mut files = Vec::with_capacity(shards.len() + 1);
        for (name, map) in shards {
            files.push(write_hashed(&tmp.join(name), name, map, &mut p)?);
        }
        if let Some((_, bytes)) = index {
            files.push(write_hashed(
                &tmp.join(INDEX_FILE),
                INDEX_FILE,
                bytes,
                &mut p,
            )?);
        }
        let index_name = index.map(|_| INDEX_FILE.to_owned());
        version.checksum = version_checksum(&files, index_name.as_deref());
        let meta = ModelMetadata {
            format: MODEL_FORMAT_NAME.into(),
            format_version: MODEL_FORMAT_VERSION,
            version: version.clone(),
            preset: preset.clone(),
            index: index_name,
            files,
        };
        let mpath = tmp.join(METADATA_FILE);
        let json = serde_json::to_vec_pretty(&meta).map_err(RegistryError::json(&mpath))?;
        fs::write(&mpath, json).map_err(RegistryError::io(&mpath))?;
        fsync_file(&mpath)?;
        Ok(meta)
    })
}

/// Copies the checkpoint at `src` ([`resolve_source`]) into a new version directory
/// `dest` (see [`write_model_checkpoint`]).
///
/// # Errors
/// See [`resolve_source`] and [`write_model_checkpoint`].
pub fn copy_checkpoint(
    dest: &Path,
    src: &CheckpointSource,
    version: WeightVersion,
    preset: &Preset,
) -> Result<ModelMetadata> {
    copy_checkpoint_reporting(dest, src, version, preset, None)
}

/// [`copy_checkpoint`] with progress in bytes ([`write_model_checkpoint_reporting`]).
///
/// # Errors
/// See [`copy_checkpoint`].
pub fn copy_checkpoint_reporting(
    dest: &Path,
    src: &CheckpointSource,
    version: WeightVersion,
    preset: &Preset,
    progress: Option<&ProgressFn>,
) -> Result<ModelMetadata> {
    let maps = src
        .shards
        .iter()
        .map(|(p, n)| Ok((n.clone(), map_file(p)?)))
        .collect::<Result<Vec<_>>>()?;
    let shards: Vec<(String, &[u8])> = maps.iter().map(|(n, m)| (n.clone(), &m[..])).collect();
    let index = match &src.index {
        Some((p, _)) => Some((
            p.as_path(),
            RegistryError::read_bounded(p, MAX_INDEX_BYTES).map_err(RegistryError::io(p))??,
        )),
        None => None,
    };
    let origins: Vec<PathBuf> = src.shards.iter().map(|(p, _)| p.clone()).collect();
    let given = src
        .index
        .as_ref()
        .map(|(p, _)| p)
        .or(origins.first())
        .map_or_else(|| dest.to_owned(), Clone::clone);
    write_named(
        dest,
        &shards,
        &origins,
        &given,
        index.as_ref().map(|(p, b)| (*p, b.as_slice())),
        version,
        preset,
        progress,
    )
}

/// The `format` member of `dir`'s `metadata.json`.
///
/// # Errors
/// [`RegistryError::MissingMetadata`], I/O and JSON errors.
pub fn checkpoint_format(dir: &Path) -> Result<String> {
    #[derive(Deserialize)]
    struct Head {
        format: String,
    }
    let bytes = read_meta_bytes(dir)?;
    let mpath = dir.join(METADATA_FILE);
    let h: Head = serde_json::from_slice(&bytes).map_err(RegistryError::json(&mpath))?;
    Ok(h.format)
}

fn read_meta_bytes(dir: &Path) -> Result<Vec<u8>> {
    let mpath = dir.join(METADATA_FILE);
    match RegistryError::read_bounded(&mpath, checkpoint::MAX_METADATA_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(RegistryError::MissingMetadata {
            dir: dir.to_owned(),
        }),
        Err(e) => Err(RegistryError::io(&mpath)(e)),
    }
}

/// Reads and checks `dir`'s `metadata.json`: a model version's, or a FuseMoE checkpoint's
/// (seen as one file, `weights.safetensors`, with its whole-file SHA-256 and no chunks).
/// Every file name is validated and the digests' shapes are checked, so nothing a
/// crafted metadata file says can point outside `dir` or size an allocation.
///
/// # Errors
/// [`RegistryError::MissingMetadata`], [`RegistryError::InvalidMetadata`],
/// [`RegistryError::UnsafeFileName`], [`RegistryError::BadChecksumFormat`], I/O and JSON
/// errors.
pub fn read_model_metadata(dir: &Path) -> Result<ModelMetadata> {
    let mpath = dir.join(METADATA_FILE);
    if checkpoint_format(dir)? == checkpoint::FORMAT_NAME {
        let meta = checkpoint::read_metadata(dir)?;
        let wpath = dir.join(WEIGHTS_FILE);
        let bytes = fs::metadata(&wpath)
            .map_err(RegistryError::io(&wpath))?
            .len();
        return Ok(ModelMetadata {
            format: meta.format,
            format_version: meta.format_version,
            files: vec![FileDigest {
                path: WEIGHTS_FILE.into(),
                bytes,
                sha256: meta.version.checksum.clone(),
                chunks: meta.chunks.clone(),
            }],
            version: meta.version,
            preset: Preset::FuseMoe(meta.config),
            index: None,
        });
    }
    let meta: ModelMetadata =
        serde_json::from_slice(&read_meta_bytes(dir)?).map_err(RegistryError::json(&mpath))?;
    let bad = |field: &'static str, reason: String| RegistryError::InvalidMetadata {
        path: mpath.clone(),
        field,
        reason,
    };
    if meta.format != MODEL_FORMAT_NAME {
        return Err(bad("format", format!("unknown format {:?}", meta.format)));
    }
    if meta.format_version > MODEL_FORMAT_VERSION {
        return Err(bad(
            "format_version",
            format!("{} is newer than this build reads", meta.format_version),
        ));
    }
    if meta.files.is_empty() || meta.files.len() > MAX_FILES {
        return Err(bad(
            "files",
            format!("{} files (1..={MAX_FILES})", meta.files.len()),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, f) in meta.files.iter().enumerate() {
        check_name(&mpath, || format!("files[{i}].path"), &f.path)?;
        if !seen.insert(&f.path) {
            return Err(bad("files", format!("{:?} listed twice", f.path)));
        }
        checkpoint::check_checksum_format(&f.sha256)?;
        if let Some(c) = f.chunks.as_ref().filter(|c| !c.fits(f.bytes)) {
            return Err(bad(
                "files",
                format!(
                    "files[{i}]: {} chunk digests of {} bytes for a {}-byte file",
                    c.blake3.len(),
                    c.chunk_bytes,
                    f.bytes
                ),
            ));
        }
    }
    if let Some(ix) = &meta.index {
        if !meta.files.iter().any(|f| &f.path == ix) {
            return Err(bad("index", format!("{ix:?} is not one of files")));
        }
    }
    Ok(meta)
}
