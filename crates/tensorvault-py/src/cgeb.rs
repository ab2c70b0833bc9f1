//! CGEB fused-embedding records: encode/decode one record to/from bytes, write a batch
//! (`NAME.cgeb` + `NAME.cgei`), and a memory-mapped `BatchReader` whose items are
//! read-only numpy views into the map.

use std::path::PathBuf;

use numpy::{PyArrayDyn, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader as RustBatchReader, BatchReaderOptions, CompressionType,
    EmbeddingBinaryCodec, FusedEmbedding, FusedEmbeddingRef,
};

use crate::array::{f32_array, readonly_view};
use crate::errors::{arg_err, read_err, write_err};

fn aux_compression(name: Option<&str>) -> PyResult<Option<CompressionType>> {
    match name {
        None | Some("none") => Ok(None),
        Some("lz4") => Ok(Some(CompressionType::Lz4)),
        Some("zstd") => Ok(Some(CompressionType::Zstd)),
        Some(other) => Err(arg_err(format!(
            "unknown aux_compression {other:?}: use None, \"lz4\" or \"zstd\""
        ))),
    }
}

fn codec(aux: Option<&str>, little_endian: bool) -> PyResult<EmbeddingBinaryCodec> {
    Ok(EmbeddingBinaryCodec::with_aux_data(aux_compression(aux)?).with_le_payload(little_endian))
}

fn slice1<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| arg_err(format!("{what} must be contiguous")))
}

/// Encode one embedding as a CGEB record.
#[pyfunction]
#[pyo3(signature = (vector, expert_weights, selected_experts, pipeline_latency_us=0,
    aux_data=None, aux_compression=None, little_endian=false))]
#[allow(clippy::too_many_arguments)] // reason: mirrors the Python keyword arguments
pub fn cgeb_encode<'py>(
    py: Python<'py>,
    vector: PyReadonlyArray1<'py, f32>,
    expert_weights: PyReadonlyArray1<'py, f32>,
    selected_experts: PyReadonlyArray1<'py, u8>,
    pipeline_latency_us: u64,
    aux_data: Option<Vec<u8>>,
    aux_compression: Option<&str>,
    little_endian: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let e = FusedEmbedding {
        vector: slice1(&vector, "vector")?.to_vec(),
        expert_weights: slice1(&expert_weights, "expert_weights")?.to_vec(),
        selected_experts: slice1(&selected_experts, "selected_experts")?.to_vec(),
        pipeline_latency_us,
        content_hash: 0,
        aux_data,
    };
    let c = codec(aux_compression, little_endian)?;
    let bytes = py.detach(|| c.encode(&e)).map_err(write_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// A decoded record's fields as a tuple (the Python layer wraps it in `Embedding`).
fn owned_tuple<'py>(py: Python<'py>, e: FusedEmbedding) -> PyResult<Bound<'py, PyTuple>> {
    let n = e.vector.len();
    let k = e.expert_weights.len();
    let vector = f32_array(
        py,
        tensorvault_core::AlignedBuf::from_slice(&e.vector),
        &[n],
    )?;
    let weights = f32_array(
        py,
        tensorvault_core::AlignedBuf::from_slice(&e.expert_weights),
        &[k],
    )?;
    let selected = numpy::PyArray1::from_vec(py, e.selected_experts);
    let aux = e.aux_data.map(|a| PyBytes::new(py, &a));
    PyTuple::new(
        py,
        [
            vector.into_any(),
            weights.into_any(),
            selected.into_any(),
            e.pipeline_latency_us.into_pyobject(py)?.into_any(),
            e.content_hash.into_pyobject(py)?.into_any(),
            aux.map_or_else(|| py.None().into_bound(py), Bound::into_any),
        ],
    )
}

/// Decode one CGEB record (the content hash is verified unless `verify=False`).
#[pyfunction]
#[pyo3(signature = (data, verify=true))]
pub fn cgeb_decode<'py>(
    py: Python<'py>,
    data: &[u8],
    verify: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let c = EmbeddingBinaryCodec::new().with_verify_hash(verify);
    let e = py.detach(|| c.decode(data)).map_err(read_err)?;
    owned_tuple(py, e)
}

/// Write a batch of `n` records: `NAME.cgeb` (records at multiples of `alignment`) and
/// `NAME.cgei` (the index). Returns the two paths.
#[pyfunction]
#[pyo3(signature = (path, vectors, expert_weights, selected_experts, pipeline_latency_us=None,
    alignment=4096, little_endian=false))]
#[allow(clippy::too_many_arguments)] // reason: mirrors the Python keyword arguments
pub fn cgeb_write_batch(
    py: Python<'_>,
    path: PathBuf,
    vectors: PyReadonlyArray2<'_, f32>,
    expert_weights: PyReadonlyArray2<'_, f32>,
    selected_experts: PyReadonlyArray2<'_, u8>,
    pipeline_latency_us: Option<Vec<u64>>,
    alignment: u32,
    little_endian: bool,
) -> PyResult<(PathBuf, PathBuf)> {
    let n = vectors.shape()[0];
    if expert_weights.shape()[0] != n || selected_experts.shape()[0] != n {
        return Err(arg_err(format!(
            "vectors, expert_weights and selected_experts need the same number of rows \
             (got {n}, {}, {})",
            expert_weights.shape()[0],
            selected_experts.shape()[0]
        )));
    }
    if let Some(l) = &pipeline_latency_us {
        if l.len() != n {
            return Err(arg_err(format!(
                "pipeline_latency_us has {} values for {n} records",
                l.len()
            )));
        }
    }
    let (v, w, s) = (
        vectors.as_array(),
        expert_weights.as_array(),
        selected_experts.as_array(),
    );
    let codec = EmbeddingBinaryCodec::new().with_le_payload(little_endian);
    let mut enc = BatchBinaryEncoder::new(codec, alignment).map_err(write_err)?;
    for i in 0..n {
        let mut e = FusedEmbedding::new(v.row(i).to_vec(), w.row(i).to_vec(), s.row(i).to_vec());
        e.pipeline_latency_us = pipeline_latency_us.as_ref().map_or(0, |l| l[i]);
        enc.push(&e).map_err(write_err)?;
    }
    py.detach(|| enc.write_gds_file(&path)).map_err(write_err)
}

/// A batch (`NAME.cgeb` + `NAME.cgei`) opened through a read-only memory map.
///
/// `reader[i]` is record `i`'s vector as a read-only numpy view into the map (dtype
/// `>f4` for the default big-endian records, `<f4` for little-endian ones); the view
/// keeps the reader (and so the map) alive.
#[pyclass(
    module = "tensorvault._tensorvault",
    name = "BatchReader",
    frozen,
    sequence
)]
pub struct BatchReader {
    inner: RustBatchReader,
}

impl BatchReader {
    fn index(&self, i: isize) -> PyResult<usize> {
        let n = self.inner.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(PyIndexError::new_err(format!(
                "record {i} out of range (the batch has {n})"
            )));
        }
        Ok(j as usize)
    }

    fn record(&self, i: usize) -> PyResult<FusedEmbeddingRef<'_>> {
        self.inner.get(i).map_err(read_err)
    }
}

/// A read-only view of `bytes` (inside `slf`'s map) as a numpy array of `dtype`.
fn bytes_view<'py>(
    slf: &Bound<'py, BatchReader>,
    bytes: &[u8],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `bytes` lies inside the reader's read-only memory map (or its owned data),
    // which lives, unmoved and unmodified, as long as the reader object `slf`, installed
    // as the view's base.
    let raw = unsafe { readonly_view(slf.clone().into_any(), bytes, &[bytes.len()])? };
    raw.call_method1("view", (dtype,))
}

fn float_dtype(le: bool) -> &'static str {
    if le {
        "<f4"
    } else {
        ">f4"
    }
}

#[pymethods]
impl BatchReader {
    /// Open `path` (`NAME`, `NAME.cgeb` or `NAME.cgei`). `verify_data_hash` hashes the
    /// whole data file against the index on open; `verify_records` checks each record's
    /// content hash on access.
    #[new]
    #[pyo3(signature = (path, verify_data_hash=true, verify_records=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        verify_data_hash: bool,
        verify_records: bool,
    ) -> PyResult<Self> {
        let opts = BatchReaderOptions {
            verify_data_hash,
            verify_records,
        };
        let inner = py
            .detach(|| RustBatchReader::open_with(&path, opts))
            .map_err(read_err)?;
        Ok(BatchReader { inner })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __getitem__<'py>(slf: &Bound<'py, Self>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        let r = me.record(me.index(i)?)?;
        bytes_view(
            slf,
            r.vector().as_bytes(),
            float_dtype(r.header().le_payload()),
        )
    }

    /// Record `i` in full: `(vector, expert_weights, selected_experts,
    /// pipeline_latency_us, content_hash, aux_data)`; the three arrays are read-only views
    /// into the map, aux data is decompressed into `bytes` (or None).
    fn record_fields<'py>(slf: &Bound<'py, Self>, i: isize) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let r = me.record(me.index(i)?)?;
        let dt = float_dtype(r.header().le_payload());
        let aux = r
            .aux_data_decompressed(64 << 20)
            .map_err(|e| read_err(e.into()))?
            .map(|a| PyBytes::new(py, &a));
        PyTuple::new(
            py,
            [
                bytes_view(slf, r.vector().as_bytes(), dt)?,
                bytes_view(slf, r.expert_weights().as_bytes(), dt)?,
                bytes_view(slf, r.selected_experts(), "u1")?,
                r.pipeline_latency_us().into_pyobject(py)?.into_any(),
                r.content_hash().into_pyobject(py)?.into_any(),
                aux.map_or_else(|| py.None().into_bound(py), Bound::into_any),
            ],
        )
    }

    /// Every vector as one `(n, dimension)` native float32 array (a decoded copy).
    fn vectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let n = self.inner.len();
        let dim = if n == 0 {
            0
        } else {
            self.record(0)?.vector().len()
        };
        let mut buf = tensorvault_core::AlignedBuf::<f32>::zeroed(n * dim);
        py.detach(|| -> PyResult<()> {
            for (i, out) in buf
                .as_mut_slice()
                .chunks_mut(dim.max(1))
                .enumerate()
                .take(n)
            {
                let r = self.inner.get(i).map_err(read_err)?;
                if r.vector().len() != dim {
                    return Err(arg_err(format!(
                        "record {i} has dimension {}, record 0 has {dim}",
                        r.vector().len()
                    )));
                }
                r.vector().copy_to_slice(out);
            }
            Ok(())
        })?;
        f32_array(py, buf, &[n, dim])
    }

    /// Check the data-file hash, every record and every vector's alignment.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py.detach(|| self.inner.verify());
        let d = PyDict::new(py);
        d.set_item("valid", r.is_ok())?;
        d.set_item("records", r.records)?;
        d.set_item("stored_data_hash", r.stored_data_hash)?;
        d.set_item("computed_data_hash", r.computed_data_hash)?;
        d.set_item("bad_records", r.bad_records)?;
        d.set_item("misaligned_vectors", r.misaligned_vectors)?;
        Ok(d)
    }

    /// Record offsets in the data file (from the index).
    #[getter]
    fn offsets(&self) -> Vec<u64> {
        self.inner.index().offsets.clone()
    }

    /// `(address, length)` of the mapped data file, to check that views share its memory.
    #[getter]
    fn _data_span(&self) -> (usize, usize) {
        let d = self.inner.data();
        (d.as_ptr() as usize, d.len())
    }

    fn __repr__(&self) -> String {
        format!(
            "<tensorvault.BatchReader {:?}: {} records>",
            self.inner.data_path(),
            self.inner.len()
        )
    }
}
