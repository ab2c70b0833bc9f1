//! Reductions over a set of axes (ONNX Reduce*, opset 18 semantics, constant axes).

use tensorvault_formats::mobi::OperatorType as Op;

use super::{axis, broadcast, f32_tensor, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// The reduced axes (sorted, unique) of a rank-`r` input, `None` for identity.
pub(crate) fn reduced_axes(cx: &Ctx<'_>, r: usize) -> OpResult<Option<Vec<bool>>> {
    let p = cx.params();
    let mut mask = vec![false; r];
    match p.ints("axes") {
        Some(a) if !a.is_empty() => {
            for &v in a {
                mask[axis("axes", v, r)?] = true;
            }
        }
        _ if cx.int("noop_with_empty_axes") == 1 => return Ok(None),
        _ => mask.iter_mut().for_each(|m| *m = true),
    }
    Ok(Some(mask))
}

/// Every ONNX Reduce* operator.
pub(crate) fn reduce(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    let x = cx.f32(0)?;
    let Some(mask) = reduced_axes(cx, s.len())? else {
        return Ok(f32_tensor(s.to_vec(), x.to_vec()));
    };
    let keep = cx.int("keepdims") == 1;
    let kept: Vec<usize> = s
        .iter()
        .zip(&mask)
        .map(|(&d, &m)| if m { 1 } else { d })
        .collect();
    let n = cx.alloc(&kept)?;
    let count: usize = s
        .iter()
        .zip(&mask)
        .filter(|(_, &m)| m)
        .map(|(&d, _)| d)
        .product();
    let op = cx.op.op;
    let init = match op {
        Op::ReduceMax => f64::NEG_INFINITY,
        Op::ReduceMin => f64::INFINITY,
        Op::ReduceProd => 1.0,
        _ => 0.0,
    };
    // ReduceLogSumExp: subtract the per-output maximum first (stable).
    let shift = if op == Op::ReduceLogSumExp {
        let mut m = vec![f64::NEG_INFINITY; n];
        fold(s, &kept, x, &mut m, |a, v| a.max(v));
        m.iter_mut().for_each(|v| {
            if v.is_infinite() {
                *v = 0.0
            }
        });
        Some(m)
    } else {
        None
    };
    let mut acc = vec![init; n];
    match op {
        Op::ReduceMax => fold(s, &kept, x, &mut acc, |a, v| {
            if a.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                a.max(v)
            }
        }),
        Op::ReduceMin => fold(s, &kept, x, &mut acc, |a, v| {
            if a.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                a.min(v)
            }
        }),
        Op::ReduceProd => fold(s, &kept, x, &mut acc, |a, v| a * v),
        Op::ReduceL1 => fold(s, &kept, x, &mut acc, |a, v| a + v.abs()),
        Op::ReduceL2 | Op::ReduceSumSquare => fold(s, &kept, x, &mut acc, |a, v| a + v * v),
        Op::ReduceLogSumExp => {
            let m = shift.as_deref().unwrap_or(&[]);
            let t = broadcast::strides_in(&kept, s);
            let mut i = 0;
            broadcast::for_each2(s, &t, &t, |o, _| {
                acc[o] += (f64::from(x[i]) - m[o]).exp();
                i += 1;
            });
        }
        Op::ReduceMean | Op::ReduceSum | Op::ReduceLogSum => {
            fold(s, &kept, x, &mut acc, |a, v| a + v)
        }
        _ => return Err(OpError::Unsupported),
    }
    let y = acc
        .iter()
        .enumerate()
        .map(|(o, &a)| {
            (match op {
                Op::ReduceMean => a / count as f64,
                Op::ReduceL2 => a.sqrt(),
                Op::ReduceLogSum => a.ln(),
                Op::ReduceLogSumExp => a.ln() + shift.as_ref().map_or(0.0, |m| m[o]),
                _ => a,
            }) as f32
        })
        .collect();
    let shape = if keep {
        kept
    } else {
        s.iter()
            .zip(&mask)
            .filter(|(_, &m)| !m)
            .map(|(&d, _)| d)
            .collect()
    };
    Ok(f32_tensor(shape, y))
}

/// `acc[out(i)] = f(acc[out(i)], x[i])` for every input element, `out` mapping an input
/// index to its reduced position (`kept` = the input shape with reduced axes at 1).
fn fold(s: &[usize], kept: &[usize], x: &[f32], acc: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    let t = broadcast::strides_in(kept, s);
    let mut i = 0;
    broadcast::for_each2(s, &t, &t, |o, _| {
        acc[o] = f(acc[o], f64::from(x[i]));
        i += 1;
    });
}
