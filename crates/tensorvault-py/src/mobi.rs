//! MOBI model files: read into plain Python structures (dicts, lists, numpy arrays) and
//! write from the same structures. The Python layer (`tensorvault/_mobi.py`) wraps them
//! in dataclasses.

use std::path::PathBuf;

use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensorvault_core::AlignedBuf;
use tensorvault_formats::mobi::{
    models, read_with, ConstantTensor, DataType, Dim, IoSpec, Metadata, Model, Operator,
    OperatorType, ParamValue, QuantTarget, Quantization, ReadOptions, WriteOptions,
};

use crate::array::f32_array;
use crate::errors::{arg_err, mobi_err, read_err, write_err, Dir};

fn dtype_arg(name: &str) -> PyResult<DataType> {
    DataType::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| arg_err(format!("unknown dtype {name:?}")))
}

fn quant_arg(name: Option<&str>) -> PyResult<Option<QuantTarget>> {
    Ok(match name {
        None | Some("none") => None,
        Some("fp16") => Some(QuantTarget::Fp16),
        Some("int8") => Some(QuantTarget::Int8),
        Some("int8-per-tensor") => Some(QuantTarget::Int8PerTensor),
        Some("uint8") => Some(QuantTarget::UInt8),
        Some("int16") => Some(QuantTarget::Int16),
        Some(other) => {
            return Err(arg_err(format!(
                "unknown quantize {other:?}: None, \"fp16\", \"int8\", \"int8-per-tensor\", \"uint8\" or \"int16\""
            )))
        }
    })
}

fn io_list<'py>(py: Python<'py>, specs: &[IoSpec]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for s in specs {
        let d = PyDict::new(py);
        d.set_item("name", &s.name)?;
        d.set_item("dtype", s.dtype.name())?;
        let shape = PyList::empty(py);
        for dim in &s.shape {
            match dim {
                Dim::Fixed(n) => shape.append(n)?,
                Dim::Symbolic(name) => shape.append(name)?,
            }
        }
        d.set_item("shape", shape)?;
        l.append(d)?;
    }
    Ok(l)
}

fn param_py<'py>(py: Python<'py>, v: &ParamValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ParamValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ParamValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ParamValue::Str(s) => s.into_pyobject(py)?.into_any(),
        ParamValue::Ints(v) => PyList::new(py, v)?.into_any(),
        ParamValue::Floats(v) => PyList::new(py, v)?.into_any(),
    })
}

fn model_dict<'py>(py: Python<'py>, m: Model, version: u16) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("format_version", version)?;
    d.set_item("value_names", m.value_names.clone())?;
    d.set_item("name", &m.metadata.name)?;
    d.set_item("framework_version", m.metadata.framework_version)?;
    d.set_item("created_unix", m.metadata.created_unix)?;
    d.set_item("inputs", io_list(py, &m.inputs)?)?;
    d.set_item("outputs", io_list(py, &m.outputs)?)?;
    let tensors = PyList::empty(py);
    for t in &m.tensors {
        let values = t.to_f32().map_err(|e| mobi_err(e, Dir::Read))?;
        let shape: Vec<usize> = t
            .shape
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| arg_err(format!("tensor {}: shape too large", t.id)))?;
        let td = PyDict::new(py);
        td.set_item("id", t.id)?;
        td.set_item("dtype", t.dtype.name())?;
        td.set_item("shape", t.shape.clone())?;
        td.set_item("quantization", t.quant_kind())?;
        match &t.quant {
            Some(Quantization::PerTensor { scale, zero_point }) => {
                td.set_item("scale", scale)?;
                td.set_item("zero_point", zero_point)?;
            }
            Some(Quantization::PerAxis {
                axis,
                scales,
                zero_points,
            }) => {
                td.set_item("axis", axis)?;
                td.set_item("scales", scales.clone())?;
                td.set_item("zero_points", zero_points.clone())?;
            }
            None => {}
        }
        td.set_item("gzip", t.gzip)?;
        td.set_item(
            "values",
            f32_array(py, AlignedBuf::from_slice(&values), &shape)?,
        )?;
        tensors.append(td)?;
    }
    d.set_item("tensors", tensors)?;
    let ops = PyList::empty(py);
    for o in &m.operators {
        let od = PyDict::new(py);
        od.set_item("op", o.op.name())?;
        od.set_item("inputs", o.inputs.clone())?;
        od.set_item("outputs", o.outputs.clone())?;
        let params = PyDict::new(py);
        for (k, v) in &o.params {
            params.set_item(k, param_py(py, v)?)?;
        }
        od.set_item("params", params)?;
        ops.append(od)?;
    }
    d.set_item("operators", ops)?;
    d.set_item("optimized", m.optimized)?;
    Ok(d)
}

/// Read and validate a `.mobi` file (every tensor dequantized to float32).
#[pyfunction]
pub fn mobi_read(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let (h, m) = py
        .detach(|| Model::open_with_header(&path))
        .map_err(read_err)?;
    model_dict(py, m, h.version)
}

/// Read and validate `.mobi` bytes.
#[pyfunction]
pub fn mobi_from_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let (h, m) = py
        .detach(|| read_with(data, &ReadOptions::default()))
        .map_err(|e| mobi_err(e, Dir::Read))?;
    model_dict(py, m, h.version)
}

/// A built-in example model (`"lenet5"` or `"cifar10"`) as the same structure.
#[pyfunction]
#[pyo3(signature = (name, seed=1))]
pub fn mobi_example<'py>(py: Python<'py>, name: &str, seed: u64) -> PyResult<Bound<'py, PyDict>> {
    let m = match name {
        "lenet5" => models::lenet5(seed),
        "cifar10" => models::cifar10_cnn(seed),
        other => {
            return Err(arg_err(format!(
                "unknown example {other:?}: \"lenet5\" or \"cifar10\""
            )))
        }
    }
    .map_err(|e| mobi_err(e, Dir::Write))?;
    model_dict(py, m, tensorvault_formats::mobi::layout::VERSION)
}

fn get<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    d.get_item(key)?
        .ok_or_else(|| arg_err(format!("missing key {key:?}")))?
        .extract::<T>()
        .map_err(|e| {
            let e: PyErr = e.into();
            arg_err(format!("{key}: {e}"))
        })
}

fn dim(v: &Bound<'_, PyAny>) -> PyResult<Dim> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(Dim::Fixed(n));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(Dim::Symbolic(s));
    }
    if let Ok(-1) = v.extract::<i64>() {
        return Ok(Dim::Symbolic(String::new()));
    }
    Err(arg_err(format!(
        "shape entry {v}: use a size >= 0, a symbolic name (str) or -1"
    )))
}

fn io_specs(list: Vec<Bound<'_, PyDict>>) -> PyResult<Vec<IoSpec>> {
    list.iter()
        .map(|d| {
            let shape: Vec<Bound<'_, PyAny>> = get(d, "shape")?;
            Ok(IoSpec {
                name: get(d, "name")?,
                dtype: dtype_arg(&get::<String>(d, "dtype")?)?,
                shape: shape.iter().map(dim).collect::<PyResult<_>>()?,
            })
        })
        .collect()
}

fn param_value(v: &Bound<'_, PyAny>) -> PyResult<ParamValue> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(ParamValue::Int(i64::from(b)));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(ParamValue::Int(i));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(ParamValue::Float(f));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(ParamValue::Str(s));
    }
    if let Ok(i) = v.extract::<Vec<i64>>() {
        return Ok(ParamValue::Ints(i));
    }
    if let Ok(f) = v.extract::<Vec<f64>>() {
        return Ok(ParamValue::Floats(f));
    }
    Err(arg_err(format!(
        "operator parameter {v}: use an int, float, str, or a list of ints or floats"
    )))
}

pub(crate) fn model_from(d: &Bound<'_, PyDict>) -> PyResult<Model> {
    let mut tensors = Vec::new();
    for t in get::<Vec<Bound<'_, PyDict>>>(d, "tensors")? {
        let id: u32 = get(&t, "id")?;
        let arr: PyReadonlyArrayDyn<'_, f32> = get(&t, "values")?;
        let shape: Vec<u64> = arr.shape().iter().map(|&s| s as u64).collect();
        let values: Vec<f32> = arr.as_array().iter().copied().collect();
        tensors.push(
            ConstantTensor::from_f32(id, &shape, &values).map_err(|e| mobi_err(e, Dir::Write))?,
        );
    }
    let mut operators = Vec::new();
    for o in get::<Vec<Bound<'_, PyDict>>>(d, "operators")? {
        let name: String = get(&o, "op")?;
        let op = OperatorType::ALL
            .iter()
            .copied()
            .find(|t| t.name() == name)
            .ok_or_else(|| arg_err(format!("unknown operator {name:?}")))?;
        let params: Bound<'_, PyDict> = get(&o, "params")?;
        let params = params
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, param_value(&v)?)))
            .collect::<PyResult<Vec<_>>>()?;
        operators.push(Operator {
            op,
            inputs: get(&o, "inputs")?,
            outputs: get(&o, "outputs")?,
            params,
        });
    }
    Ok(Model {
        metadata: Metadata {
            name: get(d, "name")?,
            framework_version: get(d, "framework_version")?,
            created_unix: get(d, "created_unix")?,
        },
        inputs: io_specs(get(d, "inputs")?)?,
        outputs: io_specs(get(d, "outputs")?)?,
        tensors,
        operators,
        optimized: get(d, "optimized")?,
        value_names: match d.get_item("value_names")? {
            Some(v) if !v.is_none() => v
                .extract::<std::collections::BTreeMap<u32, String>>()
                .map_err(|e| arg_err(format!("value_names: {e}")))?,
            _ => Default::default(),
        },
    })
}

/// Write a model structure to `path` (atomically), optionally quantizing every tensor
/// and gzip-compressing payloads. Returns the bytes written.
#[pyfunction]
#[pyo3(signature = (path, model, quantize=None, gzip=false))]
pub fn mobi_write(
    py: Python<'_>,
    path: PathBuf,
    model: &Bound<'_, PyDict>,
    quantize: Option<&str>,
    gzip: bool,
) -> PyResult<u64> {
    let m = model_from(model)?;
    let opts = WriteOptions {
        quantize: quant_arg(quantize)?,
        gzip,
    };
    py.detach(|| m.save(&path, &opts)).map_err(write_err)
}

/// Encode a model structure to `.mobi` bytes.
#[pyfunction]
#[pyo3(signature = (model, quantize=None, gzip=false))]
pub fn mobi_to_bytes<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyDict>,
    quantize: Option<&str>,
    gzip: bool,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let m = model_from(model)?;
    let opts = WriteOptions {
        quantize: quant_arg(quantize)?,
        gzip,
    };
    let bytes = py
        .detach(|| m.to_bytes_with(&opts))
        .map_err(|e| mobi_err(e, Dir::Write))?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}
