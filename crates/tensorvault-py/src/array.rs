//! numpy arrays over Rust-owned memory, without a copy.
//!
//! Decoded data lives in an [`AlignedBuf`] (64-byte aligned, huge pages when large). The
//! buffer moves into a small Python object ([`RustBuffer`]) that becomes the array's
//! `base`, so numpy frees it through Rust when the last array over it is gone. Views into
//! read-only maps (CGEB batch files, registry checkpoints) use the object that owns the
//! map as `base` and are flagged read-only.

use numpy::ndarray::{ArrayView, ArrayViewMut, IxDyn};
use numpy::{PyArray, PyArrayDyn, PyArrayMethods};
use pyo3::prelude::*;
use tensorvault_core::{AlignedBuf, Tensor};

use crate::errors::{arg_err, err, Kind};

/// Memory owned by Rust that backs one or more numpy arrays (their `base`).
#[pyclass(module = "tensorvault._tensorvault", frozen)]
pub struct RustBuffer {
    buf: AlignedBuf<f32>,
}

#[pymethods]
impl RustBuffer {
    /// Bytes held.
    #[getter]
    fn nbytes(&self) -> usize {
        std::mem::size_of_val(self.buf.as_slice())
    }

    fn __repr__(&self) -> String {
        format!("<tensorvault RustBuffer: {} f32 values>", self.buf.len())
    }
}

/// An owned f32 buffer as a writable numpy array of `shape`, without a copy.
///
/// # Errors
/// `InvalidArgumentError` if `shape` does not hold `buf.len()` values.
pub fn f32_array<'py>(
    py: Python<'py>,
    buf: AlignedBuf<f32>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    if shape.iter().product::<usize>() != buf.len() {
        return Err(arg_err(format!(
            "shape {shape:?} does not hold {} values",
            buf.len()
        )));
    }
    let mut buf = buf;
    let ptr = buf.as_mut_slice().as_mut_ptr();
    let len = buf.len();
    let owner = Bound::new(py, RustBuffer { buf })?;
    // SAFETY: `ptr` points at `len` initialised f32 values owned by the AlignedBuf now
    // inside `owner`. Moving the AlignedBuf into the Python object moved only its handle
    // (the heap block or map does not move), the buffer is never resized or touched by Rust
    // again, and `owner` is installed as the array's base object, so the memory outlives
    // every array (and view) numpy derives from it.
    let view = unsafe { ArrayViewMut::from_shape_ptr(IxDyn(shape), ptr) };
    debug_assert_eq!(view.len(), len);
    // SAFETY: as above: `owner` keeps the memory alive and unmoved for the array's life.
    Ok(unsafe { PyArray::borrow_from_array(&view, owner.into_any()) })
}

/// A decoded f32 tensor as a numpy array of its own shape, without a copy.
///
/// # Errors
/// `InvalidFormatError` if the tensor is not f32 (a bug).
pub fn tensor_array<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let shape: Vec<usize> = t.shape().dims().to_vec();
    let buf = t
        .into_buf::<f32>()
        .map_err(|e| err(Kind::InvalidFormat, e.to_string()))?;
    f32_array(py, buf, &shape)
}

/// A read-only numpy view of `data` (which `owner` keeps alive and unchanged).
///
/// # Safety
/// `data` must stay valid, unmoved and unmodified for as long as `owner` lives (e.g. it
/// points into a read-only memory map or an immutable buffer held by `owner`).
pub unsafe fn readonly_view<'py, T: numpy::Element>(
    owner: Bound<'py, PyAny>,
    data: &[T],
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    if shape.iter().product::<usize>() != data.len() {
        return Err(arg_err(format!(
            "shape {shape:?} does not hold {} values",
            data.len()
        )));
    }
    let view = ArrayView::from_shape(IxDyn(shape), data)
        .map_err(|e| err(Kind::InvalidFormat, e.to_string()))?;
    // SAFETY: the caller guarantees `owner` keeps `data` alive and unchanged; it becomes
    // the array's base object.
    let arr = unsafe { PyArray::borrow_from_array(&view, owner) };
    arr.readwrite().make_nonwriteable();
    Ok(arr)
}
