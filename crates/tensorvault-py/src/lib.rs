//! Python bindings of tensorvault: the native module `tensorvault._tensorvault`.
//!
//! The public Python API lives in the pure-Python package `tensorvault` (under
//! `python/`), which gives the native functions the reference packages' names and
//! signatures, handles `framework=`/`device=` and documents everything; this crate does
//! the work with the GIL released and returns numpy arrays over Rust-owned memory
//! (see `src/array.rs`). Build it with maturin (`pip install ./crates/tensorvault-py`).

mod array;
mod cgeb;
mod cvc;
mod errors;
mod json;
mod kv;
mod mobi;
mod mobi_run;
mod onnx;
mod prefix;
mod registry;
mod store;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _tensorvault(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<array::RustBuffer>()?;
    m.add_class::<cvc::CvcFile>()?;
    m.add_class::<cvc::CvcWriter>()?;
    m.add_function(wrap_pyfunction!(cvc::cvc_pack, m)?)?;
    m.add_function(wrap_pyfunction!(cvc::cvc_pack_sections, m)?)?;
    m.add_function(wrap_pyfunction!(cvc::cvc_load_all, m)?)?;
    m.add_function(wrap_pyfunction!(cvc::cvc_validate, m)?)?;
    m.add_class::<cgeb::BatchReader>()?;
    m.add_function(wrap_pyfunction!(cgeb::cgeb_encode, m)?)?;
    m.add_function(wrap_pyfunction!(cgeb::cgeb_decode, m)?)?;
    m.add_function(wrap_pyfunction!(cgeb::cgeb_write_batch, m)?)?;
    m.add_class::<registry::Registry>()?;
    m.add_class::<registry::LoadedWeightsOwner>()?;
    m.add_class::<registry::PyModelRegistry>()?;
    m.add_class::<registry::LoadedModelOwner>()?;
    m.add_function(wrap_pyfunction!(registry::registry_load_checkpoint, m)?)?;
    m.add_class::<store::Store>()?;
    m.add_class::<kv::KvCache>()?;
    m.add_class::<prefix::PrefixCache>()?;
    m.add_class::<store::StoreBuffer>()?;
    m.add_function(wrap_pyfunction!(mobi::mobi_read, m)?)?;
    m.add_function(wrap_pyfunction!(mobi::mobi_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(mobi::mobi_example, m)?)?;
    m.add_function(wrap_pyfunction!(mobi::mobi_write, m)?)?;
    m.add_function(wrap_pyfunction!(mobi::mobi_to_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_convert, m)?)?;
    m.add_class::<mobi_run::MobiSession>()?;
    Ok(())
}
