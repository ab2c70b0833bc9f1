//! The temporal tensor store: one collection directory (`<root>/<tenant>/<collection>/`)
//! holding tensors in raw (Tier0) or quantized (Tiers 1-3) blocks.
//!
//! The native class takes and returns raw little-endian element bytes (a `uint8` array)
//! plus a dtype name and a shape; the Python wrapper (`tensorvault/_store.py`) turns numpy
//! arrays into that and back with views, so neither direction copies outside the store's
//! own encode/decode. Every store call runs with the GIL released.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use numpy::ndarray::ArrayView1;
use numpy::{PyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensorvault_store::tiering::Reason;
use tensorvault_store::{
    BlockInfo, CollectionConfig, DType, DirStore, Durability, MaintainReport, StoreConfig,
    StoreErr, StoreStats, TensorInfo, TensorKind, Tier, VerifyReport, STORE_DTYPES,
};

use crate::errors::{arg_err, err, Kind};

/// Rust-owned bytes of a tensor read from the store: the `base` of the array
/// `get_tensor` returns.
#[pyclass(module = "tensorvault._tensorvault", frozen)]
pub struct StoreBuffer {
    data: Vec<u8>,
}

#[pymethods]
impl StoreBuffer {
    /// Bytes held.
    #[getter]
    fn nbytes(&self) -> usize {
        self.data.len()
    }

    fn __repr__(&self) -> String {
        format!("<tensorvault StoreBuffer: {} bytes>", self.data.len())
    }
}

/// `data` as a writable 1-D `uint8` array whose base is a [`StoreBuffer`], without a copy.
pub(crate) fn bytes_array(py: Python<'_>, data: Vec<u8>) -> PyResult<Bound<'_, PyArray1<u8>>> {
    let owner = Bound::new(py, StoreBuffer { data })?;
    let bytes = &owner.get().data;
    let view = ArrayView1::from(bytes.as_slice());
    // SAFETY: the bytes live in the Vec inside `owner` (a frozen pyclass: the Vec is never
    // mutated, resized or moved after this point, and moving the Vec into the object did
    // not move its heap block); `owner` becomes the array's base, so the memory outlives
    // every array numpy derives from it. Numpy may write through the array; nothing in
    // Rust reads the bytes again, so that is not observable as aliasing.
    Ok(unsafe { PyArray::borrow_from_array(&view, owner.clone().into_any()) })
}

/// The exception class of a store error.
fn store_kind(e: &StoreErr) -> Kind {
    if e.is_corruption() {
        return Kind::Corruption;
    }
    match e {
        StoreErr::NotFound { .. }
        | StoreErr::TensorNotFound { .. }
        | StoreErr::CollectionNotFound { .. } => Kind::NotFound,
        StoreErr::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Kind::NotFound
        }
        // A header whose own checksum fails is corrupt (`is_corruption` above); a wrong
        // magic, version or length is not a store file of this format.
        StoreErr::BadHeader { .. } => Kind::InvalidFormat,
        StoreErr::CapacityExceeded { .. } => Kind::Capacity,
        StoreErr::Locked { .. } => Kind::Locked,
        StoreErr::InvalidName { .. }
        | StoreErr::InvalidArgument { .. }
        | StoreErr::Quant(_)
        | StoreErr::NonFiniteKv { .. }
        | StoreErr::NonFiniteBlock { .. }
        | StoreErr::RopeMismatch { .. } => Kind::InvalidArgument,
        _ => Kind::Storage,
    }
}

/// A store error as a Python exception.
pub fn store_err(e: &StoreErr) -> PyErr {
    err(store_kind(e), e.to_string())
}

/// Why a call on the store did not happen or failed.
enum Fail {
    Closed,
    Store(StoreErr),
}

impl From<StoreErr> for Fail {
    fn from(e: StoreErr) -> Self {
        Fail::Store(e)
    }
}

fn dtype_name(d: DType) -> &'static str {
    d.numpy_name()
}

/// A dtype by numpy's or the CLI's name (`tensorvault_core::DType`'s `FromStr`), if the
/// store keeps it.
fn parse_dtype(name: &str) -> PyResult<DType> {
    name.parse::<DType>()
        .ok()
        .filter(|d| STORE_DTYPES.contains(d))
        .ok_or_else(|| {
            arg_err(format!(
                "dtype {name:?} cannot be stored: use float32, float16, bfloat16, int8 or uint8"
            ))
        })
}

fn parse_tier(t: u8) -> PyResult<Tier> {
    Tier::from_u8(t).ok_or_else(|| {
        arg_err(format!(
            "tier {t} does not exist: 0 (raw, bit-exact), 1 (8-bit), 2 (5-bit) or 3 (3-bit)"
        ))
    })
}

pub(crate) fn parse_durability(s: &str) -> PyResult<Durability> {
    match s {
        "every-write" | "every_write" => Ok(Durability::EveryWrite),
        "os" => Ok(Durability::Os),
        other => other
            .strip_prefix("every-")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&n| n > 0)
            .map(Durability::EveryN)
            .ok_or_else(|| {
                arg_err(format!(
                    "durability {other:?}: use \"every-write\", \"os\" or \"every-N\" (N >= 1)"
                ))
            }),
    }
}

fn reason_name(r: Reason) -> &'static str {
    match r {
        Reason::Capacity => "capacity",
        Reason::Cold => "cold",
        Reason::Hot => "hot",
    }
}

fn info_dict<'py>(py: Python<'py>, t: &TensorInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", t.name.as_deref())?;
    d.set_item("tensor_id", t.tensor_id)?;
    d.set_item("dtype", dtype_name(t.dtype))?;
    d.set_item("shape", t.shape.clone())?;
    d.set_item("blocks", t.blocks)?;
    d.set_item("expected_blocks", t.expected_blocks)?;
    d.set_item("tier_blocks", t.tier_blocks.to_vec())?;
    d.set_item("stored_bytes", t.stored_bytes)?;
    d.set_item("raw_bytes", t.raw_bytes)?;
    Ok(d)
}

fn problems_list<'py>(py: Python<'py>, r: &VerifyReport) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    // Valid log records replay could not use (docs/formats/store.md, "Records replay
    // cannot use"): no tier or slot, the record's offset in the log instead.
    for x in &r.replay_defects {
        let d = PyDict::new(py);
        d.set_item("kind", "log_record")?;
        d.set_item("tensor", py.None())?;
        d.set_item("tensor_id", x.key.tensor_id)?;
        d.set_item("block", x.key.block_index)?;
        d.set_item("tier", py.None())?;
        d.set_item("offset", py.None())?;
        d.set_item("log_offset", x.log_offset)?;
        d.set_item("record", x.record)?;
        d.set_item("error", &x.reason)?;
        out.append(d)?;
    }
    for p in &r.problems {
        let d = PyDict::new(py);
        d.set_item("kind", "block")?;
        d.set_item("log_offset", py.None())?;
        d.set_item("tensor", p.tensor.as_deref())?;
        d.set_item("tensor_id", p.key.tensor_id)?;
        d.set_item("block", p.key.block_index)?;
        d.set_item("tier", p.tier.index())?;
        d.set_item("offset", p.offset)?;
        d.set_item("error", &p.error)?;
        out.append(d)?;
    }
    Ok(out)
}

pub(crate) fn maintain_dict<'py>(
    py: Python<'py>,
    r: &MaintainReport,
    names: &HashMap<u128, String>,
) -> PyResult<Bound<'py, PyDict>> {
    let moves = PyList::empty(py);
    for m in &r.moves {
        let d = PyDict::new(py);
        d.set_item("tensor", names.get(&m.key.tensor_id))?;
        d.set_item("tensor_id", m.key.tensor_id)?;
        d.set_item("block", m.key.block_index)?;
        d.set_item("from_tier", m.from.index())?;
        d.set_item("to_tier", m.to.index())?;
        d.set_item("score", m.score)?;
        d.set_item("reason", reason_name(m.reason))?;
        moves.append(d)?;
    }
    let held = PyList::empty(py);
    for h in &r.held {
        let d = PyDict::new(py);
        d.set_item("tensor", names.get(&h.key.tensor_id))?;
        d.set_item("tensor_id", h.key.tensor_id)?;
        d.set_item("block", h.key.block_index)?;
        d.set_item("tier", h.tier.index())?;
        d.set_item("target_tier", h.target.index())?;
        d.set_item("non_finite", h.non_finite())?;
        d.set_item("reason", h.reason.to_string())?;
        held.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("held", held)?;
    d.set_item("now", r.now)?;
    d.set_item("scored", r.scored)?;
    d.set_item("moves", moves)?;
    d.set_item("deferred", r.deferred)?;
    d.set_item("over_capacity", r.over_capacity)?;
    d.set_item("plan_nanos", r.plan_nanos)?;
    Ok(d)
}

/// Set `cfg.max_blocks_per_tier` from Python's four-entry list (`None` = unlimited).
pub(crate) fn apply_tier_limits(
    cfg: &mut StoreConfig,
    limits: Option<Vec<Option<usize>>>,
) -> PyResult<()> {
    let Some(limits) = limits else {
        return Ok(());
    };
    if limits.len() != 4 {
        return Err(arg_err(format!(
            "max_blocks_per_tier needs 4 entries (one per tier, None for unlimited), got {}",
            limits.len()
        )));
    }
    for (slot, l) in cfg.max_blocks_per_tier.iter_mut().zip(limits) {
        *slot = l.unwrap_or(usize::MAX);
    }
    Ok(())
}

/// `allocation="slot"` or `"extent"` of `Store(...)` / `KvCache(...)`: whether a new
/// collection takes payload-sized extents.
pub(crate) fn parse_allocation(allocation: &str) -> PyResult<bool> {
    match allocation {
        "slot" => Ok(false),
        "extent" => Ok(true),
        other => Err(arg_err(format!(
            "allocation {other:?} is not \"slot\" or \"extent\""
        ))),
    }
}

/// Store-wide statistics as a dict (shared by `Store.stats` and `KvCache.stats`).
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &StoreStats) -> PyResult<Bound<'py, PyDict>> {
    let usage = PyList::empty(py);
    for u in &s.usage {
        let d = PyDict::new(py);
        d.set_item("slot_len", u.slot_len)?;
        d.set_item("alloc_unit", u.alloc_unit)?;
        d.set_item("live_bytes", u.live_bytes)?;
        d.set_item("slots", u.slots)?;
        d.set_item("free_slots", u.free_slots)?;
        d.set_item("bytes", u.bytes)?;
        d.set_item("allocated_bytes", u.allocated_bytes)?;
        usage.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("tensors", s.tensors)?;
    d.set_item("blocks", s.blocks.to_vec())?;
    d.set_item("payload_bytes", s.payload_bytes.to_vec())?;
    d.set_item("raw_bytes", s.raw_bytes.to_vec())?;
    d.set_item("step_median", s.step_median.to_vec())?;
    d.set_item("usage", usage)?;
    d.set_item("log_records", s.log_records)?;
    d.set_item("reads", s.reads)?;
    d.set_item("writes", s.writes)?;
    d.set_item("migrations", s.migrations)?;
    d.set_item("deletes", s.deletes)?;
    d.set_item("checksum_failures", s.checksum_failures)?;
    d.set_item("replay_nanos", s.replay_nanos)?;
    d.set_item("replay_skipped", s.replay_skipped)?;
    d.set_item("replay_ignored", s.replay_ignored)?;
    d.set_item("held_blocks", s.held_blocks)?;
    Ok(d)
}

/// One collection of the temporal tensor store, open for reading and writing (the
/// collection's `LOCK` is held until `close`).
#[pyclass(module = "tensorvault._tensorvault", name = "Store", frozen)]
pub struct Store {
    inner: RwLock<Option<DirStore>>,
    path: PathBuf,
    tenant: String,
    collection: String,
    geometry: CollectionConfig,
    /// A lock-free snapshot: closing it only drops it (nothing to flush, nothing may be
    /// written).
    read_only: bool,
}

impl Store {
    /// Run `f` on the open store with the GIL released. The lock is taken inside the
    /// detached section, so a thread waiting for it never holds the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&DirStore) -> Result<T, StoreErr> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(s) => f(s).map_err(Fail::Store),
                None => Err(Fail::Closed),
            }
        })
        .map_err(|e| self.fail(e))
    }

    fn fail(&self, e: Fail) -> PyErr {
        match e {
            Fail::Closed => arg_err(format!(
                "store {}/{} is closed",
                self.tenant, self.collection
            )),
            Fail::Store(e) => store_err(&e),
        }
    }
}

#[pymethods]
impl Store {
    /// Open (or, with `create`, create) the collection `<root>/<tenant>/<collection>`.
    #[new]
    /// With `read_only`: a lock-free snapshot of an existing collection
    /// (`DirStore::open_path_snapshot`), never waiting for a writer and never writing.
    /// With `entropy` (new collections, codec 2 and later): tier 2 and 3 blocks are stored
    /// entropy-coded (TQTC version 5, lossless) where that is shorter; reads are
    /// bit-identical and `stats()["payload_bytes"]` counts the coded bytes.
    /// With `allocation="extent"` (new collections, codec 2 and later): each block takes
    /// `roundup(payload, slot_align)` bytes of its tier file instead of a worst-case slot
    /// (`"slot"`, the default); `stats()["usage"][t]["live_bytes"]` and
    /// `["allocated_bytes"]` show what the blocks take and what the disk holds.
    /// With `ecsq` (new collections, `codec=4` with `entropy=True`): `weight` and
    /// `embedding` tensors at tiers 2 and 3 are stored as entropy-coded uniform levels
    /// whose step is searched per block to fill the tier's slot (less error than codec
    /// 4's super-blocks in the same bytes).
    /// With `row_gains` (new collections, `codec=4`): every quantized block of an
    /// `embedding` tensor carries one gain per row (TQTC version 6) that makes each row's
    /// decoding an unbiased inner-product estimate, which keeps nearest-neighbour
    /// rankings (recall) in the same slots.
    /// With `ecsq_model` (new collections, with `ecsq=True`): `weight` and `embedding`
    /// tensors at tiers 1, 2 and 3 are stored as model-coded ECSQ (TQTC version 7: no
    /// stored frequency table, the rANS frequencies come from a Gaussian model with one
    /// byte per rotation block; 10 / 7 / 6-bit codes), less error in the same slots; inside
    /// the row gains with `row_gains=True`.
    /// With `centre` (new collections, `codec=4` with `row_gains=True`): a 2-D
    /// `embedding` tensor is stored centred on its column mean (kept by the store as the
    /// tensor's side record, added back on every read), with row gains against the
    /// original rows: less error and better recall in the same slots (ValueError
    /// without `codec=4` and `row_gains=True`).
    /// With `wide_lanes` (new collections, with `entropy=True`): KV and generic tensors'
    /// entropy-coded blocks use 64 rANS lanes, which reads decode with AVX-512 / AVX2
    /// ~3x faster (a whole KV block read 1.7-2.2x; same values, ~180 more bytes per
    /// 16384-value block); MetaLog header
    /// flags2 bit 1, refused by builds before session 15.
    /// `slot_align` (new collections): the byte alignment of slots and extents, a power of
    /// two in 8..=2^20 (default 64; ValueError otherwise); with `allocation="extent"` each
    /// block's payload is rounded up to it on disk, so 16 wastes ~4x less than 64.
    #[pyo3(signature = (root, tenant, collection, create=true, durability="every-write", max_blocks_per_tier=None, block_elems=None, kv_head_dim=None, codec=None, read_only=false, entropy=false, allocation="slot", ecsq=false, row_gains=false, ecsq_model=false, centre=false, wide_lanes=false, slot_align=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        tenant: String,
        collection: String,
        create: bool,
        durability: &str,
        max_blocks_per_tier: Option<Vec<Option<usize>>>,
        block_elems: Option<u32>,
        kv_head_dim: Option<u32>,
        codec: Option<u8>,
        read_only: bool,
        entropy: bool,
        allocation: &str,
        ecsq: bool,
        row_gains: bool,
        ecsq_model: bool,
        centre: bool,
        wide_lanes: bool,
        slot_align: Option<u32>,
    ) -> PyResult<Self> {
        let mut cfg = StoreConfig {
            durability: parse_durability(durability)?,
            ..StoreConfig::default()
        };
        apply_tier_limits(&mut cfg, max_blocks_per_tier)?;
        match (kv_head_dim, block_elems) {
            (Some(_), Some(_)) => {
                return Err(arg_err("give block_elems or kv_head_dim, not both"));
            }
            (Some(h), None) => {
                cfg.collection = CollectionConfig::kv_cache(h).map_err(|e| store_err(&e))?;
            }
            (None, Some(n)) => cfg.collection = CollectionConfig::with_block_elems(n),
            (None, None) => {}
        }
        match codec {
            None | Some(2) => {}
            Some(3) => cfg.collection.codec = tensorvault_store::CODEC_V3,
            Some(4) => cfg.collection.codec = tensorvault_store::CODEC_V4,
            Some(1) => {
                let g = cfg.collection;
                cfg.collection = CollectionConfig {
                    tier0_elem_bytes: g.tier0_elem_bytes,
                    ..CollectionConfig::codec_v1(g.block_elems)
                };
            }
            Some(c) => return Err(arg_err(format!("codec {c} is not 1, 2, 3 or 4"))),
        }
        // Entropy-code quantized payloads (TQTC v5) where shorter; a new collection only
        // (an existing one keeps the flag in its header).
        cfg.collection.entropy = entropy;
        cfg.collection.extents = parse_allocation(allocation)?;
        cfg.collection.ecsq = ecsq;
        cfg.collection.row_gains = row_gains;
        cfg.collection.ecsq_model = ecsq_model;
        cfg.collection.centre = centre;
        cfg.collection.wide_lanes = wide_lanes;
        if let Some(n) = slot_align {
            cfg.collection.slot_align = n;
        }
        let store = py
            .detach(|| {
                if read_only {
                    DirStore::open_path_snapshot(&root, &tenant, &collection, cfg)
                } else {
                    DirStore::open_path(&root, &tenant, &collection, cfg, create)
                }
            })
            .map_err(|e| store_err(&e))?;
        let geometry = *store.geometry();
        let path = root.join(&tenant).join(&collection);
        Ok(Store {
            inner: RwLock::new(Some(store)),
            path,
            tenant,
            collection,
            geometry,
            read_only,
        })
    }

    /// The collection directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The tenant name.
    #[getter]
    fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The collection name.
    #[getter]
    fn collection(&self) -> &str {
        &self.collection
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// The collection's geometry (fixed when it was created).
    #[getter]
    fn geometry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = &self.geometry;
        let d = PyDict::new(py);
        d.set_item("block_elems", g.block_elems)?;
        d.set_item("tier0_elem_bytes", g.tier0_elem_bytes)?;
        d.set_item("tier_bits", g.tier_bits.map(u32::from).to_vec())?;
        d.set_item("group_size", g.group_size.to_vec())?;
        d.set_item("slot_align", g.slot_align)?;
        d.set_item("codec", g.codec)?;
        d.set_item("sink_values", g.sink_values)?;
        d.set_item("entropy", g.entropy)?;
        d.set_item("allocation", if g.extents { "extent" } else { "slot" })?;
        d.set_item("kv_ecsq", g.kv_ecsq)?;
        d.set_item("ecsq", g.ecsq)?;
        d.set_item("kv_ecsq_tier2", g.kv_ecsq_tier2)?;
        d.set_item("row_gains", g.row_gains)?;
        d.set_item("ecsq_model", g.ecsq_model)?;
        d.set_item("centre", g.centre)?;
        d.set_item("kv_keys_ecsq", g.kv_keys_ecsq)?;
        d.set_item("wide_lanes", g.wide_lanes)?;
        d.set_item("kv_keys_wstep", g.kv_keys_wstep)?;
        Ok(d)
    }

    /// Store `data` (little-endian elements of `dtype`, C order, as a 1-D uint8 array)
    /// as the tensor `name` of `shape` in `tier`, holding `kind` (`generic`, `kv_key`,
    /// `kv_value`, `weight`, `embedding`); returns its info dict.
    #[pyo3(signature = (name, dtype, shape, data, tier, kind = "generic"))]
    #[allow(clippy::too_many_arguments, reason = "mirrors the Python signature")]
    fn put_tensor<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        dtype: &str,
        shape: Vec<u64>,
        data: PyReadonlyArray1<'py, u8>,
        tier: u8,
        kind: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dtype = parse_dtype(dtype)?;
        let kind = TensorKind::from_name(kind).ok_or_else(|| {
            arg_err(format!(
                "kind {kind:?} is not one of generic, kv_key, kv_value, weight, embedding"
            ))
        })?;
        let tier = parse_tier(tier)?;
        let shape: Vec<u32> = shape
            .iter()
            .map(|&d| u32::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| arg_err(format!("shape {shape:?}: dimensions must be < 2^32")))?;
        let bytes = data
            .as_slice()
            .map_err(|_| arg_err("data must be a C-contiguous uint8 array"))?;
        let block = BlockInfo::new(dtype, &shape).with_kind(kind);
        let info = self.with(py, |s| s.put_tensor_with(name, &block, bytes, tier))?;
        info_dict(py, &info)
    }

    /// Read the tensor `name`: `(info dict, 1-D uint8 array of its little-endian
    /// elements)`; the array's base is a `StoreBuffer` (Rust memory, no copy).
    fn get_tensor<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyArray1<u8>>)> {
        let t = self.with(py, |s| s.get_tensor(name))?;
        let info = info_dict(py, &t.info)?;
        Ok((info, bytes_array(py, t.data)?))
    }

    /// Every tensor, sorted by name (one info dict each).
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let all = self.with(py, |s| s.tensors())?;
        all.iter().map(|t| info_dict(py, t)).collect()
    }

    /// Delete the tensor `name`; returns how many blocks it had (0 if none).
    fn delete_tensor(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        self.with(py, |s| s.delete_tensor(name))
    }

    /// Move every block of `name` to `tier`; returns how many blocks moved.
    fn migrate_tensor(&self, py: Python<'_>, name: &str, tier: u8) -> PyResult<usize> {
        let tier = parse_tier(tier)?;
        self.with(py, |s| s.migrate_tensor(name, tier))
    }

    /// Store-wide statistics.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |s| s.stats())?;
        stats_dict(py, &s)
    }

    /// One tiering step with at most `budget` migrations; returns the report.
    #[pyo3(signature = (budget=1024))]
    fn maintain<'py>(&self, py: Python<'py>, budget: usize) -> PyResult<Bound<'py, PyDict>> {
        let (report, names) = self.with(py, |s| {
            let report = s.maintain(budget)?;
            let mut names = HashMap::new();
            if !report.moves.is_empty() || !report.held.is_empty() {
                for t in s.tensors()? {
                    if let Some(n) = t.name {
                        names.insert(t.tensor_id, n);
                    }
                }
            }
            Ok((report, names))
        })?;
        maintain_dict(py, &report, &names)
    }

    /// Read and checksum every block; returns one dict per corrupt block.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let r = self.with(py, |s| s.verify())?;
        problems_list(py, &r)
    }

    /// Make everything written so far durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.flush())
    }

    /// Flush and release the collection (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let read_only = self.read_only;
        let taken = py.detach(|| {
            self.inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .map(|s| {
                    if read_only {
                        drop(s);
                        Ok(())
                    } else {
                        s.close()
                    }
                })
        });
        match taken {
            Some(Err(e)) => Err(store_err(&e)),
            _ => Ok(()),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<tensorvault Store {}/{} at {}{}>",
            self.tenant,
            self.collection,
            self.path.display(),
            if self.closed() { " (closed)" } else { "" }
        )
    }
}
