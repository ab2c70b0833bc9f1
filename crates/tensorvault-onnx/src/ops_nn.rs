//! Lowerings of convolution, BatchNormalization (folded into the preceding Conv when it
//! can be) and pooling. 1-D convolutions and pools run as 2-D ones with a unit height,
//! between two Reshapes.

use tensorvault_formats::mobi::{OperatorType as Op, ParamValue, Value};

use crate::ctx::Ctx;
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{float, int, ints, keys, reshape_to, string};
use crate::shape::{lift_1d, pads_2d, pair, window_out};
use crate::tensor::Const;
use crate::weights::Role;

/// The run-time input of a window op as the 2-D op sees it.
struct Lifted {
    /// The input value, of the ONNX shape.
    x: Value,
    /// Its 4-D NCHW shape (`[N, C, 1, L]` for a 1-D op).
    x4: [u64; 4],
    /// Spatial axes of the ONNX op: 1 or 2.
    spatial: usize,
}

/// Emit the 2-D window operator `op` on `lifted` (then `rest`), defining `out`: directly
/// for a 2-D op; for a 1-D op between a Reshape to the unit height and one dropping it.
fn emit_window(
    ctx: &mut Ctx,
    op: Op,
    lifted: &Lifted,
    rest: &[Value],
    params: Vec<(String, ParamValue)>,
    out: &str,
    y4: [u64; 4],
) {
    let first = if lifted.spatial == 2 {
        lifted.x
    } else {
        let x4 = lifted.x4.to_vec();
        ctx.emit_tmp(Op::Reshape, &[lifted.x], reshape_to(&x4), x4)
            .v
    };
    let mut inputs = vec![first];
    inputs.extend_from_slice(rest);
    if lifted.spatial == 2 {
        ctx.emit(op, &inputs, params, out, y4.to_vec());
        return;
    }
    let y = ctx.emit_tmp(op, &inputs, params, y4.to_vec());
    let y3 = vec![y4[0], y4[1], y4[3]];
    ctx.emit(Op::Reshape, &[y.v], reshape_to(&y3), out, y3);
}

/// The kernel sizes of a window op as ONNX writes them (one per spatial axis).
fn onnx_kernel(spatial: usize, k: [u64; 2]) -> Vec<i64> {
    let k = [k[0] as i64, k[1] as i64];
    k[2 - spatial..].to_vec()
}

/// The BatchNormalization constants `(scale, bias, mean, var, epsilon)` of node `bn`,
/// checked against `channels`.
fn bn_params(ctx: &Ctx, bn: &Node, channels: u64) -> Result<Option<[Vec<f32>; 4]>, OnnxError> {
    if bn.proto.input.len() != 5 || bn.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Ok(None);
    }
    if bn.int_or("training_mode", 0)? != 0 {
        return Ok(None);
    }
    let mut out: [Vec<f32>; 4] = Default::default();
    for (i, slot) in out.iter_mut().enumerate() {
        let Some(c) = ctx.const_in(bn, i + 1) else {
            return Ok(None);
        };
        if c.len() as u64 != channels {
            return Err(bn.shape_err(format!(
                "input {} has {} values for {channels} channels",
                i + 1,
                c.len()
            )));
        }
        *slot = c.to_f32();
    }
    Ok(Some(out))
}

/// Per-channel `a = scale / sqrt(var + eps)` and `b = bias - mean * a`: BatchNorm is
/// `y = x * a + b`.
pub(crate) fn bn_affine(p: &[Vec<f32>; 4], eps: f32) -> (Vec<f32>, Vec<f32>) {
    let [scale, bias, mean, var] = p;
    let a: Vec<f32> = scale
        .iter()
        .zip(var)
        .map(|(s, v)| s / (v + eps).sqrt())
        .collect();
    let b = bias
        .iter()
        .zip(mean)
        .zip(&a)
        .map(|((b, m), a)| b - m * a)
        .collect();
    (a, b)
}

/// Conv -> Conv2D (group 1) or DepthwiseConv2D (group = channels), with a following
/// BatchNormalization folded into the weights and bias when the conv output has no other
/// reader.
pub(crate) fn conv(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 3, "2..=3")?;
    let x = ctx.dyn_in(n, 0)?;
    let ([batch, c, h, w_in], spatial) = lift_1d(n, &x.shape)?;
    let w = ctx.need_const(n, 1)?;
    if w.shape.len() != x.shape.len() {
        return Err(n.shape_err(format!(
            "weight {:?} for input {:?}: one kernel size per spatial axis",
            w.shape, x.shape
        )));
    }
    let ([m, cg, kh, kw], _) = lift_1d(n, &w.shape)?;
    let bias = if ctx.has_input(n, 2) {
        let b = ctx.need_const(n, 2)?;
        if b.len() as u64 != m {
            return Err(n.shape_err(format!(
                "bias has {} values for {m} output channels",
                b.len()
            )));
        }
        b.to_f32()
    } else {
        vec![0.0; m as usize]
    };
    let group = n.int_or("group", 1)?;
    let op = if group == 1 && cg == c {
        Op::Conv2D
    } else if group > 1 && group as u64 == c && cg == 1 && m % c == 0 {
        Op::DepthwiseConv2D
    } else if group > 1 && cg * group as u64 == c && m % group as u64 == 0 {
        Op::Conv2D
    } else {
        return Err(n.shape_err(format!(
            "weight {:?} with group {group} does not match {c} input channels",
            w.shape
        )));
    };
    if let Some(k) = n.ints("kernel_shape")? {
        if k != onnx_kernel(spatial, [kh, kw]) {
            return Err(n.unsupported(
                "kernel_shape",
                format!("{k:?}"),
                "differs from the weight's shape",
            ));
        }
    }
    let strides = pair(n, "strides", spatial, 1)?;
    let dil = pair(n, "dilations", spatial, 1)?;
    let pads = pads_2d(n, spatial, [h, w_in], [kh, kw], strides, dil)?;
    let eff = [(kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1];
    let (Some(oh), Some(ow)) = (
        window_out(h, pads[0], pads[2], eff[0], strides[0], false),
        window_out(w_in, pads[1], pads[3], eff[1], strides[1], false),
    ) else {
        return Err(n.shape_err(format!(
            "kernel {eff:?} larger than the padded input {:?}",
            [h, w_in]
        )));
    };
    let mut weights = w.to_f32();
    let mut bias = bias;
    let mut out_name = n.output(0).unwrap_or_default();
    if let Some(r) = n.output(0).and_then(|o| ctx.sole_reader(o)) {
        let bn = ctx.plan.nodes[r];
        if bn.op() == "BatchNormalization" && bn.domain().is_empty() {
            if let Some(p) = bn_params(ctx, &bn, m)? {
                let (a, b) = bn_affine(&p, bn.float_or("epsilon", 1e-5)?);
                let per = (cg * kh * kw) as usize;
                for (ch, wc) in weights.chunks_mut(per).enumerate() {
                    wc.iter_mut().for_each(|v| *v *= a[ch]);
                }
                for ((bi, a), b) in bias.iter_mut().zip(&a).zip(&b) {
                    *bi = *bi * a + b;
                }
                ctx.skip.insert(r);
                ctx.stats.folded_batchnorm += 1;
                out_name = bn.output(0).unwrap_or_default();
            }
        }
    }
    let wv = ctx.constant(
        &Const::floats(vec![m, cg, kh, kw], weights),
        Role::ConvWeight,
    )?;
    let bv = ctx.constant(&Const::floats(vec![m], bias), Role::Other)?;
    let mut params = vec![
        ints(keys::STRIDE, &strides),
        ints(keys::PADDING, &pads),
        ints(keys::DILATION, &dil),
        string(keys::LAYOUT, "NCHW"),
    ];
    if op == Op::Conv2D && group > 1 {
        params.push(int(keys::GROUP, group));
    }
    let lifted = Lifted {
        x: x.v,
        x4: [batch, c, h, w_in],
        spatial,
    };
    emit_window(
        ctx,
        op,
        &lifted,
        &[wv, bv],
        params,
        out_name,
        [batch, m, oh, ow],
    );
    Ok(())
}

/// A BatchNormalization that could not be folded: MOBI BatchNorm with inputs
/// `[x, scale, bias, mean, var]` (channels on axis 1).
pub(crate) fn batch_norm(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(5, 5, "5")?;
    let x = ctx.dyn_in(n, 0)?;
    if x.shape.len() < 2 {
        return Err(n.shape_err(format!("input shape {:?}: channels are axis 1", x.shape)));
    }
    if n.int_or("training_mode", 0)? != 0 || n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(n.unsupported(
            "training_mode",
            1,
            "MOBI runs inference only (running mean/var outputs)",
        ));
    }
    let Some(p) = bn_params(ctx, n, x.shape[1])? else {
        let i = (1..5).find(|&i| ctx.const_in(n, i).is_none()).unwrap_or(1);
        return Err(ctx
            .need_const(n, i)
            .err()
            .unwrap_or_else(|| n.missing("scale")));
    };
    let eps = n.float_or("epsilon", 1e-5)?;
    let c = x.shape[1];
    let mut vals = vec![x.v];
    for v in p {
        vals.push(ctx.constant(&Const::floats(vec![c], v), Role::Other)?);
    }
    let out = n.output(0).unwrap_or_default();
    ctx.emit(
        Op::BatchNorm,
        &vals,
        vec![float(keys::EPSILON, f64::from(eps))],
        out,
        x.shape,
    );
    Ok(())
}

fn pool(ctx: &mut Ctx, n: &Node, op: Op) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    if n.output(1).is_some() {
        return Err(n.unsupported(
            "Indices",
            "output 1",
            "MaxPool's indices output has no MOBI equivalent",
        ));
    }
    let x = ctx.dyn_in(n, 0)?;
    let ([b, c, h, w], spatial) = lift_1d(n, &x.shape)?;
    let kernel = match n.ints("kernel_shape")? {
        Some(k) if k.len() == spatial && k.iter().all(|&v| v >= 1) => match *k {
            [l] => [1, l as u64],
            _ => [k[0] as u64, k[1] as u64],
        },
        Some(k) => {
            return Err(n.unsupported(
                "kernel_shape",
                format!("{k:?}"),
                "one positive size per spatial axis",
            ))
        }
        None => return Err(n.missing("kernel_shape")),
    };
    let dil = pair(n, "dilations", spatial, 1)?;
    let strides = pair(n, "strides", spatial, 1)?;
    let pads = pads_2d(n, spatial, [h, w], kernel, strides, dil)?;
    let eff = [(kernel[0] - 1) * dil[0] + 1, (kernel[1] - 1) * dil[1] + 1];
    let ceil = n.int_or("ceil_mode", 0)? != 0;
    let (Some(oh), Some(ow)) = (
        window_out(h, pads[0], pads[2], eff[0], strides[0], ceil),
        window_out(w, pads[1], pads[3], eff[1], strides[1], ceil),
    ) else {
        return Err(n.shape_err(format!(
            "kernel {kernel:?} larger than the padded input {:?}",
            [h, w]
        )));
    };
    let mut params = vec![
        ints(keys::KERNEL, &kernel),
        ints(keys::STRIDE, &strides),
        ints(keys::PADDING, &pads),
        int(keys::CEIL_MODE, i64::from(ceil)),
    ];
    if dil != [1, 1] {
        params.push(ints(keys::DILATION, &dil));
    }
    if op == Op::AvgPool2D {
        params.push(int(
            keys::COUNT_INCLUDE_PAD,
            n.int_or("count_include_pad", 0)?,
        ));
    }
    let lifted = Lifted {
        x: x.v,
        x4: [b, c, h, w],
        spatial,
    };
    let out = n.output(0).unwrap_or_default();
    emit_window(ctx, op, &lifted, &[], params, out, [b, c, oh, ow]);
    Ok(())
}

/// MaxPool -> MaxPool2D.
pub(crate) fn max_pool(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    pool(ctx, n, Op::MaxPool2D)
}

/// AveragePool -> AvgPool2D.
pub(crate) fn avg_pool(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    pool(ctx, n, Op::AvgPool2D)
}

/// GlobalAveragePool / GlobalMaxPool: every axis after the first two becomes 1.
pub(crate) fn global_pool(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(1, 1, "1")?;
    let x = ctx.dyn_in(n, 0)?;
    if x.shape.len() < 3 {
        return Err(n.shape_err(format!(
            "input shape {:?}: needs [N, C, spatial...]",
            x.shape
        )));
    }
    let op = if n.op() == "GlobalMaxPool" {
        Op::GlobalMaxPool
    } else {
        Op::GlobalAveragePool
    };
    let shape: Vec<u64> = x
        .shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < 2 { d } else { 1 })
        .collect();
    ctx.emit(op, &[x.v], vec![], n.output(0).unwrap_or_default(), shape);
    Ok(())
}
