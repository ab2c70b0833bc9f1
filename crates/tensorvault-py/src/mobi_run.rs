//! `MobiSession`: a MOBI model prepared for the reference runtime
//! (`tensorvault-mobi-runtime`), run on numpy arrays. `MobiModel.run` in
//! `tensorvault/_mobi.py` wraps it.

use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tensorvault_formats::mobi::{ConstantTensor, DataType};
use tensorvault_mobi_runtime::{Data, RuntimeError, Session, Tensor};

use std::path::PathBuf;

use tensorvault_formats::mobi::Model;

use crate::errors::{arg_err, mobi_err, read_err, Dir};
use crate::mobi::model_from;

fn run_err(e: RuntimeError) -> PyErr {
    match e {
        RuntimeError::Model(m) => mobi_err(m, Dir::Write),
        other => arg_err(other.to_string()),
    }
}

/// A model prepared once (weights dequantized to f32) and run many times.
#[pyclass(module = "tensorvault._tensorvault", name = "MobiSession", frozen)]
pub struct MobiSession {
    inner: Session,
}

#[pymethods]
impl MobiSession {
    /// Prepare a model given as the dict `MobiModel._to_dict()` makes; `int_tensors`
    /// maps the ids of integer constants (Gather indices, shapes) to int64 arrays.
    #[new]
    #[pyo3(signature = (model, int_tensors=None))]
    fn new(model: &Bound<'_, PyDict>, int_tensors: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut m = model_from(model)?;
        if let Some(ints) = int_tensors {
            for (k, v) in ints.iter() {
                let id: u32 = k.extract()?;
                let arr: PyReadonlyArrayDyn<'_, i64> = v.extract()?;
                let shape: Vec<u64> = arr.shape().iter().map(|&s| s as u64).collect();
                let data = arr
                    .as_array()
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                let t = ConstantTensor {
                    id,
                    dtype: DataType::I64,
                    shape,
                    quant: None,
                    gzip: false,
                    data,
                };
                match m.tensors.iter_mut().find(|t| t.id == id) {
                    Some(slot) => *slot = t,
                    None => return Err(arg_err(format!("int_tensors: no constant tensor {id}"))),
                }
            }
        }
        Ok(MobiSession {
            inner: Session::new(&m).map_err(run_err)?,
        })
    }

    /// Open a `.mobi` file and prepare it without going through Python objects: the
    /// file is memory-mapped and validated, f32 weights are used in place from the map
    /// (not copied), other weights are dequantized once.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let model = py.detach(|| Model::open(&path)).map_err(read_err)?;
        let inner = py.detach(|| Session::new(&model)).map_err(run_err)?;
        Ok(MobiSession { inner })
    }

    /// Where the weights live, in bytes: `{"in_place": .., "mapped": .., "converted": ..,
    /// "dropped": .., "packed": ..}` (in place = f32 weights used from the model's memory
    /// without a copy, mapped = the part of those in the file's memory map, converted =
    /// dequantized or copied and kept, dropped = dequantized straight into packed copies
    /// and never kept whole, packed = Conv2D / FullyConnected weights in the gemm's panel
    /// layout).
    #[getter]
    fn constant_memory<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.inner.constant_memory();
        let d = PyDict::new(py);
        d.set_item("in_place", m.in_place_bytes)?;
        d.set_item("mapped", m.mapped_bytes)?;
        d.set_item("converted", m.converted_bytes)?;
        d.set_item("dropped", m.dropped_bytes)?;
        d.set_item("packed", m.packed_bytes)?;
        Ok(d)
    }

    /// The graph input names, in order.
    #[getter]
    fn input_names(&self) -> Vec<String> {
        self.inner
            .input_names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The graph output names, in order.
    #[getter]
    fn output_names(&self) -> Vec<String> {
        self.inner
            .output_names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Run on `inputs` (name -> C-contiguous float32 or int64 array); returns
    /// name -> array for every graph output, in order.
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut feeds: Vec<(String, Tensor)> = Vec::with_capacity(inputs.len());
        for (k, v) in inputs.iter() {
            let name: String = k.extract()?;
            let shape_of = |s: &[usize]| s.to_vec();
            let t = if let Ok(a) = v.extract::<PyReadonlyArrayDyn<'_, f32>>() {
                Tensor::f32(shape_of(a.shape()), a.as_array().iter().copied().collect())
            } else if let Ok(a) = v.extract::<PyReadonlyArrayDyn<'_, i64>>() {
                Tensor::i64(shape_of(a.shape()), a.as_array().iter().copied().collect())
            } else {
                return Err(arg_err(format!(
                    "input {name:?}: expected a float32 or int64 numpy array"
                )));
            }
            .map_err(run_err)?;
            feeds.push((name, t));
        }
        let names: Vec<String> = feeds.iter().map(|(n, _)| n.clone()).collect();
        let refs: Vec<(&str, Tensor)> = names
            .iter()
            .map(String::as_str)
            .zip(feeds.into_iter().map(|(_, t)| t))
            .collect();
        let outs = py.detach(|| self.inner.run(&refs)).map_err(run_err)?;
        let d = PyDict::new(py);
        for (name, t) in outs {
            let shape = IxDyn(&t.shape);
            match t.data {
                // (A session never returns `Data::Packed`: it holds only weights no
                // output is; its empty values would fail the shape check, not panic.)
                ref f @ (Data::SharedF32(_) | Data::Packed(_)) => d.set_item(
                    name,
                    ArrayD::from_shape_vec(shape, f.as_f32().unwrap_or_default().to_vec())
                        .map_err(|e| arg_err(e.to_string()))?
                        .into_pyarray(py),
                )?,
                Data::F32(v) => d.set_item(
                    name,
                    ArrayD::from_shape_vec(shape, v)
                        .map_err(|e| arg_err(e.to_string()))?
                        .into_pyarray(py),
                )?,
                Data::I64(v) => d.set_item(
                    name,
                    ArrayD::from_shape_vec(shape, v)
                        .map_err(|e| arg_err(e.to_string()))?
                        .into_pyarray(py),
                )?,
            }
        }
        Ok(d)
    }
}
