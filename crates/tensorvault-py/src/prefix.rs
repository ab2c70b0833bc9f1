//! The KV prefix cache (`tensorvault_store::PrefixCache`): find a prompt's stored KV by its
//! tokens and load it instead of recomputing it.
//!
//! The native class takes token ids as a `uint32` array and each layer's keys / values as
//! raw little-endian bytes (1-D `uint8` arrays) of f16 or f32 `[kv_heads, T, head_dim]`,
//! and returns f16 bytes per layer; `tensorvault/_prefix.py` checks shapes and dtypes and
//! converts numpy arrays. Every call runs with the GIL released.

use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use half::f16;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorvault_store::prefix::{AgeTiers, KvData, PrefixConfig};
use tensorvault_store::{PrefixCache as Cache, StoreConfig, StoreErr};

use crate::errors::{arg_err, err, Kind};
use crate::store::{bytes_array, parse_durability, store_err};

/// Python exception of a prefix-cache error: bad input and a model mismatch are the
/// caller's arguments; everything else as the store maps it.
fn prefix_err(e: &StoreErr) -> PyErr {
    match e {
        StoreErr::ModelMismatch { .. }
        | StoreErr::NonFiniteKv { .. }
        | StoreErr::ReadOnly { .. } => err(Kind::InvalidArgument, e.to_string()),
        _ => store_err(e),
    }
}

/// One layer's array as the native side owns it.
enum Owned {
    F16(Vec<f16>),
    F32(Vec<f32>),
}

impl Owned {
    fn view(&self) -> KvData<'_> {
        match self {
            Owned::F16(v) => KvData::F16(v),
            Owned::F32(v) => KvData::F32(v),
        }
    }
}

fn owned(arrays: &[PyReadonlyArray1<'_, u8>], dtype: &str, what: &str) -> PyResult<Vec<Owned>> {
    arrays
        .iter()
        .enumerate()
        .map(|(layer, a)| {
            let b = a
                .as_slice()
                .map_err(|_| arg_err(format!("{what}[{layer}] must be C-contiguous")))?;
            match dtype {
                "float16" if b.len() % 2 == 0 => Ok(Owned::F16(
                    b.chunks_exact(2)
                        .map(|x| f16::from_le_bytes([x[0], x[1]]))
                        .collect(),
                )),
                "float32" if b.len() % 4 == 0 => Ok(Owned::F32(
                    b.chunks_exact(4)
                        .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                        .collect(),
                )),
                _ => Err(arg_err(format!(
                    "{what}[{layer}]: {} bytes of {dtype:?}; give float16 or float32 values",
                    b.len()
                ))),
            }
        })
        .collect()
}

/// A prefix cache of one model under a store root.
#[pyclass(module = "tensorvault._tensorvault", name = "PrefixCache", frozen)]
pub struct PrefixCache {
    inner: RwLock<Option<Cache>>,
    root: PathBuf,
}

impl PrefixCache {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Cache) -> Result<T, StoreErr> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(c) => f(c).map_err(Some),
                None => Err(None),
            }
        })
        .map_err(|e| match e {
            Some(e) => prefix_err(&e),
            None => arg_err(format!(
                "prefix cache under {} is closed",
                self.root.display()
            )),
        })
    }
}

#[pymethods]
impl PrefixCache {
    /// Open (or create) the cache of `model` under `root`.
    #[new]
    #[pyo3(signature = (root, model, layers, kv_heads, head_dim, chunk_tokens=256, age_tiers=None, budget_bytes=None, read_only=false, durability="every-write"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        model: String,
        layers: u32,
        kv_heads: u32,
        head_dim: u32,
        chunk_tokens: u32,
        age_tiers: Option<(u64, u64, u64)>,
        budget_bytes: Option<u64>,
        read_only: bool,
        durability: &str,
    ) -> PyResult<Self> {
        let cfg = PrefixConfig {
            chunk_tokens,
            age_tiers: age_tiers.map_or_else(AgeTiers::default, |(tier0, tier1, tier2)| AgeTiers {
                tier0,
                tier1,
                tier2,
            }),
            budget_bytes,
            read_only,
            store: StoreConfig {
                durability: parse_durability(durability)?,
                ..StoreConfig::default()
            },
            ..PrefixConfig::default()
        };
        let cache = py
            .detach(|| Cache::open(&root, &model, layers, kv_heads, head_dim, cfg))
            .map_err(|e| prefix_err(&e))?;
        Ok(Self {
            inner: RwLock::new(Some(cache)),
            root,
        })
    }

    /// Store every full chunk of `tokens` not stored yet; returns tokens newly stored.
    fn store(
        &self,
        py: Python<'_>,
        tokens: PyReadonlyArray1<'_, u32>,
        keys: Vec<PyReadonlyArray1<'_, u8>>,
        values: Vec<PyReadonlyArray1<'_, u8>>,
        dtype: &str,
    ) -> PyResult<u64> {
        let t = tokens
            .as_slice()
            .map_err(|_| arg_err("token_ids must be C-contiguous"))?
            .to_vec();
        let (k, v) = (
            owned(&keys, dtype, "keys")?,
            owned(&values, dtype, "values")?,
        );
        self.with(py, |c| {
            let kd: Vec<KvData> = k.iter().map(Owned::view).collect();
            let vd: Vec<KvData> = v.iter().map(Owned::view).collect();
            c.store(&t, &kd, &vd)
        })
    }

    /// The longest stored prefix of `tokens`, in tokens.
    fn lookup(&self, py: Python<'_>, tokens: PyReadonlyArray1<'_, u32>) -> PyResult<u64> {
        let t = tokens
            .as_slice()
            .map_err(|_| arg_err("token_ids must be C-contiguous"))?
            .to_vec();
        self.with(py, |c| c.lookup(&t))
    }

    /// `(tokens loaded, [keys f16 bytes per layer], [values f16 bytes per layer])`.
    #[pyo3(signature = (tokens, n=None))]
    #[allow(clippy::type_complexity)]
    fn load<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray1<'_, u32>,
        n: Option<u64>,
    ) -> PyResult<(
        usize,
        Vec<Bound<'py, PyArray1<u8>>>,
        Vec<Bound<'py, PyArray1<u8>>>,
    )> {
        let t = tokens
            .as_slice()
            .map_err(|_| arg_err("token_ids must be C-contiguous"))?
            .to_vec();
        let got = self.with(py, |c| c.load(&t, n))?;
        let bytes = |a: Vec<f16>| -> Vec<u8> { a.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let mut keys = Vec::with_capacity(got.keys.len());
        for a in got.keys {
            keys.push(bytes_array(py, bytes(a))?);
        }
        let mut values = Vec::with_capacity(got.values.len());
        for a in got.values {
            values.push(bytes_array(py, bytes(a))?);
        }
        Ok((got.tokens, keys, values))
    }

    /// Counts, sizes and this handle's hit/miss counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |c| c.stats())?;
        let d = PyDict::new(py);
        d.set_item("chunks", s.chunks)?;
        d.set_item("tokens", s.tokens)?;
        d.set_item("stored_bytes", s.stored_bytes)?;
        d.set_item("f16_bytes", s.f16_bytes)?;
        d.set_item("tier_chunks", s.tier_chunks.to_vec())?;
        d.set_item("tier_bytes", s.tier_bytes.to_vec())?;
        d.set_item("lookups", s.lookups)?;
        d.set_item("hit_chunks", s.hit_chunks)?;
        d.set_item("miss_chunks", s.miss_chunks)?;
        d.set_item("damaged_chunks", s.damaged_chunks)?;
        d.set_item("stored_chunks", s.stored_chunks)?;
        d.set_item("evicted_chunks", s.evicted_chunks)?;
        Ok(d)
    }

    /// Check every block of every chunk (not counted as a use); damaged chunks are
    /// reported as 32-hex-digit ids and, when writable, dropped with their suffixes.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with(py, |c| c.verify())?;
        let d = PyDict::new(py);
        d.set_item("chunks", r.chunks)?;
        d.set_item("blocks", r.blocks)?;
        let ids: Vec<String> = r.damaged.iter().map(|id| format!("{id:032x}")).collect();
        d.set_item("damaged", ids)?;
        d.set_item("dropped", r.dropped)?;
        Ok(d)
    }

    /// Demote idle chunks by the age tiers, then evict down to the budget.
    fn maintain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with(py, |c| c.maintain())?;
        let d = PyDict::new(py);
        d.set_item("demoted", r.demoted.to_vec())?;
        d.set_item("evicted", r.evicted)?;
        Ok(d)
    }

    /// The model's use counters summed over every writable handle's commits.
    fn model_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.with(py, |c| c.model_counts())?;
        let d = PyDict::new(py);
        for (f, v) in tensorvault_store::prefix::counts::FIELDS.iter().zip(c.0) {
            d.set_item(*f, v)?;
        }
        Ok(d)
    }

    /// Evict down to `bytes` payload bytes (0: all); returns the chunks evicted.
    fn evict_to_bytes(&self, py: Python<'_>, bytes: u64) -> PyResult<u64> {
        self.with(py, |c| c.evict_to_bytes(bytes))
    }

    /// Tokens per chunk.
    #[getter]
    fn chunk_tokens(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |c| Ok(c.chunk_tokens()))
    }

    /// Release the store (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.detach(|| {
            self.inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .map(Cache::close)
        });
        match taken {
            Some(Err(e)) => Err(prefix_err(&e)),
            _ => Ok(()),
        }
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }
}
