//! Lowering of ConvTranspose (1-D and 2-D) onto MOBI ConvTranspose2D: W `[C, M/group,
//! k...]` constant, B constant or absent; `output_shape` and `auto_pad` resolved to
//! explicit `padding` and `output_padding` the way the ONNX reference implementation
//! does (onnxruntime splits an odd SAME padding the other way round). 1-D runs as 2-D
//! with a height of 1 between two Reshapes.

use tensorvault_formats::mobi::{OperatorType as Op, ParamValue};

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{int, keys, reshape_to, string};
use crate::tensor::Const;
use crate::weights::Role;

/// An INTS attribute of `d` values, each `>= min`, or `default` per axis.
fn per_axis(
    n: &Node,
    name: &'static str,
    d: usize,
    min: i64,
    default: i64,
) -> Result<Vec<i64>, OnnxError> {
    match n.ints(name)? {
        None => Ok(vec![default; d]),
        Some(v) if v.len() == d && v.iter().all(|&x| x >= min) => Ok(v),
        Some(v) => Err(n.unsupported(
            name,
            format!("{v:?}"),
            "one value per spatial axis, in range",
        )),
    }
}

/// Per spatial axis `[pad_begin, pad_end, output_padding, output size]` for MOBI, all
/// >= 0 and within i64.
fn resolve_pads(
    n: &Node,
    input: &[u64],
    kernel: &[u64],
    strides: &[i64],
    dils: &[i64],
    out_pad: &[i64],
) -> Result<Vec<[i64; 4]>, OnnxError> {
    let d = input.len();
    let auto = n.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
    let explicit = match n.ints("pads")? {
        Some(p) if p.len() == 2 * d && p.iter().all(|&x| x >= 0) => Some(p),
        Some(p) => {
            return Err(n.unsupported("pads", format!("{p:?}"), "begin and end per axis, >= 0"))
        }
        None => None,
    };
    let out_shape = match n.ints("output_shape")? {
        // Some exporters write [N, C, spatial...]: the spatial part counts.
        Some(v) if v.len() >= d && v[v.len() - d..].iter().all(|&x| x >= 0) => {
            Some(v[v.len() - d..].to_vec())
        }
        Some(v) => {
            return Err(n.unsupported(
                "output_shape",
                format!("{v:?}"),
                "one size per spatial axis",
            ))
        }
        None => None,
    };
    let same = match auto.as_str() {
        "NOTSET" | "" | "VALID" => None,
        "SAME_UPPER" => Some(true),
        "SAME_LOWER" => Some(false),
        other => {
            return Err(n.unsupported(
                "auto_pad",
                other,
                "expected NOTSET, VALID, SAME_UPPER or SAME_LOWER",
            ))
        }
    };
    let mut res = Vec::with_capacity(d);
    for i in 0..d {
        // The full output before padding: stride*(in-1) + dilation*(k-1) + 1.
        // i128: attribute values are any i64, and none of these sums may wrap.
        let (inp, k) = (i128::from(input[i] as i64), i128::from(kernel[i] as i64));
        let (s, dl, op) = (
            i128::from(strides[i]),
            i128::from(dils[i]),
            i128::from(out_pad[i]),
        );
        // The full output before padding: stride*(in-1) + dilation*(k-1) + 1.
        let full = s * (inp - 1) + dl * (k - 1) + 1;
        let (begin, end, extra) = match (&explicit, same) {
            (p, None) | (p @ Some(_), _) => {
                let (b, e) = p
                    .as_ref()
                    .map_or((0, 0), |p| (i128::from(p[i]), i128::from(p[d + i])));
                match &out_shape {
                    // output_shape wins over output_padding (the reference's rule).
                    Some(os) => {
                        let (os, base) = (i128::from(os[i]), full - b - e);
                        if os >= base {
                            (b, e, os - base)
                        } else {
                            (b, e + base - os, 0)
                        }
                    }
                    None => (b, e, op),
                }
            }
            (None, Some(upper)) => {
                let target = match &out_shape {
                    Some(os) => i128::from(os[i]),
                    None => inp * s,
                };
                let total = full + op - target;
                let half = total.div_euclid(2);
                let (b, e) = if upper {
                    (half, total - half)
                } else {
                    (total - half, half)
                };
                if b < 0 {
                    return Err(n.unsupported(
                        "output_shape",
                        target,
                        "larger than the full output: needs a negative begin padding",
                    ));
                }
                if e < 0 {
                    (b, 0, op - e)
                } else {
                    (b, e, op)
                }
            }
        };
        let out = full + extra - begin - end;
        let fit = |v: i128| i64::try_from(v).ok().filter(|&v| v >= 0);
        let (Some(b), Some(e), Some(x), Some(o)) = (fit(begin), fit(end), fit(extra), fit(out))
        else {
            return Err(n.shape_err(format!(
                "pads {begin}/{end} and output padding {extra} give an output of {out} on axis {i} (full {full})"
            )));
        };
        res.push([b, e, x, o]);
    }
    Ok(res)
}

/// ConvTranspose -> ConvTranspose2D (1-D through Reshapes).
pub(crate) fn conv_transpose(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 3, "2..=3")?;
    let x = ctx.dyn_in(n, 0)?;
    let w = ctx.need_const(n, 1)?;
    let d = x.shape.len().saturating_sub(2);
    if !(1..=2).contains(&d) || w.shape.len() != x.shape.len() {
        return Err(n.shape_err(format!(
            "input {:?}, weight {:?}: MOBI has 1-D and 2-D (NCHW) transposed convolutions",
            x.shape, w.shape
        )));
    }
    let (batch, c) = (x.shape[0], x.shape[1]);
    let group = n.int_or("group", 1)?;
    if group < 1 || c % group as u64 != 0 || w.shape[0] != c {
        return Err(n.shape_err(format!(
            "weight {:?} with group {group} does not match {c} input channels (W is [C, M/group, k...])",
            w.shape
        )));
    }
    let m = w.shape[1] * group as u64;
    let kernel = &w.shape[2..];
    if kernel.contains(&0) || x.shape[2..].contains(&0) {
        return Err(n.shape_err(format!(
            "empty spatial axis in {:?} or {:?}",
            x.shape, w.shape
        )));
    }
    if let Some(k) = n.ints("kernel_shape")? {
        if k.iter().zip(kernel).any(|(&a, &b)| a != b as i64) || k.len() != d {
            return Err(n.unsupported(
                "kernel_shape",
                format!("{k:?}"),
                "differs from the weight's shape",
            ));
        }
    }
    let strides = per_axis(n, "strides", d, 1, 1)?;
    let dils = per_axis(n, "dilations", d, 1, 1)?;
    let out_pad = per_axis(n, "output_padding", d, 0, 0)?;
    let pads = resolve_pads(n, &x.shape[2..], kernel, &strides, &dils, &out_pad)?;
    let spatial: Vec<u64> = pads.iter().map(|p| p[3] as u64).collect();
    crate::tensor::check_elements(
        n.output(0).unwrap_or_default(),
        spatial
            .iter()
            .chain(&[batch, m])
            .try_fold(1u64, |a, &v| a.checked_mul(v))
            .unwrap_or(u64::MAX),
    )?;
    // 2-D parameters: a 1-D op gets a unit height in front.
    let lift = |v: Vec<i64>, unit: i64| if d == 1 { vec![unit, v[0]] } else { v };
    let stride2 = lift(strides.clone(), 1);
    let dil2 = lift(dils.clone(), 1);
    let begins = lift(pads.iter().map(|p| p[0]).collect(), 0);
    let ends = lift(pads.iter().map(|p| p[1]).collect(), 0);
    let extra = lift(pads.iter().map(|p| p[2]).collect(), 0);
    let mut w4 = w.shape.clone();
    let mut x4 = x.shape.clone();
    if d == 1 {
        w4.insert(2, 1);
        x4.insert(2, 1);
    }
    let wv = ctx.constant(&Const::floats(w4, w.to_f32()), Role::ConvTransposeWeight)?;
    let mut inputs = vec![x.v, wv];
    if ctx.has_input(n, 2) {
        let b = ctx.need_const(n, 2)?;
        if b.len() as u64 != m {
            return Err(n.shape_err(format!(
                "bias has {} values for {m} output channels",
                b.len()
            )));
        }
        inputs.push(ctx.constant(&Const::floats(vec![m], b.to_f32()), Role::Other)?);
    }
    let mut params: Vec<(String, ParamValue)> = vec![
        ("stride".into(), ParamValue::Ints(stride2)),
        (
            "padding".into(),
            ParamValue::Ints(vec![begins[0], begins[1], ends[0], ends[1]]),
        ),
        ("dilation".into(), ParamValue::Ints(dil2)),
        string(keys::LAYOUT, "NCHW"),
    ];
    if extra.iter().any(|&e| e != 0) {
        params.push(("output_padding".into(), ParamValue::Ints(extra)));
    }
    if group > 1 {
        params.push(int(keys::GROUP, group));
    }
    let mut out_shape = vec![batch, m];
    out_shape.extend(&spatial);
    let out = n.output(0).unwrap_or_default();
    if d == 2 {
        ctx.emit(Op::ConvTranspose2D, &inputs, params, out, out_shape);
        return Ok(());
    }
    let r = ctx.emit_tmp(Op::Reshape, &[x.v], reshape_to(&x4), x4.clone());
    inputs[0] = r.v;
    let y4 = vec![batch, m, 1, spatial[0]];
    let y = ctx.emit_tmp(Op::ConvTranspose2D, &inputs, params, y4);
    ctx.emit(Op::Reshape, &[y.v], reshape_to(&out_shape), out, out_shape);
    Ok(())
}
