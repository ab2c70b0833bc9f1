//! The store's KV-cache API (`tensorvault_store::KvCache`) for Python inference loops:
//! one f16 `[tokens, head_dim]` tensor per (layer, KV head, k|v) in a collection created
//! with the KV layout, appended a decode step at a time, read back by token range, with
//! the store's own tiering demoting older blocks (`maintain`) and pins keeping chosen
//! blocks where they are.
//!
//! The native class takes and returns raw little-endian f16 bytes (1-D `uint8` arrays);
//! `tensorvault/_kv.py` converts numpy arrays. Every call runs with the GIL released.

use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use half::f16;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorvault_store::finite::F16_MAX;
use tensorvault_store::kv::{RopePairing, RopeSpec};
use tensorvault_store::{
    CollectionConfig, DirStore, FileMetaLog, KvAgePolicy, KvCache as Cache, KvKind, KvSlot,
    MmapBlockIO, StoreConfig, StoreErr, SystemClock, CODEC_V2, CODEC_V4,
};

use crate::errors::arg_err;
use crate::store::{
    apply_tier_limits, bytes_array, maintain_dict, parse_durability, stats_dict, store_err,
};

type DirKv = Cache<SystemClock, MmapBlockIO, FileMetaLog>;

fn kind(k: &str) -> PyResult<KvKind> {
    match k {
        "k" | "key" => Ok(KvKind::Key),
        "v" | "value" => Ok(KvKind::Value),
        other => Err(arg_err(format!(
            "kind must be 'k' (keys) or 'v' (values), got {other:?}"
        ))),
    }
}

/// One append's values as f16, from little-endian float bytes of `itemsize` 2, 4 or 8
/// (numpy's float16, float32, float64; converted as numpy's `astype(float16)` rounds). A
/// value beyond float16's ±65504 (infinities included) is refused naming its
/// `[token, column]` in `slot`'s array, unless `clip` saturates it; NaN passes through
/// (the store refuses it naming the token: `tensorvault_store::finite`).
fn to_f16(
    bytes: &[u8],
    itemsize: u8,
    head_dim: usize,
    clip: bool,
    slot: KvSlot,
) -> PyResult<Vec<f16>> {
    let size = usize::from(itemsize);
    if !matches!(size, 2 | 4 | 8) || !bytes.len().is_multiple_of(size) {
        return Err(arg_err(format!(
            "{slot}: {} bytes is not a whole number of {itemsize}-byte float values (2, 4 or 8)",
            bytes.len()
        )));
    }
    let max = f64::from(F16_MAX);
    // The error for value `v` at flat index `i`.
    let refuse = |i: usize, v: f64| {
        let hd = head_dim.max(1);
        arg_err(format!(
            "{slot}[{}, {}] = {v} is outside the float16 range ±65504: it would be stored as \
             infinity; pass clip=True to saturate such values to ±65504",
            i / hd,
            i % hd
        ))
    };
    let mut out = Vec::with_capacity(bytes.len() / size);
    match size {
        2 => {
            for (i, b) in bytes.chunks_exact(2).enumerate() {
                let h = f16::from_le_bytes([b[0], b[1]]);
                if h.is_infinite() {
                    if !clip {
                        return Err(refuse(i, h.to_f64()));
                    }
                    out.push(if h.is_sign_negative() {
                        f16::MIN
                    } else {
                        f16::MAX
                    });
                } else {
                    out.push(h);
                }
            }
        }
        4 => {
            for (i, b) in bytes.chunks_exact(4).enumerate() {
                let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if f64::from(v.abs()) > max {
                    if !clip {
                        return Err(refuse(i, f64::from(v)));
                    }
                    out.push(if v < 0.0 { f16::MIN } else { f16::MAX });
                } else {
                    out.push(f16::from_f32(v));
                }
            }
        }
        _ => {
            for (i, b) in bytes.chunks_exact(8).enumerate() {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                let v = f64::from_le_bytes(a);
                if v.abs() > max {
                    if !clip {
                        return Err(refuse(i, v));
                    }
                    out.push(if v < 0.0 { f16::MIN } else { f16::MAX });
                } else {
                    out.push(f16::from_f64(v));
                }
            }
        }
    }
    Ok(out)
}

/// The RoPE spec from `(theta, rotary_dims, pairing)`.
fn rope_spec(rope: Option<(f64, u16, String)>) -> PyResult<Option<RopeSpec>> {
    let Some((theta, dims, pairing)) = rope else {
        return Ok(None);
    };
    let Some(p) = RopePairing::from_name(&pairing) else {
        return Err(arg_err(format!(
            "rope pairing must be 'neox' or 'interleaved', got {pairing:?}"
        )));
    };
    RopeSpec::new(theta, dims, p)
        .map(Some)
        .map_err(|e| store_err(&e))
}

fn f16_bytes(values: &[f16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A KV cache kept in one store collection (`<root>/<tenant>/<collection>`).
#[pyclass(module = "tensorvault._tensorvault", name = "KvCache", frozen)]
pub struct KvCache {
    inner: RwLock<Option<DirKv>>,
    path: PathBuf,
    head_dim: u32,
    tokens_per_block: u32,
    /// Age-based tiering applied by `maintain` (None: access statistics only).
    age: Option<KvAgePolicy>,
}

impl KvCache {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&DirKv) -> Result<T, StoreErr> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(c) => f(c).map_err(Some),
                None => Err(None),
            }
        })
        .map_err(|e| match e {
            Some(e) => store_err(&e),
            None => arg_err(format!("KV cache {} is closed", self.path.display())),
        })
    }
}

impl KvCache {
    /// Pin (`pin`) or unpin block `(layer, head, kind, block_index)`.
    fn pinning(
        &self,
        py: Python<'_>,
        (layer, head, k, block_index): (u32, u32, &str, u32),
        pin: bool,
    ) -> PyResult<bool> {
        let slot = KvSlot::new(layer, head, kind(k)?);
        self.with(py, |c| {
            if pin {
                c.pin(slot, block_index)
            } else {
                c.unpin(slot, block_index)
            }
        })
    }
}

#[pymethods]
impl KvCache {
    /// Open (or, with `create`, create with the KV layout for `head_dim`) the collection
    /// `<root>/<tenant>/<collection>` as a KV cache. `slot_align` (new collections): the
    /// byte alignment of slots and extents, a power of two in 8..=2^20 (default 64); with
    /// `allocation="extent"` each block's payload is rounded up to it on disk.
    #[new]
    #[pyo3(signature = (root, tenant, collection, head_dim, create=true, durability="os", max_blocks_per_tier=None, age_tiers=None, block_tokens=None, rope=None, codec=None, entropy=false, allocation="slot", ecsq=false, ecsq_tier2=false, keys_ecsq=false, wide_lanes=false, slot_align=None, keys_wstep=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        tenant: String,
        collection: String,
        head_dim: u32,
        create: bool,
        durability: &str,
        max_blocks_per_tier: Option<Vec<Option<usize>>>,
        age_tiers: Option<(u64, u64, u64)>,
        block_tokens: Option<u32>,
        rope: Option<(f64, u16, String)>,
        codec: Option<u8>,
        entropy: bool,
        allocation: &str,
        ecsq: bool,
        ecsq_tier2: bool,
        keys_ecsq: bool,
        wide_lanes: bool,
        slot_align: Option<u32>,
        keys_wstep: bool,
    ) -> PyResult<Self> {
        let geometry = match block_tokens {
            None => CollectionConfig::kv_cache(head_dim),
            Some(t) => CollectionConfig::kv_cache_tokens(head_dim, t),
        };
        let mut geometry = geometry.map_err(|e| store_err(&e))?;
        match codec {
            None | Some(CODEC_V2) => {}
            Some(CODEC_V4) => geometry = geometry.with_codec_v4(),
            Some(c) => {
                return Err(arg_err(format!(
                    "codec {c}: a KV cache is created with codec 2 (default) or 4 (4-bit keys at tier 3)"
                )))
            }
        }
        let rope = rope_spec(rope)?;
        geometry.rope = rope;
        geometry.entropy = entropy;
        geometry.extents = crate::store::parse_allocation(allocation)?;
        geometry.kv_ecsq = ecsq;
        geometry.kv_ecsq_tier2 = ecsq_tier2;
        geometry.kv_keys_ecsq = keys_ecsq;
        geometry.kv_keys_wstep = keys_wstep;
        geometry.wide_lanes = wide_lanes;
        if let Some(n) = slot_align {
            geometry.slot_align = n;
        }
        let mut cfg = StoreConfig {
            durability: parse_durability(durability)?,
            collection: geometry,
            ..StoreConfig::default()
        };
        apply_tier_limits(&mut cfg, max_blocks_per_tier)?;
        // A KV cache's Tier0 is where new tokens land, not data put as exact: cold
        // blocks go down by access statistics (and age, with age_tiers).
        cfg.tiering.demote_tier0 = true;
        if age_tiers.is_some() {
            // The age policy owns a block's tier: no access-based promotion to undo it.
            cfg.tiering = KvAgePolicy::store_tiering(cfg.tiering);
        }
        let cache = py
            .detach(|| {
                let store = DirStore::open_path(&root, &tenant, &collection, cfg, create)?;
                Cache::open(store, head_dim, rope)
            })
            .map_err(|e| store_err(&e))?;
        let tokens_per_block = cache.tokens_per_block();
        let age = age_tiers.map(|(t0, t1, t2)| KvAgePolicy {
            tier0_tokens: t0,
            tier1_tokens: t1,
            tier2_tokens: t2,
        });
        Ok(KvCache {
            age,
            inner: RwLock::new(Some(cache)),
            path: root.join(&tenant).join(&collection),
            head_dim,
            tokens_per_block,
        })
    }

    /// The RoPE spec keys are stored under, as `(theta, rotary_dims, pairing)`, or None
    /// (keys are stored and returned as appended).
    #[getter]
    fn rope(&self, py: Python<'_>) -> PyResult<Option<(f64, u16, &'static str)>> {
        let r = self.with(py, |c| Ok(c.rope()))?;
        Ok(r.map(|r| (r.theta, r.rotary_dims, r.pairing.name())))
    }

    /// Values per token position.
    #[getter]
    fn head_dim(&self) -> u32 {
        self.head_dim
    }

    /// Token positions per block.
    #[getter]
    fn tokens_per_block(&self) -> u32 {
        self.tokens_per_block
    }

    /// The collection directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Append to several (layer, head, kind) tensors as one store batch (one log append
    /// and, per the durability policy, one sync): `items` is a list of
    /// `(layer, head, kind, little-endian float bytes, itemsize)` with itemsize 2, 4 or 8
    /// (float16, float32, float64), converted to float16 here: a value beyond ±65504 is
    /// refused naming its `[token, column]` unless `clip`. All or nothing.
    #[pyo3(signature = (items, clip=false))]
    fn append_batch(
        &self,
        py: Python<'_>,
        items: Vec<(u32, u32, String, PyReadonlyArray1<'_, u8>, u8)>,
        clip: bool,
    ) -> PyResult<()> {
        let mut owned = Vec::with_capacity(items.len());
        let hd = self.head_dim as usize;
        for (layer, head, k, data, itemsize) in &items {
            let bytes = data
                .as_slice()
                .map_err(|_| arg_err("data must be a C-contiguous uint8 array"))?;
            let slot = KvSlot::new(*layer, *head, kind(k)?);
            owned.push((slot, to_f16(bytes, *itemsize, hd, clip, slot)?));
        }
        self.with(py, |c| {
            let refs: Vec<(KvSlot, &[f16])> =
                owned.iter().map(|(s, v)| (*s, v.as_slice())).collect();
            c.append_batch(&refs)
        })
    }

    /// Token positions stored for (layer, head, kind).
    fn tokens(&self, py: Python<'_>, layer: u32, head: u32, kind_: &str) -> PyResult<u64> {
        let slot = KvSlot::new(layer, head, kind(kind_)?);
        self.with(py, |c| c.tokens(slot))
    }

    /// Tokens `start..end` of (layer, head, kind) as f16 bytes (decoding only the blocks
    /// that cover the range, each from its current tier; counts as an access).
    fn read<'py>(
        &self,
        py: Python<'py>,
        layer: u32,
        head: u32,
        kind_: &str,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let slot = KvSlot::new(layer, head, kind(kind_)?);
        let v = self.with(py, |c| c.read(slot, start..end))?;
        bytes_array(py, f16_bytes(&v))
    }

    /// Keep block `block_index` of (layer, head, kind) where it is (tiering skips pinned
    /// blocks); returns whether it was newly pinned. `NotFoundError` if there is no such
    /// block.
    fn pin(
        &self,
        py: Python<'_>,
        layer: u32,
        head: u32,
        kind_: &str,
        block_index: u32,
    ) -> PyResult<bool> {
        self.pinning(py, (layer, head, kind_, block_index), true)
    }

    /// Undo `pin`; returns whether it was pinned.
    fn unpin(
        &self,
        py: Python<'_>,
        layer: u32,
        head: u32,
        kind_: &str,
        block_index: u32,
    ) -> PyResult<bool> {
        self.pinning(py, (layer, head, kind_, block_index), false)
    }

    /// One tiering step: first the age policy (if the cache has one) demotes sealed
    /// blocks by age, then the store's access-based step (at most `budget` migrations;
    /// with an age policy it never promotes, since attention makes every block hot and a
    /// promoted block would be re-encoded on its way back down).
    /// The report's `age_moved` lists the blocks the age policy moved into tiers 0..=3;
    /// `held` the blocks left in their tier because a colder tier cannot encode their
    /// values (NaN or infinity written by an older build), with tensor names.
    #[pyo3(signature = (budget=1024))]
    fn maintain<'py>(&self, py: Python<'py>, budget: usize) -> PyResult<Bound<'py, PyDict>> {
        let age = self.age;
        let (moved, report, names) = self.with(py, |c| {
            let moved = match age {
                Some(p) => c.demote_by_age(&p)?,
                None => [0; 4],
            };
            let report = c.store().maintain(budget)?;
            let names: std::collections::HashMap<u128, String> = c
                .slots()?
                .into_iter()
                .map(|s| (c.tensor_id(s), s.name()))
                .collect();
            Ok((moved, report, names))
        })?;
        let d = maintain_dict(py, &report, &names)?;
        d.set_item("age_moved", moved.to_vec())?;
        Ok(d)
    }

    /// The age policy as `(tier0_tokens, tier1_tokens, tier2_tokens)`, or None.
    #[getter]
    fn age_tiers(&self) -> Option<(u64, u64, u64)> {
        self.age
            .map(|p| (p.tier0_tokens, p.tier1_tokens, p.tier2_tokens))
    }

    /// The store's statistics (blocks, payload and file bytes per tier, ...).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |c| c.store().stats())?;
        stats_dict(py, &s)
    }

    /// Make everything appended so far durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.store().flush())
    }

    /// Flush and release the collection (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.detach(|| {
            self.inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .map(DirKv::close)
        });
        match taken {
            Some(Err(e)) => Err(store_err(&e)),
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
