//! ONNX import: `onnx_convert(src, dst, weights, gzip, batch)` converts an ONNX model to
//! a MOBI file (tensorvault-onnx) and returns what the import did; the Python layer
//! (`tensorvault/_onnx.py`) reads the written file back as a `MobiModel`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorvault_onnx::{convert_file, ImportOptions, OnnxError, WeightsMode};

use crate::errors::{arg_err, err, format_kind, Dir, Kind};

fn onnx_kind(e: &OnnxError) -> Kind {
    match e {
        OnnxError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Kind::NotFound
        }
        OnnxError::Io { .. } => Kind::Storage,
        OnnxError::Save { source, .. } => format_kind(source, Dir::Write),
        OnnxError::UnsupportedOpset { .. }
        | OnnxError::UnsupportedOp { .. }
        | OnnxError::UnsupportedAttribute { .. }
        | OnnxError::UnsupportedDtype { .. }
        | OnnxError::ExternalData { .. }
        | OnnxError::NotConstant { .. }
        | OnnxError::SymbolicDim { .. }
        | OnnxError::SymbolicShape { .. } => Kind::UnsupportedFormat,
        OnnxError::Mobi(_) => Kind::InvalidArgument,
        _ => Kind::InvalidFormat,
    }
}

/// Convert the ONNX model at `src` to MOBI at `dst` (written atomically; nothing is
/// written on error). Returns the import statistics as a dict.
#[pyfunction]
#[pyo3(signature = (src, dst, weights="f32", gzip=false, batch=None))]
pub fn onnx_convert<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    weights: &str,
    gzip: bool,
    batch: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let mode = WeightsMode::parse(weights).ok_or_else(|| {
        arg_err(format!(
            "unknown weights {weights:?}: \"f32\", \"fp16\", \"int16\" or \"int8\""
        ))
    })?;
    let opts = ImportOptions {
        weights: mode,
        pin_symbolic_dims: batch,
        ..ImportOptions::default()
    };
    let (model, s, size) = py
        .detach(|| convert_file(&src, &dst, &opts, gzip, &mut |_, _| {}))
        .map_err(|e| err(onnx_kind(&e), e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("opset", s.opset)?;
    d.set_item("nodes_in", s.nodes_in)?;
    d.set_item("ops_out", s.ops_out)?;
    d.set_item("initializers", s.initializers)?;
    d.set_item("constants", s.constants)?;
    d.set_item("folded_batchnorm", s.folded_batchnorm)?;
    d.set_item("folded_gemm", s.folded_gemm)?;
    d.set_item("folded_matmul_add", s.folded_matmul_add)?;
    d.set_item("folded_constant", s.folded_constant)?;
    d.set_item("folded_shape", s.folded_shape)?;
    d.set_item("removed", s.removed)?;
    d.set_item("coerced_softmax", s.coerced_softmax)?;
    d.set_item("tensors_quantized", s.tensors_quantized)?;
    d.set_item("tensors", model.tensors.len())?;
    d.set_item("mobi_bytes", size)?;
    Ok(d)
}
