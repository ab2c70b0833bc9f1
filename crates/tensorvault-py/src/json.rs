//! Python objects to and from `serde_json::Value`, through Python's own `json` module so
//! that what a caller passes as metadata is stored exactly as `json.dumps` renders it.

use pyo3::prelude::*;
use serde_json::Value;

use crate::errors::arg_err;

/// A JSON-serialisable Python object as a `Value`.
///
/// # Errors
/// `TypeError` from `json.dumps` for objects it cannot serialise; `InvalidArgumentError`
/// for NaN/infinity, which JSON cannot hold.
pub fn to_value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let py = obj.py();
    let text: String = py
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| arg_err(format!("{what} is not valid JSON: {e}")))
}

/// A `Value` as the Python object `json.loads` would give.
///
/// # Errors
/// Only if the `json` module fails.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Value::Null => Ok(py.None().into_bound(py)),
        Value::Bool(b) => Ok(b.into_pyobject(py)?.to_owned().into_any()),
        Value::String(s) => Ok(s.into_pyobject(py)?.into_any()),
        _ => {
            let text = serde_json::to_string(v).map_err(|e| arg_err(e.to_string()))?;
            py.import("json")?.call_method1("loads", (text,))
        }
    }
}
