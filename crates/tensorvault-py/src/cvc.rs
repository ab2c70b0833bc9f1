//! CVC (compressed vector collections): pack, load (whole, rows, chunks, filters), info,
//! validation, and a streaming writer. The Python layer (`tensorvault/_cvc.py`) gives these
//! the reference package's names and signatures.

use std::ops::Range;
use std::path::PathBuf;

use numpy::{PyArrayDyn, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;
use tensorvault_core::Tensor;
use tensorvault_formats::cvc::{
    Compression, CvcReader, CvcWriter as RustCvcWriter, FileSource, Framing, PackOptions,
    PackSummary, SectionSpec,
};
use tensorvault_formats::FormatError;

use crate::array::tensor_array;
use crate::errors::{arg_err, err, read_err, write_err, Kind};
use crate::json;

/// Parse a compression argument.
fn compression_arg(name: &str) -> PyResult<Compression> {
    Compression::parse(name, "compression").map_err(|_| {
        arg_err(format!(
            "unknown compression {name:?}: use \"fp16\", \"int8\", \"bf16\" or \"int4\" \
             (decompressed's \"lossless\" is not implemented by tensorvault)"
        ))
    })
}

fn framing_arg(name: &str) -> PyResult<Framing> {
    match name {
        "v1" | "v1.0" => Ok(Framing::V1),
        "v0" | "v0.1" => Ok(Framing::V0),
        other => Err(arg_err(format!(
            "unknown format {other:?}: use \"v1\" (default, decompressed 2.x) or \"v0\" (legacy)"
        ))),
    }
}

/// Borrow a 2-D float32 array as a contiguous slice (the Python layer converts other
/// dtypes and layouts first).
fn rows_of<'a>(arr: &'a PyReadonlyArray2<'_, f32>) -> PyResult<(&'a [f32], usize)> {
    let dim = arr.shape()[1];
    let values = arr
        .as_slice()
        .map_err(|_| arg_err("vectors must be a C-contiguous float32 array"))?;
    Ok((values, dim))
}

fn metadata_list(list: Option<Vec<Bound<'_, PyAny>>>, what: &str) -> PyResult<Option<Vec<Value>>> {
    list.map(|items| {
        items
            .iter()
            .enumerate()
            .map(|(i, m)| json::to_value(m, &format!("{what}[{i}]")))
            .collect()
    })
    .transpose()
}

fn summary_dict<'py>(py: Python<'py>, s: &PackSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes", s.bytes)?;
    d.set_item("rows", s.rows)?;
    d.set_item("chunks", s.chunks)?;
    d.set_item("header_len", s.header_len)?;
    Ok(d)
}

/// Pack a 2-D float32 array into a `.cvc` file (atomic write).
#[pyfunction]
#[pyo3(signature = (vectors, output_path, compression="fp16", chunk_size=100_000,
    chunk_metadata=None, mmap_optimized=false, format="v1", chunk_compression=None, sync=true,
    reference_exact=false))]
#[allow(clippy::too_many_arguments)] // reason: mirrors the Python keyword arguments
pub fn cvc_pack<'py>(
    py: Python<'py>,
    vectors: PyReadonlyArray2<'py, f32>,
    output_path: PathBuf,
    compression: &str,
    chunk_size: u64,
    chunk_metadata: Option<Vec<Bound<'py, PyAny>>>,
    mmap_optimized: bool,
    format: &str,
    chunk_compression: Option<Vec<String>>,
    sync: bool,
    reference_exact: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (values, dim) = rows_of(&vectors)?;
    let opts = PackOptions {
        compression: compression_arg(compression)?,
        chunk_size,
        framing: framing_arg(format)?,
        mmap_optimized,
        chunk_metadata: metadata_list(chunk_metadata, "chunk_metadata")?,
        chunk_compression: chunk_compression
            .map(|v| v.iter().map(|c| compression_arg(c)).collect())
            .transpose()?,
        sections: None,
        progress: None,
        sync,
        reference_exact,
    };
    let summary = py
        .detach(|| tensorvault_formats::cvc::pack(&output_path, values, dim, &opts))
        .map_err(write_err)?;
    summary_dict(py, &summary)
}

/// Pack sections `[(array, metadata), ...]` into one file, streaming (no concatenation).
#[pyfunction]
#[pyo3(signature = (sections, output_path, compression="fp16", chunk_size=100_000, format="v1", sync=true, reference_exact=false))]
#[allow(clippy::too_many_arguments)] // reason: mirrors the Python keyword arguments
pub fn cvc_pack_sections<'py>(
    py: Python<'py>,
    sections: Vec<(PyReadonlyArray2<'py, f32>, Bound<'py, PyAny>)>,
    output_path: PathBuf,
    compression: &str,
    chunk_size: u64,
    format: &str,
    sync: bool,
    reference_exact: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if sections.is_empty() {
        return Err(arg_err("sections cannot be empty"));
    }
    let dim = sections[0].0.shape()[1];
    let mut specs = Vec::with_capacity(sections.len());
    for (i, (arr, meta)) in sections.iter().enumerate() {
        if arr.shape()[1] != dim {
            return Err(arg_err(format!(
                "all arrays must have the same dimension: section 0 has {dim}, section {i} has {}",
                arr.shape()[1]
            )));
        }
        specs.push(SectionSpec {
            rows: arr.shape()[0] as u64,
            metadata: json::to_value(meta, &format!("sections[{i}] metadata"))?,
        });
    }
    let slices = sections
        .iter()
        .map(|(a, _)| rows_of(a).map(|(v, _)| v))
        .collect::<PyResult<Vec<&[f32]>>>()?;
    let opts = PackOptions {
        compression: compression_arg(compression)?,
        chunk_size,
        framing: framing_arg(format)?,
        sections: Some(specs),
        sync,
        reference_exact,
        ..PackOptions::default()
    };
    let summary = py
        .detach(|| {
            let mut w = RustCvcWriter::create(&output_path, dim, opts)?;
            for s in &slices {
                w.write_rows(s)?;
            }
            w.finish()
        })
        .map_err(write_err)?;
    summary_dict(py, &summary)
}

/// A CVC file opened for reading (header and chunk table validated on open).
///
/// Loads decode in parallel with the GIL released and return float32 numpy arrays that
/// own their (Rust-allocated) memory.
#[pyclass(module = "tensorvault._tensorvault", name = "CvcFile", frozen)]
pub struct CvcFile {
    reader: CvcReader<FileSource>,
}

impl CvcFile {
    fn rows_range(&self, rows: (u64, u64)) -> Range<u64> {
        rows.0..rows.1
    }

    /// Rows `[start, end)` of every chunk that failed its CRC, clipped to `range`.
    fn corrupt_rows(&self, range: &Range<u64>) -> Result<Vec<CorruptRows>, FormatError> {
        let report = self.reader.verify()?;
        Ok(report
            .corrupt
            .iter()
            .filter(|c| c.rows.start < range.end && c.rows.end > range.start)
            .map(|c| (c.index, c.rows.start, c.rows.end))
            .collect())
    }
}

/// A chunk that failed its CRC: `(chunk index, first row, end row)`.
type CorruptRows = (usize, u64, u64);

/// Fill rows `[lo, hi)` (absolute) of a tensor holding rows `range` with `value`.
fn fill_rows(t: &mut Tensor, range: &Range<u64>, lo: u64, hi: u64, dim: u64, value: f32) {
    let lo = lo.max(range.start) - range.start;
    let hi = hi.min(range.end) - range.start;
    if let Ok(v) = t.as_mut_slice::<f32>() {
        let (a, b) = ((lo * dim) as usize, (hi * dim) as usize);
        if let Some(s) = v.get_mut(a..b) {
            s.fill(value);
        }
    }
}

#[pymethods]
impl CvcFile {
    /// Open and validate `path`.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let reader = py.detach(|| CvcReader::open(&path)).map_err(read_err)?;
        Ok(CvcFile { reader })
    }

    /// Number of vectors.
    #[getter]
    fn num_vectors(&self) -> u64 {
        self.reader.num_vectors()
    }

    /// Values per vector.
    #[getter]
    fn dimension(&self) -> u64 {
        self.reader.dimension()
    }

    /// Number of chunks.
    #[getter]
    fn num_chunks(&self) -> usize {
        self.reader.chunks().len()
    }

    /// `(major, minor)`: `(1, 0)` for v1.0 files, `(0, 1)` for legacy files (as the
    /// reference's `detect_version`).
    #[getter]
    fn version(&self) -> (u16, u16) {
        match self.reader.header().framing {
            Framing::V0 => (0, 1),
            _ => self.reader.header().version,
        }
    }

    /// Load rows `[start, end)` (all rows when `rows` is None). With `fill_value` set,
    /// chunks that fail their CRC are filled with it instead of raising; the second item
    /// lists them as `(chunk, first row, end row)`.
    #[pyo3(signature = (rows=None, fill_value=None))]
    fn load<'py>(
        &self,
        py: Python<'py>,
        rows: Option<(u64, u64)>,
        fill_value: Option<f32>,
    ) -> PyResult<(Bound<'py, PyArrayDyn<f32>>, Vec<CorruptRows>)> {
        let range = rows.map_or(0..self.reader.num_vectors(), |r| self.rows_range(r));
        let (t, corrupt) = py
            .detach(|| -> Result<_, FormatError> {
                match self.reader.load_rows(range.clone()) {
                    Ok(t) => Ok((t, Vec::new())),
                    Err(FormatError::ChecksumMismatch { .. }) if fill_value.is_some() => {
                        let corrupt = self.corrupt_rows(&range)?;
                        let unchecked = CvcReader::open(self.reader.name())?.with_checksums(false);
                        let mut t = unchecked.load_rows(range.clone())?;
                        let dim = self.reader.dimension();
                        for &(_, lo, hi) in &corrupt {
                            fill_rows(&mut t, &range, lo, hi, dim, fill_value.unwrap_or(0.0));
                        }
                        Ok((t, corrupt))
                    }
                    Err(e) => Err(e),
                }
            })
            .map_err(read_err)?;
        Ok((tensor_array(py, t)?, corrupt))
    }

    /// Load the given chunks, concatenated in the order given.
    fn load_chunks<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<usize>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let t = py
            .detach(|| self.reader.load_chunks(&indices))
            .map_err(read_err)?;
        tensor_array(py, t)
    }

    /// Load the rows of every section whose `metadata[key] == value`.
    fn load_section<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let value = json::to_value(value, "section_value")?;
        if self.reader.section_rows(key, &value).is_empty() {
            let shown = value.to_string();
            return Err(arg_err(if self.reader.header().sections.is_empty() {
                "file does not have section metadata (write it with pack_cvc_sections)".to_owned()
            } else {
                format!("no sections found with {key}={shown}")
            }));
        }
        let t = py
            .detach(|| self.reader.load_section(key, &value))
            .map_err(read_err)?;
        tensor_array(py, t)
    }

    /// Indices of the chunks whose `metadata[key] == value`.
    fn chunks_where(&self, key: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let value = json::to_value(value, "metadata_value")?;
        Ok(self.reader.chunks_where_metadata(key, &value))
    }

    /// The reference's `get_cvc_info` dictionary (plus `version` and per-chunk
    /// `compression`).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = self.reader.header();
        let d = PyDict::new(py);
        d.set_item("format_type", "single")?;
        d.set_item("num_vectors", h.num_vectors)?;
        d.set_item("num_chunks", h.chunks.len())?;
        d.set_item("file_size", self.reader.file_len())?;
        d.set_item("dimension", h.dimension)?;
        d.set_item("compression", h.compression.name())?;
        d.set_item("version", self.version())?;
        if !h.sections.is_empty() {
            let secs = PyList::empty(py);
            for s in &h.sections {
                let sd = PyDict::new(py);
                sd.set_item("start_index", s.start_index)?;
                sd.set_item("end_index", s.end_index)?;
                sd.set_item("num_vectors", s.end_index - s.start_index)?;
                sd.set_item("metadata", json::to_py(py, &s.metadata)?)?;
                secs.append(sd)?;
            }
            d.set_item("sections", secs)?;
        }
        let chunks = PyList::empty(py);
        for (i, c) in h.chunks.iter().enumerate() {
            let cd = PyDict::new(py);
            cd.set_item("index", i)?;
            cd.set_item("rows", c.rows)?;
            cd.set_item(
                "metadata",
                match &c.metadata {
                    Some(m) => json::to_py(py, m)?,
                    None => py.None().into_bound(py),
                },
            )?;
            cd.set_item("compression", c.compression.name())?;
            chunks.append(cd)?;
        }
        d.set_item("chunks", chunks)?;
        Ok(d)
    }

    /// Check every chunk's CRC-32: the reference's `validate_cvc_integrity` dictionary.
    #[pyo3(signature = (details=false))]
    fn integrity<'py>(&self, py: Python<'py>, details: bool) -> PyResult<Bound<'py, PyDict>> {
        let report = py.detach(|| self.reader.verify()).map_err(read_err)?;
        let d = PyDict::new(py);
        let chunks = self.reader.chunks();
        d.set_item(
            "valid",
            report.is_ok() && report.checksummed == chunks.len(),
        )?;
        d.set_item("total_chunks", chunks.len())?;
        d.set_item(
            "corrupted_chunks",
            report.corrupt.iter().map(|c| c.index).collect::<Vec<_>>(),
        )?;
        d.set_item(
            "corrupted_ranges",
            report
                .corrupt
                .iter()
                .map(|c| (c.rows.start, c.rows.end))
                .collect::<Vec<_>>(),
        )?;
        if report.checksummed < chunks.len() {
            d.set_item(
                "error",
                "cannot validate integrity of a v0.x file (no checksums); rewrite it as v1.0",
            )?;
        }
        if details {
            let list = PyList::empty(py);
            for c in chunks {
                let bad = report.corrupt.iter().find(|x| x.index == c.index);
                let stored = c.crc.unwrap_or_default();
                let actual = bad.map_or(stored, |b| b.computed);
                let cd = PyDict::new(py);
                cd.set_item("chunk_index", c.index)?;
                cd.set_item("valid", bad.is_none())?;
                cd.set_item("expected_crc32", format!("{stored:08x}"))?;
                cd.set_item("actual_crc32", format!("{actual:08x}"))?;
                cd.set_item("vector_range", (c.row_start, c.row_start + c.rows))?;
                list.append(cd)?;
            }
            d.set_item("checksum_details", list)?;
        } else {
            d.set_item("checksum_details", py.None())?;
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "<tensorvault.CvcFile {:?}: {} x {} in {} chunks>",
            self.reader.name(),
            self.reader.num_vectors(),
            self.reader.dimension(),
            self.reader.chunks().len()
        )
    }
}

/// Load a whole file through a memory map (the fastest path), with CRC checks.
#[pyfunction]
pub fn cvc_load_all<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let t = py
        .detach(|| CvcReader::open_mmap(&path)?.load_all())
        .map_err(read_err)?;
    tensor_array(py, t)
}

/// The reference's `validate_cvc` report (structure only; see `integrity` for CRCs).
#[pyfunction]
pub fn cvc_validate<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let size = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(err(
                Kind::NotFound,
                format!("file not found: {}", path.display()),
            ))
        }
        Err(e) => return Err(err(Kind::Storage, format!("{}: {e}", path.display()))),
    };
    let d = PyDict::new(py);
    d.set_item("size_bytes", size)?;
    match py.detach(|| CvcReader::open(&path)) {
        Ok(r) => {
            let h = r.header();
            let (version, warnings) = match h.framing {
                Framing::V0 => (
                    "v0.1".to_owned(),
                    vec!["Legacy v0.x format detected. Consider upgrading to v1.0"],
                ),
                _ => (format!("v{}.{}", h.version.0, h.version.1), Vec::new()),
            };
            d.set_item("valid", true)?;
            d.set_item("version", version)?;
            d.set_item("num_vectors", h.num_vectors)?;
            d.set_item("dimension", h.dimension)?;
            d.set_item("compression", h.compression.name())?;
            d.set_item("num_chunks", h.chunks.len())?;
            d.set_item("errors", PyList::empty(py))?;
            d.set_item("warnings", warnings)?;
        }
        Err(e) => {
            if let FormatError::Io { source, .. } = &e {
                if source.kind() != std::io::ErrorKind::NotFound {
                    return Err(read_err(e));
                }
            }
            d.set_item("valid", false)?;
            d.set_item("version", "unknown")?;
            d.set_item("errors", vec![e.to_string()])?;
            d.set_item("warnings", PyList::empty(py))?;
        }
    }
    Ok(d)
}

/// A streaming CVC writer: rows arrive in batches of any size, memory stays at one chunk.
#[pyclass(module = "tensorvault._tensorvault", name = "CvcWriter")]
pub struct CvcWriter {
    inner: Option<RustCvcWriter>,
    dim: usize,
}

impl CvcWriter {
    fn live(&mut self) -> PyResult<&mut RustCvcWriter> {
        self.inner
            .as_mut()
            .ok_or_else(|| arg_err("the writer is closed"))
    }

    fn check_dim(&self, arr: &PyReadonlyArray2<'_, f32>) -> PyResult<()> {
        if arr.shape()[1] != self.dim {
            return Err(arg_err(format!(
                "rows have {} values, the writer's dimension is {}",
                arr.shape()[1],
                self.dim
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl CvcWriter {
    /// Start writing `dimension`-wide vectors to `path` (nothing appears there until
    /// `close()` commits the file).
    #[new]
    #[pyo3(signature = (path, dimension, compression="fp16", chunk_size=100_000,
        chunk_metadata=None, mmap_optimized=false, format="v1", sync=true, reference_exact=false))]
    #[allow(clippy::too_many_arguments)] // reason: mirrors the Python keyword arguments
    fn new(
        path: PathBuf,
        dimension: usize,
        compression: &str,
        chunk_size: u64,
        chunk_metadata: Option<Vec<Bound<'_, PyAny>>>,
        mmap_optimized: bool,
        format: &str,
        sync: bool,
        reference_exact: bool,
    ) -> PyResult<Self> {
        let opts = PackOptions {
            compression: compression_arg(compression)?,
            chunk_size,
            framing: framing_arg(format)?,
            mmap_optimized,
            chunk_metadata: metadata_list(chunk_metadata, "chunk_metadata")?,
            sync,
            reference_exact,
            ..PackOptions::default()
        };
        let inner = RustCvcWriter::create(&path, dimension, opts).map_err(write_err)?;
        Ok(CvcWriter {
            inner: Some(inner),
            dim: dimension,
        })
    }

    /// Rows accepted so far.
    #[getter]
    fn rows(&self) -> u64 {
        self.inner.as_ref().map_or(0, RustCvcWriter::rows)
    }

    /// Append rows (a `k x dimension` float32 array).
    fn write(&mut self, py: Python<'_>, rows: PyReadonlyArray2<'_, f32>) -> PyResult<()> {
        self.check_dim(&rows)?;
        let (values, _) = rows_of(&rows)?;
        let w = self.live()?;
        py.detach(|| w.write_rows(values)).map_err(write_err)
    }

    /// Write rows as one chunk of their own, optionally with its own compression and
    /// metadata.
    #[pyo3(signature = (rows, compression=None, metadata=None))]
    fn write_chunk(
        &mut self,
        py: Python<'_>,
        rows: PyReadonlyArray2<'_, f32>,
        compression: Option<&str>,
        metadata: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.check_dim(&rows)?;
        let (values, _) = rows_of(&rows)?;
        let compression = compression.map(compression_arg).transpose()?;
        let metadata = metadata
            .map(|m| json::to_value(&m, "metadata"))
            .transpose()?;
        let w = self.live()?;
        py.detach(|| w.write_chunk(values, compression, metadata))
            .map_err(write_err)
    }

    /// Write the header, append the chunks and commit the file atomically.
    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let w = self
            .inner
            .take()
            .ok_or_else(|| arg_err("the writer is already closed"))?;
        let summary = py.detach(|| w.finish()).map_err(write_err)?;
        summary_dict(py, &summary)
    }

    /// Abandon the file: nothing is written at the destination.
    fn abort(&mut self) {
        self.inner = None;
    }

    /// Whether the writer still accepts rows.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }
}
