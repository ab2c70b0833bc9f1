//! The weight registry: versions, checkpoints as dicts of numpy arrays (read-only views
//! into the mapped safetensors file, no copy), save, rollback, deterministic init; and the
//! model registry (any safetensors checkpoint, any dtype).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use numpy::{PyReadonlyArray1, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorvault_registry::checkpoint::{load_checkpoint_dir, read_metadata, LoadOptions};
use tensorvault_registry::model::ModelMetadata;
use tensorvault_registry::safetensors_dtype::Dtype;
use tensorvault_registry::weights::names;
use tensorvault_registry::{
    Device, ExpertWeights, FusionConfig, GatingNetworkWeights, InitializationConfig,
    InitializationStrategy, KaimingMode, LoadedModel, LoadedWeights, ModelRegistry, ModelTensor,
    Nonlinearity, Preset, SaveOptions, TrainingMetrics, Verify, WeightInitializer, WeightRegistry,
    WeightTensor, WeightVersion,
};

use crate::array::readonly_view;
use crate::errors::{arg_err, registry_err};
use crate::json;

/// Owner of loaded weights: the `base` of every array a load returns.
#[pyclass(module = "tensorvault._tensorvault", frozen)]
pub struct LoadedWeightsOwner {
    weights: Arc<LoadedWeights>,
}

#[pymethods]
impl LoadedWeightsOwner {
    /// Whether every tensor is a zero-copy view of the mapped checkpoint file.
    #[getter]
    fn all_mapped(&self) -> bool {
        self.weights
            .named_tensors()
            .iter()
            .all(|(_, t)| t.is_mapped())
    }
}

/// `{name: read-only ndarray}` over `weights`, plus the version dict.
fn weights_dict<'py>(
    py: Python<'py>,
    weights: Arc<LoadedWeights>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let owner = Bound::new(py, LoadedWeightsOwner { weights })?;
    let w = &owner.get().weights;
    let d = PyDict::new(py);
    for (name, t) in w.named_tensors() {
        // SAFETY: `t.data()` is either a range of the read-only map or an immutable
        // buffer, both owned by the `LoadedWeights` inside `owner` (behind an `Arc` that
        // nothing else mutates), and `owner` becomes the array's base.
        let arr = unsafe { readonly_view(owner.clone().into_any(), t.data(), t.shape())? };
        d.set_item(name, arr)?;
    }
    Ok((d, version_dict(py, &w.version)?))
}

fn version_dict<'py>(py: Python<'py>, v: &WeightVersion) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(v).map_err(|e| arg_err(e.to_string()))?;
    Ok(json::to_py(py, &value)?.cast_into::<PyDict>()?)
}

/// The FuseMoE shapes from a Python spec: None/"default", "tiny" or a dict of fields.
fn fusion_config(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Option<FusionConfig>> {
    let Some(spec) = spec else { return Ok(None) };
    if let Ok(s) = spec.extract::<String>() {
        return match s.as_str() {
            "default" => Ok(Some(FusionConfig::default())),
            "tiny" => Ok(Some(FusionConfig::tiny())),
            other => Err(arg_err(format!(
                "unknown config {other:?}: use \"default\", \"tiny\" or a dict of {}",
                "input_dim, num_experts, expert_hidden_dim, expert_output_dim, output_dim"
            ))),
        };
    }
    let v = json::to_value(spec, "config")?;
    serde_json::from_value(v)
        .map(Some)
        .map_err(|e| arg_err(format!("config: {e}")))
}

fn config_dict<'py>(py: Python<'py>, c: &FusionConfig) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(c).map_err(|e| arg_err(e.to_string()))?;
    Ok(json::to_py(py, &value)?.cast_into::<PyDict>()?)
}

/// Parse a strategy name and its parameters.
fn strategy(
    name: &str,
    mode: &str,
    nonlinearity: &str,
    gain: f32,
) -> PyResult<InitializationStrategy> {
    let mode = match mode {
        "fan_in" => KaimingMode::FanIn,
        "fan_out" => KaimingMode::FanOut,
        "fan_avg" => KaimingMode::FanAvg,
        other => {
            return Err(arg_err(format!(
                "unknown mode {other:?}: fan_in, fan_out or fan_avg"
            )))
        }
    };
    let nl = match nonlinearity {
        "linear" => Nonlinearity::Linear,
        "relu" => Nonlinearity::ReLU,
        "tanh" => Nonlinearity::Tanh,
        "sigmoid" => Nonlinearity::Sigmoid,
        "gelu" => Nonlinearity::GELU,
        "silu" => Nonlinearity::SiLU,
        "leaky_relu" => Nonlinearity::LeakyReLU(0.01),
        other => return Err(arg_err(format!("unknown nonlinearity {other:?}"))),
    };
    Ok(match name.replace('-', "_").as_str() {
        "kaiming_uniform" => InitializationStrategy::KaimingUniform {
            mode,
            nonlinearity: nl,
        },
        "kaiming_normal" => InitializationStrategy::KaimingNormal {
            mode,
            nonlinearity: nl,
        },
        "xavier_uniform" => InitializationStrategy::XavierUniform,
        "xavier_normal" => InitializationStrategy::XavierNormal,
        "orthogonal" => InitializationStrategy::Orthogonal { gain },
        "zeros" => InitializationStrategy::Zeros,
        "ones" => InitializationStrategy::Ones,
        other => {
            return Err(arg_err(format!(
                "unknown strategy {other:?}: kaiming_uniform, kaiming_normal, xavier_uniform, \
                 xavier_normal, orthogonal, zeros or ones"
            )))
        }
    })
}

/// Build `LoadedWeights` from `{name: array}` (every tensor of `config`, exact shapes).
fn weights_from_dict(
    config: &FusionConfig,
    tensors: &HashMap<String, PyReadonlyArrayDyn<'_, f32>>,
    version: WeightVersion,
) -> PyResult<LoadedWeights> {
    let specs = config.tensor_specs();
    if let Some(extra) = tensors.keys().find(|k| !specs.iter().any(|(n, _)| n == *k)) {
        return Err(arg_err(format!(
            "unexpected tensor {extra:?} (not part of the registry's FuseMoE layout)"
        )));
    }
    let take = |name: &str| -> PyResult<WeightTensor> {
        let shape = specs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        let arr = tensors
            .get(name)
            .ok_or_else(|| arg_err(format!("tensor {name:?} missing from weights")))?;
        if arr.shape() != shape.as_slice() {
            return Err(arg_err(format!(
                "tensor {name:?}: shape {:?}, expected {shape:?}",
                arr.shape()
            )));
        }
        let data = arr.as_array().iter().copied().collect::<Vec<f32>>();
        WeightTensor::new(shape, data)
            .ok_or_else(|| arg_err(format!("tensor {name:?}: bad length")))
    };
    let experts = (0..config.num_experts)
        .map(|id| {
            Ok(ExpertWeights {
                expert_id: id,
                input_proj: take(&names::expert(id, names::INPUT_PROJ))?,
                hidden: take(&names::expert(id, names::HIDDEN))?,
                output_proj: take(&names::expert(id, names::OUTPUT_PROJ))?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(LoadedWeights {
        gating: GatingNetworkWeights {
            linear_weight: take(names::GATING_WEIGHT)?,
            linear_bias: take(names::GATING_BIAS)?,
            temperature: take(names::GATING_TEMPERATURE)?,
        },
        experts,
        output: take(names::OUTPUT_PROJECTION)?,
        version,
        filled_by_fallback: Vec::new(),
    })
}

/// Load one checkpoint directory (shapes from its own `metadata.json`).
#[pyfunction]
#[pyo3(signature = (path, verify=true))]
pub fn registry_load_checkpoint<'py>(
    py: Python<'py>,
    path: PathBuf,
    verify: bool,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let w = py
        .detach(|| {
            let meta = read_metadata(&path)?;
            load_checkpoint_dir(
                &path,
                &meta.config,
                LoadOptions {
                    strict: true,
                    verify_checksum: verify,
                    fallback: None,
                },
            )
        })
        .map_err(registry_err)?;
    weights_dict(py, Arc::new(w))
}

/// A versioned weight registry rooted at a directory.
#[pyclass(module = "tensorvault._tensorvault", name = "Registry", frozen)]
pub struct Registry {
    inner: WeightRegistry,
    seed: u64,
}

/// The FuseMoE shapes of the registry's newest version that has them (`None`: no such
/// version, or no registry yet). A version whose metadata does not read is that error:
/// skipping it would pick older or default shapes without saying why (issue 25 class 5).
fn newest_config(root: &Path) -> tensorvault_registry::Result<Option<FusionConfig>> {
    if !root
        .join(tensorvault_registry::registry::MANIFEST_FILE)
        .is_file()
    {
        return Ok(None);
    }
    let probe = WeightRegistry::new(root, Device::Cpu)?;
    for v in probe.list_versions().iter().rev() {
        let dir = probe.version_dir(&v.version)?;
        if let Preset::FuseMoe(c) = tensorvault_registry::model::read_model_metadata(&dir)?.preset {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

#[pymethods]
impl Registry {
    /// Open (or create) the registry at `root`.
    #[new]
    #[pyo3(signature = (root, config=None, seed=42, verify_checksum=true, device="cpu"))]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        config: Option<&Bound<'_, PyAny>>,
        seed: u64,
        verify_checksum: bool,
        device: &str,
    ) -> PyResult<Self> {
        let device = match device {
            "cpu" => Device::Cpu,
            d if d.starts_with("cuda") => Device::Cuda(0),
            other => return Err(arg_err(format!("unknown device {other:?}: use \"cpu\""))),
        };
        let explicit = fusion_config(config)?;
        let inner = py
            .detach(|| {
                let fusion = match explicit {
                    Some(c) => c,
                    None => newest_config(&root)?.unwrap_or_default(),
                };
                let init = InitializationConfig {
                    seed,
                    verify_checksum,
                    ..InitializationConfig::default()
                };
                WeightRegistry::with_config(&root, device, init, fusion)
            })
            .map_err(registry_err)?;
        Ok(Registry { inner, seed })
    }

    /// The FuseMoE shapes this registry expects.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        config_dict(py, self.inner.fusion_config())
    }

    /// Version history, oldest first (one dict per version).
    fn list_versions<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .list_versions()
            .iter()
            .map(|v| version_dict(py, v))
            .collect()
    }

    /// The golden version, if marked.
    #[getter]
    fn golden(&self) -> Option<String> {
        self.inner.golden()
    }

    /// The current-version pointer recorded on disk.
    #[getter]
    fn current_version(&self) -> Option<String> {
        self.inner
            .current_version()
            .map(|v| v.version)
            .or_else(|| self.inner.current_pointer())
    }

    /// Mark `version` golden (verified first).
    fn set_golden(&self, py: Python<'_>, version: &str) -> PyResult<()> {
        py.detach(|| self.inner.set_golden(version))
            .map_err(registry_err)
    }

    /// Verify `version`'s checksum and safetensors header; returns its metadata.
    fn verify<'py>(&self, py: Python<'py>, version: &str) -> PyResult<Bound<'py, PyDict>> {
        let meta = py
            .detach(|| self.inner.verify_version(version))
            .map_err(registry_err)?;
        version_dict(py, &meta.version)
    }

    /// Load `version`, make it current; returns `(tensors, version dict)`.
    fn load_checkpoint<'py>(
        &self,
        py: Python<'py>,
        version: &str,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let w = py
            .detach(|| self.inner.load_checkpoint(version))
            .map_err(registry_err)?;
        weights_dict(py, w)
    }

    /// Make `version` current, forward or back (load, swap in, record); returns
    /// `(tensors, version dict)`.
    fn activate<'py>(
        &self,
        py: Python<'py>,
        version: &str,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let w = py
            .detach(|| self.inner.activate(version))
            .map_err(registry_err)?;
        weights_dict(py, w)
    }

    /// Roll back to `version` (load it and make it current).
    fn rollback<'py>(
        &self,
        py: Python<'py>,
        version: &str,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let w = py
            .detach(|| self.inner.rollback(version))
            .map_err(registry_err)?;
        weights_dict(py, w)
    }

    /// Save `{name: float32 array}` as a new version; returns its version dict.
    #[pyo3(signature = (weights, version=None, source_id="python", metrics=None))]
    fn save_checkpoint<'py>(
        &self,
        py: Python<'py>,
        weights: HashMap<String, PyReadonlyArrayDyn<'py, f32>>,
        version: Option<String>,
        source_id: &str,
        metrics: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let metrics: Option<TrainingMetrics> = metrics
            .map(|m| {
                let v = json::to_value(&m, "metrics")?;
                serde_json::from_value(v).map_err(|e| {
                    arg_err(format!(
                        "metrics: {e} (needs epoch, loss, learning_rate; others are kept)"
                    ))
                })
            })
            .transpose()?;
        let v = WeightVersion {
            version: version.unwrap_or_default(),
            source_id: source_id.to_owned(),
            created_at: String::new(),
            checksum: String::new(),
            metrics: None,
        };
        let w = weights_from_dict(self.inner.fusion_config(), &weights, v)?;
        let saved = py
            .detach(|| self.inner.save_checkpoint(&w, metrics))
            .map_err(registry_err)?;
        version_dict(py, &saved)
    }

    /// Initialize every tensor with a strategy (deterministic per seed and tensor name).
    #[pyo3(signature = (strategy="kaiming_uniform", seed=None, mode="fan_in", nonlinearity="relu", gain=1.0))]
    fn initialize<'py>(
        &self,
        py: Python<'py>,
        strategy: &str,
        seed: Option<u64>,
        mode: &str,
        nonlinearity: &str,
        gain: f32,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let s = self::strategy(strategy, mode, nonlinearity, gain)?;
        let init = WeightInitializer::with_strategy(seed.unwrap_or(self.seed), s);
        let w = py
            .detach(|| init.init_all(self.inner.fusion_config(), true))
            .map_err(registry_err)?;
        weights_dict(py, Arc::new(w))
    }

    /// Path of `version`'s checkpoint directory.
    fn version_dir(&self, version: &str) -> PyResult<PathBuf> {
        self.inner.version_dir(version).map_err(registry_err)
    }

    /// The registry root.
    #[getter]
    fn root(&self) -> PathBuf {
        self.inner.root().to_owned()
    }
}

/// Owner of a loaded model version: the `base` of every array a model load returns.
#[pyclass(module = "tensorvault._tensorvault", frozen)]
pub struct LoadedModelOwner {
    model: Arc<LoadedModel>,
}

#[pymethods]
impl LoadedModelOwner {
    /// Whether every tensor is a zero-copy view of a mapped file.
    #[getter]
    fn all_mapped(&self) -> bool {
        self.model.tensors().values().all(ModelTensor::is_mapped)
    }
}

/// `({name: (dtype name, shape, read-only uint8 view of the bytes)}, version dict)`: the
/// Python wrapper reinterprets the bytes as the dtype (numpy has no bf16, so the wrapper
/// decides what a BF16 tensor becomes).
type ModelTuple<'py> = (Bound<'py, PyDict>, Bound<'py, PyDict>);

fn model_tuple<'py>(py: Python<'py>, model: Arc<LoadedModel>) -> PyResult<ModelTuple<'py>> {
    let owner = Bound::new(py, LoadedModelOwner { model })?;
    let m = &owner.get().model;
    let d = PyDict::new(py);
    for (name, t) in m.tensors() {
        let bytes = t.bytes();
        // SAFETY: `bytes` is a range of a read-only map or an immutable buffer owned by the
        // `LoadedModel` inside `owner` (behind an `Arc` nothing mutates); `owner` becomes
        // the array's base.
        let arr = unsafe { readonly_view(owner.clone().into_any(), bytes, &[bytes.len()])? };
        d.set_item(name, (format!("{:?}", t.dtype()), t.shape().to_vec(), arr))?;
    }
    Ok((d, version_dict(py, &m.version)?))
}

fn metadata_dict<'py>(py: Python<'py>, m: &ModelMetadata) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(m).map_err(|e| arg_err(e.to_string()))?;
    Ok(json::to_py(py, &value)?.cast_into::<PyDict>()?)
}

fn parse_dtype(name: &str) -> PyResult<Dtype> {
    Ok(match name {
        "BOOL" => Dtype::BOOL,
        "U8" => Dtype::U8,
        "I8" => Dtype::I8,
        "U16" => Dtype::U16,
        "I16" => Dtype::I16,
        "F16" => Dtype::F16,
        "BF16" => Dtype::BF16,
        "U32" => Dtype::U32,
        "I32" => Dtype::I32,
        "F32" => Dtype::F32,
        "U64" => Dtype::U64,
        "I64" => Dtype::I64,
        "F64" => Dtype::F64,
        other => return Err(arg_err(format!("unknown safetensors dtype {other:?}"))),
    })
}

fn parse_metrics(metrics: Option<Bound<'_, PyAny>>) -> PyResult<Option<TrainingMetrics>> {
    metrics
        .map(|m| {
            let v = json::to_value(&m, "metrics")?;
            serde_json::from_value(v).map_err(|e| {
                arg_err(format!(
                    "metrics: {e} (needs epoch, loss, learning_rate; others are kept)"
                ))
            })
        })
        .transpose()
}

/// A versioned registry of any safetensors checkpoints rooted at a directory.
#[pyclass(module = "tensorvault._tensorvault", name = "ModelRegistry", frozen)]
pub struct PyModelRegistry {
    inner: ModelRegistry,
}

#[pymethods]
impl PyModelRegistry {
    /// Open (or create) the registry at `root`. `preset`: "any" or "fusemoe" (with
    /// `config` as for `Registry`); `verify`: "chunks", "full", "both" or "none".
    #[new]
    #[pyo3(signature = (root, preset="any", config=None, verify="chunks"))]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        preset: &str,
        config: Option<&Bound<'_, PyAny>>,
        verify: &str,
    ) -> PyResult<Self> {
        let preset = match preset {
            "any" => Preset::Any,
            "fusemoe" => Preset::FuseMoe(fusion_config(config)?.unwrap_or_default()),
            other => {
                return Err(arg_err(format!(
                    "unknown preset {other:?}: \"any\" or \"fusemoe\""
                )))
            }
        };
        let verify = match verify {
            "chunks" => Verify::Chunks,
            "full" => Verify::Full,
            "both" => Verify::Both,
            "none" => Verify::None,
            other => {
                return Err(arg_err(format!(
                    "unknown verify {other:?}: \"chunks\", \"full\", \"both\" or \"none\""
                )))
            }
        };
        let inner = py
            .detach(|| ModelRegistry::open(&root, preset))
            .map_err(registry_err)?
            .with_verify(verify);
        Ok(Self { inner })
    }

    /// Save the checkpoint at `path` (file, index JSON or model directory) as a version.
    #[pyo3(signature = (path, version=None, source_id=None, metrics=None))]
    fn save<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        version: Option<String>,
        source_id: Option<String>,
        metrics: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = SaveOptions {
            version,
            source_id,
            metrics: parse_metrics(metrics)?,
        };
        let v = py
            .detach(|| self.inner.save_from_path(&path, opts))
            .map_err(registry_err)?;
        version_dict(py, &v)
    }

    /// Save `[(name, dtype, shape, uint8 bytes)]` as a version (one model.safetensors).
    #[pyo3(signature = (tensors, version=None, source_id=None, metrics=None))]
    fn save_tensors<'py>(
        &self,
        py: Python<'py>,
        tensors: Vec<(String, String, Vec<usize>, PyReadonlyArray1<'py, u8>)>,
        version: Option<String>,
        source_id: Option<String>,
        metrics: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut map = BTreeMap::new();
        for (name, dtype, shape, bytes) in &tensors {
            let b = bytes
                .as_slice()
                .map_err(|e| arg_err(e.to_string()))?
                .to_vec();
            let t = ModelTensor::from_bytes(name, parse_dtype(dtype)?, shape.clone(), b)
                .map_err(registry_err)?;
            if map.insert(name.clone(), t).is_some() {
                return Err(arg_err(format!("tensor {name:?} given twice")));
            }
        }
        let version0 = WeightVersion {
            version: String::new(),
            source_id: String::new(),
            created_at: String::new(),
            checksum: String::new(),
            metrics: None,
        };
        let model = LoadedModel::new(version0, map);
        let opts = SaveOptions {
            version,
            source_id: source_id.or_else(|| Some("python".into())),
            metrics: parse_metrics(metrics)?,
        };
        let v = py
            .detach(|| self.inner.save_model(&model, opts))
            .map_err(registry_err)?;
        version_dict(py, &v)
    }

    /// Load `version`, make it active and current.
    fn load<'py>(&self, py: Python<'py>, version: &str) -> PyResult<ModelTuple<'py>> {
        let m = py
            .detach(|| self.inner.load_version(version))
            .map_err(registry_err)?;
        model_tuple(py, m)
    }

    /// Make `version` current, forward or back (load, swap in, record).
    fn activate<'py>(&self, py: Python<'py>, version: &str) -> PyResult<ModelTuple<'py>> {
        let m = py
            .detach(|| self.inner.activate(version))
            .map_err(registry_err)?;
        model_tuple(py, m)
    }

    /// Roll back to `version`.
    fn rollback<'py>(&self, py: Python<'py>, version: &str) -> PyResult<ModelTuple<'py>> {
        let m = py
            .detach(|| self.inner.rollback(version))
            .map_err(registry_err)?;
        model_tuple(py, m)
    }

    /// Load `version` and swap it in if it keeps the active model's layout.
    fn hot_swap<'py>(&self, py: Python<'py>, version: &str) -> PyResult<ModelTuple<'py>> {
        let m = py
            .detach(|| self.inner.hot_swap_version(version))
            .map_err(registry_err)?;
        model_tuple(py, m)
    }

    /// The active model (loading golden, current, newest if none is active).
    fn load_active<'py>(&self, py: Python<'py>) -> PyResult<ModelTuple<'py>> {
        let m = py.detach(|| self.inner.load()).map_err(registry_err)?;
        model_tuple(py, m)
    }

    /// The active model, if any.
    fn current<'py>(&self, py: Python<'py>) -> PyResult<Option<ModelTuple<'py>>> {
        self.inner.current().map(|m| model_tuple(py, m)).transpose()
    }

    /// The active (else recorded current) version.
    #[getter]
    fn current_version(&self) -> Option<String> {
        self.inner
            .current_version()
            .map(|v| v.version)
            .or_else(|| self.inner.current_pointer())
    }

    /// The golden version, if marked.
    #[getter]
    fn golden(&self) -> Option<String> {
        self.inner.golden()
    }

    /// Version history, oldest first.
    fn list_versions<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .list_versions()
            .iter()
            .map(|v| version_dict(py, v))
            .collect()
    }

    /// Verify `version` fully; returns its metadata (files and digests).
    fn verify<'py>(&self, py: Python<'py>, version: &str) -> PyResult<Bound<'py, PyDict>> {
        let m = py
            .detach(|| self.inner.verify_version(version))
            .map_err(registry_err)?;
        metadata_dict(py, &m)
    }

    /// `version`'s metadata, not verified.
    fn metadata<'py>(&self, py: Python<'py>, version: &str) -> PyResult<Bound<'py, PyDict>> {
        let m = self.inner.metadata(version).map_err(registry_err)?;
        metadata_dict(py, &m)
    }

    /// Mark `version` golden (verified first).
    fn set_golden(&self, py: Python<'_>, version: &str) -> PyResult<()> {
        py.detach(|| self.inner.set_golden(version))
            .map_err(registry_err)
    }

    /// Keep the `keep` newest versions (plus golden, current, active); returns the removed.
    #[pyo3(signature = (keep))]
    fn set_retention(&self, py: Python<'_>, keep: Option<usize>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.set_retention(keep))
            .map_err(registry_err)
    }

    /// Path of `version`'s directory.
    fn version_dir(&self, version: &str) -> PyResult<PathBuf> {
        self.inner.version_dir(version).map_err(registry_err)
    }

    /// The registry root.
    #[getter]
    fn root(&self) -> PathBuf {
        self.inner.root().to_owned()
    }
}
