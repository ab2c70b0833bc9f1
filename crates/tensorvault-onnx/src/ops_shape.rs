//! Lowerings of the data-movement ops on run-time values: Pad, Slice, Split, Gather,
//! Expand, Tile (each takes its ONNX arguments as attributes in old opsets and constant
//! inputs in new ones; MOBI takes them as parameters).

use tensorvault_formats::mobi::OperatorType as Op;

use crate::ctx::{Ctx, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{float, int, ints_i64, string};
use crate::shape::{axis, broadcast};
use crate::slicing;
use crate::tensor::checked_shape;

fn out<'a>(n: &Node<'a>) -> &'a str {
    n.output(0).unwrap_or_default()
}

/// Pad: `pads` (and `value`) attributes before opset 11, inputs after (`axes` from 18);
/// modes constant, reflect, edge (wrap from 19).
pub(crate) fn pad(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 4, "1..=4")?;
    let x = ctx.dyn_in(n, 0)?;
    let rank = x.shape.len();
    let (pads, value, axes) = if ctx.opset < 11 {
        let p = n.ints("pads")?.ok_or_else(|| n.missing("pads"))?;
        (p, n.float_or("value", 0.0)?, None)
    } else {
        let p = ctx.need_const(n, 1)?.to_i64();
        let v = match ctx.has_input(n, 2) {
            true => ctx
                .need_const(n, 2)?
                .to_f32()
                .first()
                .copied()
                .unwrap_or(0.0),
            false => 0.0,
        };
        let a = match ctx.has_input(n, 3) {
            true => Some(ctx.need_const(n, 3)?.to_i64()),
            false => None,
        };
        (p, v, a)
    };
    let mode = n.string("mode")?.unwrap_or_else(|| "constant".into());
    if !["constant", "reflect", "edge", "wrap"].contains(&mode.as_str()) {
        return Err(n.unsupported("mode", mode, "expected constant, reflect, edge or wrap"));
    }
    let axes_n: Vec<usize> = match &axes {
        Some(a) => a
            .iter()
            .map(|&v| axis(n, "axes", v, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes_n.len() {
        return Err(n.unsupported(
            "pads",
            format!("{pads:?}"),
            "needs 2 values per padded axis",
        ));
    }
    let k = axes_n.len();
    let mut shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    for (j, &a) in axes_n.iter().enumerate() {
        shape[a] += pads[j] + pads[j + k];
    }
    let shape = checked_shape(&n.name(), "padded shape", &shape)?;
    let mut params = vec![
        ints_i64("pads", &pads),
        string("mode", &mode),
        float("value", f64::from(value)),
    ];
    if axes.is_some() {
        params.push(ints_i64(
            "axes",
            &axes_n.iter().map(|&a| a as i64).collect::<Vec<_>>(),
        ));
    }
    ctx.emit(Op::Pad, &[x.v], params, out(n), shape);
    Ok(())
}

/// Slice of a run-time value with constant starts/ends/axes/steps.
pub(crate) fn slice(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 5, "1..=5")?;
    let x = ctx.dyn_in(n, 0)?;
    let a = slicing::args(ctx, n)?;
    let plan = slicing::plan(n, &x.shape, &a)?;
    let r = x.shape.len() as i64;
    let axes: Vec<i64> = a
        .axes
        .iter()
        .map(|&v| if v < 0 { v + r } else { v })
        .collect();
    let params = vec![
        ints_i64("starts", &a.starts),
        ints_i64("ends", &a.ends),
        ints_i64("axes", &axes),
        ints_i64("steps", &a.steps),
    ];
    ctx.emit(Op::Slice, &[x.v], params, out(n), plan.shape);
    Ok(())
}

/// Split sizes: the `split` attribute (before 13) or input (13+), else `num_outputs`
/// (18+) parts of ceil(dim / n) with the last smaller, else equal parts.
fn split_sizes(ctx: &Ctx, n: &Node, dim: u64, outputs: usize) -> Result<Vec<u64>, OnnxError> {
    let given = if ctx.opset < 13 {
        n.ints("split")?
    } else if ctx.has_input(n, 1) {
        Some(ctx.need_const(n, 1)?.to_i64())
    } else {
        None
    };
    if let Some(s) = given {
        if s.len() != outputs || s.iter().any(|&v| v < 0) || s.iter().sum::<i64>() != dim as i64 {
            return Err(n.unsupported(
                "split",
                format!("{s:?}"),
                "sizes must be one per output and sum to the axis",
            ));
        }
        return Ok(s.iter().map(|&v| v as u64).collect());
    }
    let k = outputs as u64;
    if ctx.opset >= 18 {
        let part = dim.div_ceil(k);
        return Ok((0..k)
            .map(|i| part.min(dim.saturating_sub(i * part)))
            .collect());
    }
    if !dim.is_multiple_of(k) {
        return Err(n.shape_err(format!(
            "axis of size {dim} does not split into {k} equal parts"
        )));
    }
    Ok(vec![dim / k; outputs])
}

/// Split into the node's outputs along `axis`.
pub(crate) fn split(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 2, "1..=2")?;
    let x = ctx.dyn_in(n, 0)?;
    let a = axis(n, "axis", n.int_or("axis", 0)?, x.shape.len())?;
    let outputs = n.proto.output.len();
    let sizes = split_sizes(ctx, n, x.shape[a], outputs)?;
    let params = vec![
        int("axis", a as i64),
        ints_i64(
            "split",
            &sizes.iter().map(|&s| s as i64).collect::<Vec<_>>(),
        ),
    ];
    let shapes: Vec<Vec<u64>> = sizes
        .iter()
        .map(|&s| {
            let mut sh = x.shape.clone();
            sh[a] = s;
            sh
        })
        .collect();
    let outs = ctx.emit_n(Op::Split, &[x.v], params, shapes);
    for (i, d) in outs.into_iter().enumerate() {
        if let Some(name) = n.output(i) {
            ctx.set(name, Val::Dyn(d));
        }
    }
    Ok(())
}

/// Gather along `axis` with constant or run-time integer indices.
pub(crate) fn gather(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let data = ctx.dyn_in(n, 0)?;
    let a = axis(n, "axis", n.int_or("axis", 0)?, data.shape.len())?;
    let idx_shape = match ctx.const_in(n, 1) {
        Some(c) => {
            let dim = data.shape[a] as i64;
            if let Some(&bad) = c.to_i64().iter().find(|&&i| i < -dim || i >= dim) {
                return Err(n.shape_err(format!(
                    "index {bad} out of range for axis {a} of size {dim}"
                )));
            }
            c.shape.clone()
        }
        None => ctx.dyn_in(n, 1)?.shape,
    };
    let idx = ctx.dyn_in(n, 1)?;
    let shape: Vec<u64> = data.shape[..a]
        .iter()
        .chain(&idx_shape)
        .chain(&data.shape[a + 1..])
        .copied()
        .collect();
    ctx.emit(
        Op::Gather,
        &[data.v, idx.v],
        vec![int("axis", a as i64)],
        out(n),
        shape,
    );
    Ok(())
}

/// Expand with a constant target shape.
pub(crate) fn expand(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let x = ctx.dyn_in(n, 0)?;
    let target = checked_shape(&n.name(), "shape", &ctx.need_const(n, 1)?.to_i64())?;
    let Some(shape) = broadcast(&x.shape, &target) else {
        return Err(n.shape_err(format!("{:?} does not broadcast to {target:?}", x.shape)));
    };
    let t: Vec<i64> = target.iter().map(|&d| d as i64).collect();
    ctx.emit(
        Op::Expand,
        &[x.v],
        vec![ints_i64("shape", &t)],
        out(n),
        shape,
    );
    Ok(())
}

/// Tile with constant repeats.
pub(crate) fn tile(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let x = ctx.dyn_in(n, 0)?;
    let reps = ctx.need_const(n, 1)?.to_i64();
    if reps.len() != x.shape.len() || reps.iter().any(|&r| r < 0) {
        return Err(n.unsupported(
            "repeats",
            format!("{reps:?}"),
            "one non-negative value per axis",
        ));
    }
    let shape: Vec<i64> = x
        .shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| (d as i64).saturating_mul(r))
        .collect();
    let shape = checked_shape(&n.name(), "tiled shape", &shape)?;
    ctx.emit(
        Op::Tile,
        &[x.v],
        vec![ints_i64("repeats", &reps)],
        out(n),
        shape,
    );
    Ok(())
}
