//! ONNX Slice arithmetic, shared by constant folding and the Slice lowering: starts,
//! ends, axes and steps (attributes before opset 10, constant inputs after) resolved to
//! a begin index, a step and an output size per axis, with ONNX's clamping.

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::shape::axis;

/// The ONNX arguments of a Slice node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SliceArgs {
    /// Start per sliced axis.
    pub starts: Vec<i64>,
    /// End (exclusive) per sliced axis.
    pub ends: Vec<i64>,
    /// The sliced axes (default `0..starts.len()`).
    pub axes: Vec<i64>,
    /// Steps (default 1).
    pub steps: Vec<i64>,
}

/// Per axis of the input: begin index, step and output size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlicePlan {
    /// First index read per axis.
    pub begin: Vec<i64>,
    /// Step per axis.
    pub step: Vec<i64>,
    /// Output shape.
    pub shape: Vec<u64>,
}

/// Read a Slice node's arguments.
///
/// # Errors
/// [`OnnxError::BadAttribute`] (missing starts/ends), [`OnnxError::NotConstant`],
/// [`OnnxError::Shape`] when the lists differ in length.
pub(crate) fn args(ctx: &Ctx, n: &Node) -> Result<SliceArgs, OnnxError> {
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        let s = n.ints("starts")?.ok_or_else(|| n.missing("starts"))?;
        let e = n.ints("ends")?.ok_or_else(|| n.missing("ends"))?;
        (s, e, n.ints("axes")?, None)
    } else {
        let opt = |i| -> Result<Option<Vec<i64>>, OnnxError> {
            match ctx.has_input(n, i) {
                true => Ok(Some(ctx.need_const(n, i)?.to_i64())),
                false => Ok(None),
            }
        };
        (
            ctx.need_const(n, 1)?.to_i64(),
            ctx.need_const(n, 2)?.to_i64(),
            opt(3)?,
            opt(4)?,
        )
    };
    let k = starts.len();
    let axes = axes.unwrap_or_else(|| (0..k as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; k]);
    if ends.len() != k || axes.len() != k || steps.len() != k {
        return Err(n.shape_err("starts, ends, axes and steps differ in length".into()));
    }
    Ok(SliceArgs {
        starts,
        ends,
        axes,
        steps,
    })
}

/// Resolve the arguments against an input shape.
///
/// # Errors
/// [`OnnxError::UnsupportedAttribute`] for an axis out of range or repeated, a zero step.
pub(crate) fn plan(n: &Node, dims: &[u64], a: &SliceArgs) -> Result<SlicePlan, OnnxError> {
    let r = dims.len();
    let mut begin = vec![0i64; r];
    let mut step = vec![1i64; r];
    let mut shape = dims.to_vec();
    let mut seen = vec![false; r];
    for k in 0..a.starts.len() {
        let ax = axis(n, "axes", a.axes[k], r)?;
        if std::mem::replace(&mut seen[ax], true) {
            return Err(n.unsupported("axes", a.axes[k], "repeated axis"));
        }
        let dim = dims[ax] as i64;
        let st = a.steps[k];
        if st == 0 {
            return Err(n.unsupported("steps", 0, "a step of 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (s, e) = if st > 0 {
            (
                norm(a.starts[k]).clamp(0, dim),
                norm(a.ends[k]).clamp(0, dim),
            )
        } else {
            (
                norm(a.starts[k]).clamp(0, (dim - 1).max(0)),
                norm(a.ends[k]).clamp(-1, dim - 1),
            )
        };
        let span = i128::from(if st > 0 { e - s } else { s - e }).max(0);
        let mag = i128::from(st).abs();
        begin[ax] = s;
        step[ax] = st;
        shape[ax] = ((span + mag - 1) / mag) as u64;
    }
    Ok(SlicePlan { begin, step, shape })
}
