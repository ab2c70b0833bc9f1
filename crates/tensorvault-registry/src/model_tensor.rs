//! Loaded model versions: named tensors of any dtype (zero-copy views of the mapped files),
//! and the loads and verification of model version directories.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use safetensors::tensor::{Dtype, TensorView};

use crate::checkpoint::{map_file, METADATA_FILE};
use crate::digest::{verify_chunks, verify_whole};
use crate::error::{RegistryError, Result};
use crate::initializer::assemble;
use crate::model::{
    parse_shards, read_model_metadata, version_checksum, ModelMetadata, Preset, Verify,
    MAX_INDEX_BYTES,
};
use crate::st_error::st_err;
use crate::version::WeightVersion;
use crate::weights::{FusionConfig, LoadedWeights, WeightTensor};

#[derive(Debug, Clone)]
enum Bytes {
    /// `map[range]`, in bounds (checked by the safetensors parser).
    Mapped {
        map: Arc<memmap2::Mmap>,
        range: Range<usize>,
    },
    Owned(Arc<[u8]>),
}

/// One tensor: dtype, shape and its little-endian bytes, as safetensors stores them.
#[derive(Debug, Clone)]
pub struct ModelTensor {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Bytes,
}

impl ModelTensor {
    /// An owned tensor over `bytes` (little-endian, row-major).
    ///
    /// # Errors
    /// [`RegistryError::LengthMismatch`] when `bytes` is not `shape`'s element count times
    /// the dtype's size.
    pub fn from_bytes(name: &str, dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Self> {
        let want = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d));
        if want != Some(bytes.len()) {
            return Err(RegistryError::LengthMismatch {
                name: name.to_owned(),
                shape,
                found: bytes.len() / dtype.size().max(1),
            });
        }
        Ok(Self {
            dtype,
            shape,
            bytes: Bytes::Owned(bytes.into()),
        })
    }

    /// The dtype.
    #[must_use]
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The raw little-endian bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            // In bounds: checked by the safetensors parser on this immutable map.
            Bytes::Mapped { map, range } => map.get(range.clone()).unwrap_or(&[]),
            Bytes::Owned(b) => b,
        }
    }

    /// `true` when the bytes are a zero-copy view of a mapped file.
    #[must_use]
    pub fn is_mapped(&self) -> bool {
        matches!(self.bytes, Bytes::Mapped { .. })
    }

    /// The values as f32 (F32 copied, F16 and BF16 widened exactly).
    ///
    /// # Errors
    /// [`RegistryError::UnsupportedDtype`] for other dtypes.
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>> {
        let b = self.bytes();
        Ok(match self.dtype {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => b
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::BF16 => b
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(RegistryError::UnsupportedDtype {
                    name: name.to_owned(),
                    dtype: format!("{other:?}"),
                })
            }
        })
    }

    fn weight_tensor(&self, name: &str) -> Result<WeightTensor> {
        if let (Dtype::F32, Bytes::Mapped { map, range }) = (self.dtype, &self.bytes) {
            if let Some(t) = WeightTensor::mapped(self.shape.clone(), map.clone(), range.clone()) {
                return Ok(t);
            }
        }
        let v = self.to_f32(name)?;
        let found = v.len();
        WeightTensor::new(self.shape.clone(), v).ok_or_else(|| RegistryError::LengthMismatch {
            name: name.to_owned(),
            shape: self.shape.clone(),
            found,
        })
    }
}

/// A loaded model version: its tensors by name, and the version they came from.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    /// Version metadata.
    pub version: WeightVersion,
    /// The preset the version was saved under.
    pub preset: Preset,
    tensors: BTreeMap<String, ModelTensor>,
}

impl LoadedModel {
    /// A model from tensors (e.g. built in memory, for [`crate::ModelRegistry::save_model`]
    /// or a hot swap).
    #[must_use]
    pub fn new(version: WeightVersion, tensors: BTreeMap<String, ModelTensor>) -> Self {
        Self {
            version,
            preset: Preset::Any,
            tensors,
        }
    }

    /// The tensors, by name.
    #[must_use]
    pub fn tensors(&self) -> &BTreeMap<String, ModelTensor> {
        &self.tensors
    }

    /// One tensor.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&ModelTensor> {
        self.tensors.get(name)
    }

    /// Bytes of all tensors.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.tensors.values().map(|t| t.bytes().len() as u64).sum()
    }

    /// Checks that `other` has exactly this model's tensor names, dtypes and shapes (what a
    /// hot swap must keep so that readers see the same layout).
    ///
    /// # Errors
    /// [`RegistryError::MissingTensor`], [`RegistryError::UnexpectedTensor`],
    /// [`RegistryError::DtypeMismatch`], [`RegistryError::ShapeMismatch`].
    pub fn check_same_layout(&self, other: &LoadedModel) -> Result<()> {
        let here = PathBuf::from(format!("<version {}>", other.version.version));
        for (name, t) in &self.tensors {
            let Some(o) = other.tensors.get(name) else {
                return Err(RegistryError::MissingTensor {
                    name: name.clone(),
                    path: here,
                });
            };
            if o.dtype != t.dtype {
                return Err(RegistryError::DtypeMismatch {
                    name: name.clone(),
                    expected: format!("{:?}", t.dtype),
                    found: format!("{:?}", o.dtype),
                });
            }
            if o.shape != t.shape {
                return Err(RegistryError::ShapeMismatch {
                    name: name.clone(),
                    expected: t.shape.clone(),
                    found: o.shape.clone(),
                });
            }
        }
        match other
            .tensors
            .keys()
            .find(|n| !self.tensors.contains_key(*n))
        {
            Some(extra) => Err(RegistryError::UnexpectedTensor {
                name: extra.clone(),
                path: here,
            }),
            None => Ok(()),
        }
    }

    /// Checks the tensors against `preset`.
    ///
    /// # Errors
    /// See [`Preset::check`].
    pub fn check_preset(&self, preset: &Preset) -> Result<()> {
        let here = PathBuf::from(format!("<version {}>", self.version.version));
        preset.check(
            self.tensors
                .iter()
                .map(|(n, t)| (n.as_str(), t.dtype, t.shape.as_slice())),
            &here,
        )
    }

    /// The model as one safetensors file (tensors in the order the `safetensors` crate
    /// writes them).
    ///
    /// # Errors
    /// [`RegistryError::Safetensors`].
    pub fn to_safetensors(&self) -> Result<Vec<u8>> {
        let here = PathBuf::from(format!("<version {}>", self.version.version));
        let views = self
            .tensors
            .iter()
            .map(|(n, t)| {
                TensorView::new(t.dtype, t.shape.clone(), t.bytes())
                    .map(|v| (n.clone(), v))
                    .map_err(|e| st_err(&here, None, &e))
            })
            .collect::<Result<Vec<_>>>()?;
        safetensors::serialize(views, &None).map_err(|e| st_err(&here, None, &e))
    }

    /// The FuseMoE weights of `config` (F32 tensors stay zero-copy views when aligned;
    /// F16 and BF16 are widened).
    ///
    /// # Errors
    /// See [`Preset::check`].
    pub fn to_fusemoe(&self, config: &FusionConfig) -> Result<LoadedWeights> {
        self.check_preset(&Preset::FuseMoe(config.clone()))?;
        let tensors = config
            .tensor_specs()
            .iter()
            .map(|(name, _)| match self.tensors.get(name) {
                Some(t) => t.weight_tensor(name),
                None => Err(RegistryError::MissingTensor {
                    name: name.clone(),
                    path: PathBuf::from(format!("<version {}>", self.version.version)),
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(assemble(config, tensors, self.version.clone()))
    }
}

fn mismatch(path: &Path, expected: &str, computed: String) -> RegistryError {
    RegistryError::ChecksumMismatch {
        path: path.to_owned(),
        expected: expected.to_owned(),
        computed,
    }
}

/// Checks the mapped files against `meta`'s digests as `mode` says (all cores).
fn verify_files(
    dir: &Path,
    meta: &ModelMetadata,
    maps: &[(PathBuf, Arc<memmap2::Mmap>)],
    mode: Verify,
) -> Result<()> {
    for (f, (path, map)) in meta.files.iter().zip(maps) {
        if map.len() as u64 != f.bytes {
            return Err(mismatch(
                path,
                &f.sha256,
                format!("(a {}-byte file; {} bytes recorded)", map.len(), f.bytes),
            ));
        }
    }
    let all_chunked = meta.files.iter().all(|f| f.chunks.is_some());
    let (chunks, full) = match mode {
        Verify::None => (false, false),
        Verify::Chunks => (all_chunked, !all_chunked),
        Verify::Full => (false, true),
        Verify::Both => (all_chunked, true),
    };
    if chunks {
        for (f, (path, map)) in meta.files.iter().zip(maps) {
            if let Some(c) = &f.chunks {
                verify_chunks(path, map, c)?;
            }
        }
    }
    if full {
        meta.files
            .par_iter()
            .zip(maps.par_iter())
            .try_for_each(|(f, (path, map))| verify_whole(path, map, &f.sha256))?;
        // The version checksum (the one the manifest lists) must be the one the per-file
        // digests give: it ties the files to the manifest.
        let computed = version_checksum(&meta.files, meta.index.as_deref());
        if !computed.eq_ignore_ascii_case(&meta.version.checksum) {
            return Err(mismatch(
                &dir.join(METADATA_FILE),
                &meta.version.checksum,
                computed,
            ));
        }
    }
    Ok(())
}

fn map_all(
    dir: &Path,
    meta: &ModelMetadata,
    mode: Verify,
) -> Result<Vec<(PathBuf, Arc<memmap2::Mmap>)>> {
    meta.files
        .iter()
        .map(|f| {
            let p = dir.join(&f.path);
            let map = map_file(&p)?;
            if mode != Verify::None {
                // Every byte is about to be hashed: ask for the whole file at once (cold
                // files are read ahead while the hashing threads fault the first pages).
                let _ = map.advise(memmap2::Advice::WillNeed);
            }
            Ok((p, map))
        })
        .collect()
}

/// Verifies model version `dir` (or a FuseMoE checkpoint directory) as `mode` says, and
/// validates every safetensors header and the index. Returns its metadata.
///
/// # Errors
/// [`RegistryError::ChecksumMismatch`], [`RegistryError::ChunkChecksumMismatch`], the
/// errors of [`read_model_metadata`], safetensors and index errors.
pub fn verify_model_dir(dir: &Path, mode: Verify) -> Result<ModelMetadata> {
    let meta = read_model_metadata(dir)?;
    let maps = map_all(dir, &meta, mode)?;
    verify_files(dir, &meta, &maps, mode)?;
    parse(&meta, &maps)?;
    Ok(meta)
}

fn parse(
    meta: &ModelMetadata,
    maps: &[(PathBuf, Arc<memmap2::Mmap>)],
) -> Result<Vec<crate::model::TensorEntry>> {
    let mut shards = Vec::new();
    let mut names = Vec::new();
    let mut index = None;
    for (f, m) in meta.files.iter().zip(maps) {
        if Some(&f.path) == meta.index.as_ref() {
            index = Some(m);
        } else {
            shards.push((m.0.clone(), &m.1[..]));
            names.push(f.path.clone());
        }
    }
    let wm = match index {
        Some((ipath, map)) => {
            #[derive(serde::Deserialize)]
            struct Index {
                weight_map: BTreeMap<String, String>,
            }
            if map.len() as u64 > MAX_INDEX_BYTES {
                return Err(RegistryError::FileTooLarge {
                    path: ipath.clone(),
                    size: map.len() as u64,
                    limit: MAX_INDEX_BYTES,
                });
            }
            let ix: Index = serde_json::from_slice(map).map_err(RegistryError::json(ipath))?;
            Some((ipath.clone(), ix.weight_map))
        }
        None => None,
    };
    parse_shards(&shards, wm.as_ref().map(|(p, m)| (p.as_path(), m)), &names)
}

/// Loads model version `dir` (or a FuseMoE checkpoint directory), verified as `mode` says:
/// every tensor is a zero-copy view of the mapped files.
///
/// # Errors
/// See [`verify_model_dir`].
pub fn load_model_dir(dir: &Path, mode: Verify) -> Result<LoadedModel> {
    let meta = read_model_metadata(dir)?;
    let maps = map_all(dir, &meta, mode)?;
    verify_files(dir, &meta, &maps, mode)?;
    let shard_maps: Vec<&Arc<memmap2::Mmap>> = meta
        .files
        .iter()
        .zip(&maps)
        .filter(|(f, _)| Some(&f.path) != meta.index.as_ref())
        .map(|(_, (_, m))| m)
        .collect();
    let tensors = parse(&meta, &maps)?
        .into_iter()
        .map(|(name, dtype, shape, shard, range)| {
            let t = ModelTensor {
                dtype,
                shape,
                bytes: Bytes::Mapped {
                    map: shard_maps[shard].clone(),
                    range,
                },
            };
            (name, t)
        })
        .collect();
    Ok(LoadedModel {
        version: meta.version,
        preset: meta.preset,
        tensors,
    })
}

/// Opens a checkpoint that is not a registry version ([`crate::model::resolve_source`]: a
/// file, an index or a Hugging Face directory): headers and index validated, nothing
/// verified (no digests cover it).
///
/// # Errors
/// See [`crate::model::resolve_source`]; safetensors and index errors.
pub fn open_source(src: &crate::model::CheckpointSource) -> Result<LoadedModel> {
    let maps = src
        .shards
        .iter()
        .map(|(p, _)| Ok((p.clone(), map_file(p)?)))
        .collect::<Result<Vec<_>>>()?;
    let wm = match &src.index {
        Some((p, _)) => {
            #[derive(serde::Deserialize)]
            struct Index {
                weight_map: BTreeMap<String, String>,
            }
            let b =
                RegistryError::read_bounded(p, MAX_INDEX_BYTES).map_err(RegistryError::io(p))??;
            let ix: Index = serde_json::from_slice(&b).map_err(RegistryError::json(p))?;
            Some((p.clone(), ix.weight_map))
        }
        None => None,
    };
    let slices: Vec<(PathBuf, &[u8])> = maps.iter().map(|(p, m)| (p.clone(), &m[..])).collect();
    let names: Vec<String> = src
        .shards
        .iter()
        .map(|(p, n)| {
            // An index names shards by their file names; a lone file is matched by none.
            if src.index.is_some() {
                n.clone()
            } else {
                p.display().to_string()
            }
        })
        .collect();
    let entries = parse_shards(&slices, wm.as_ref().map(|(p, m)| (p.as_path(), m)), &names)?;
    let tensors = entries
        .into_iter()
        .map(|(name, dtype, shape, shard, range)| {
            let t = ModelTensor {
                dtype,
                shape,
                bytes: Bytes::Mapped {
                    map: maps[shard].1.clone(),
                    range,
                },
            };
            (name, t)
        })
        .collect();
    let version = WeightVersion {
        version: String::new(),
        source_id: src
            .shards
            .first()
            .map(|(p, _)| p.display().to_string())
            .unwrap_or_default(),
        created_at: String::new(),
        checksum: "none".into(),
        metrics: None,
    };
    Ok(LoadedModel {
        version,
        preset: Preset::Any,
        tensors,
    })
}
