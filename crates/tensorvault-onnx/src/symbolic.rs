//! Symbolic input dimensions (a batch `N`), kept symbolic in the MOBI file (format v2).
//!
//! The importer computes static shapes, so a graph with symbolic inputs is walked twice,
//! with every symbolic dimension pinned to [`PIN_A`] and then to [`PIN_B`]. The two
//! models must agree except where a value depends on the symbolic dimensions:
//!
//! * I/O spec dims that differ become `Dim::Symbolic` (named by the ONNX `dim_param`,
//!   unnamed when the ONNX graph gives none);
//! * a Reshape `shape` entry that differs becomes `-1` (inferred at run time), when it
//!   is the only entry that differs;
//! * anything else that differs (a constant computed from a symbolic shape, another
//!   shape parameter, the graph structure) is [`OnnxError::SymbolicShape`]: such a graph
//!   needs its dims pinned (`--batch N`).

use tensorvault_formats::mobi::{Dim, IoSpec, Model, OperatorType, ParamValue};

use crate::error::OnnxError;
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{GraphProto, ValueInfoProto};

/// First size symbolic dimensions are pinned to (not 1: size-1 dims broadcast).
pub(crate) const PIN_A: u64 = 2;
/// Second size.
pub(crate) const PIN_B: u64 = 3;

/// Per dim of a value info: `Some(name)` for a symbolic or unknown dim (name possibly
/// empty), `None` for a fixed one.
fn symbols(v: &ValueInfoProto) -> Vec<Option<String>> {
    let Some(TypeValue::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Vec::new();
    };
    t.shape
        .as_ref()
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(DimValue::DimValue(_)) => None,
                    Some(DimValue::DimParam(p)) => Some(p.clone()),
                    None => Some(String::new()),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a graph input that is not an initializer has a symbolic or unknown dim.
pub(crate) fn has_symbolic_inputs(g: &GraphProto) -> bool {
    g.input
        .iter()
        .filter(|v| !g.initializer.iter().any(|t| t.name == v.name))
        .any(|v| symbols(v).iter().any(Option::is_some))
}

fn err(index: usize, op: OperatorType, what: &'static str) -> OnnxError {
    OnnxError::SymbolicShape {
        index,
        op: op.name(),
        what,
    }
}

fn merge_specs(a: &mut [IoSpec], b: &[IoSpec], infos: &[&ValueInfoProto]) -> Result<(), OnnxError> {
    for (i, (sa, sb)) in a.iter_mut().zip(b).enumerate() {
        let syms = infos.get(i).map(|v| symbols(v)).unwrap_or_default();
        if sa.shape.len() != sb.shape.len() {
            return Err(OnnxError::SymbolicShape {
                index: i,
                op: "graph I/O",
                what: "rank",
            });
        }
        for (k, (da, db)) in sa.shape.iter_mut().zip(&sb.shape).enumerate() {
            if da != db {
                let name = syms.get(k).cloned().flatten().unwrap_or_default();
                *da = Dim::Symbolic(name);
            }
        }
    }
    Ok(())
}

/// Merge the two pinned walks into one model with symbolic dims.
///
/// # Errors
/// [`OnnxError::SymbolicShape`] where the two walks differ in a way MOBI cannot express.
pub(crate) fn reconcile(g: &GraphProto, mut a: Model, b: Model) -> Result<Model, OnnxError> {
    if a.operators.len() != b.operators.len() || a.tensors.len() != b.tensors.len() {
        return Err(OnnxError::SymbolicShape {
            index: 0,
            op: "graph",
            what: "structure",
        });
    }
    for (i, (ta, tb)) in a.tensors.iter().zip(&b.tensors).enumerate() {
        if ta != tb {
            return Err(OnnxError::SymbolicShape {
                index: i,
                op: "constant tensor",
                what: "value",
            });
        }
    }
    for (i, (oa, ob)) in a.operators.iter_mut().zip(&b.operators).enumerate() {
        if oa.op != ob.op
            || oa.inputs != ob.inputs
            || oa.outputs != ob.outputs
            || oa.params.len() != ob.params.len()
        {
            return Err(err(i, oa.op, "structure"));
        }
        for ((ka, va), (kb, vb)) in oa.params.iter_mut().zip(&ob.params) {
            if ka != kb {
                return Err(err(i, oa.op, "parameter"));
            }
            if va == vb {
                continue;
            }
            match (oa.op, ka.as_str(), &mut *va, vb) {
                (OperatorType::Reshape, "shape", ParamValue::Ints(x), ParamValue::Ints(y))
                    if x.len() == y.len() =>
                {
                    let differ: Vec<usize> = (0..x.len()).filter(|&k| x[k] != y[k]).collect();
                    if differ.len() != 1 {
                        return Err(err(i, oa.op, "shape with several symbolic entries"));
                    }
                    x[differ[0]] = -1;
                }
                _ => return Err(err(i, oa.op, "parameter")),
            }
        }
    }
    let inputs: Vec<&ValueInfoProto> = g
        .input
        .iter()
        .filter(|v| !g.initializer.iter().any(|t| t.name == v.name))
        .collect();
    let outputs: Vec<&ValueInfoProto> = g.output.iter().collect();
    merge_specs(&mut a.inputs, &b.inputs, &inputs)?;
    merge_specs(&mut a.outputs, &b.outputs, &outputs)?;
    Ok(a)
}
