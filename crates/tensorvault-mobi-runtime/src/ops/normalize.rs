//! Normalizations: BatchNorm (inference), LayerNorm, Softmax and LogSoftmax.

use super::{axis, broadcast, f32_tensor, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// BatchNorm: per channel (axis 1) of X [N, C, ...].
pub(crate) fn batch_norm(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    if s.len() < 2 {
        return Err(OpError::Shape {
            input: 0,
            rule: "must be rank >= 2 ([N, C, ...])",
        });
    }
    let c = s[1];
    let mut p = [&[][..]; 4];
    for (i, slot) in p.iter_mut().enumerate() {
        *slot = cx.f32(i + 1)?;
        if slot.len() != c {
            return Err(OpError::Shape {
                input: i + 1,
                rule: "length must equal the channel count X.shape[1]",
            });
        }
    }
    let eps = cx.params().float("epsilon").unwrap_or(1e-5);
    let (scale, shift): (Vec<f32>, Vec<f32>) = (0..c)
        .map(|j| {
            let a = f64::from(p[0][j]) / (f64::from(p[3][j]) + eps).sqrt();
            (
                a as f32,
                (f64::from(p[1][j]) - f64::from(p[2][j]) * a) as f32,
            )
        })
        .unzip();
    let inner: usize = s[2..].iter().product();
    let x = cx.f32(0)?;
    let y = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let j = (i / inner.max(1)) % c.max(1);
            v * scale[j] + shift[j]
        })
        .collect();
    Ok(f32_tensor(s.to_vec(), y))
}

/// LayerNorm over axes `axis..rank`; scale and B broadcast to that normalized shape.
pub(crate) fn layer_norm(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    let a = axis("axis", cx.int("axis"), s.len())?;
    let norm = &s[a..];
    let inner: usize = norm.iter().product();
    let affine = |i: usize| -> OpResult<Vec<f32>> {
        let (v, vs) = (cx.f32(i)?, cx.shape(i)?);
        match broadcast::shape2(vs, norm) {
            Some(b) if b == norm => {
                let off = broadcast::offsets(vs, norm, inner);
                Ok(off.into_iter().map(|o| v[o]).collect())
            }
            _ => Err(OpError::Shape {
                input: i,
                rule: "must broadcast to the normalized shape X.shape[axis..]",
            }),
        }
    };
    let scale = affine(1)?;
    let bias = if cx.inputs.len() == 3 {
        affine(2)?
    } else {
        vec![0.0; inner]
    };
    let eps = cx.params().float("epsilon").unwrap_or(1e-5);
    let x = cx.f32(0)?;
    let mut y = Vec::with_capacity(x.len());
    if inner > 0 {
        for row in x.chunks_exact(inner) {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / inner as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / inner as f64;
            let inv = 1.0 / (var + eps).sqrt();
            for (j, &v) in row.iter().enumerate() {
                y.push(((f64::from(v) - mean) * inv) as f32 * scale[j] + bias[j]);
            }
        }
    }
    Ok(f32_tensor(s.to_vec(), y))
}

/// Softmax (with TFLite's `beta`) or LogSoftmax along one axis.
pub(crate) fn softmax(cx: &Ctx<'_>, log: bool) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    if s.is_empty() {
        return Err(OpError::Shape {
            input: 0,
            rule: "softmax needs rank >= 1",
        });
    }
    let a = axis("axis", cx.int("axis"), s.len())?;
    let beta = if log {
        1.0
    } else {
        cx.params().float("beta").unwrap_or(1.0)
    };
    let (len, inner) = (s[a], s[a + 1..].iter().product::<usize>());
    let x = cx.f32(0)?;
    let mut y = vec![0f32; x.len()];
    if len == 0 || inner == 0 {
        return Ok(f32_tensor(s.to_vec(), y));
    }
    let outer = x.len() / (len * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * len * inner + k * inner + i;
            let max = (0..len)
                .map(|k| beta * f64::from(x[at(k)]))
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..len)
                .map(|k| (beta * f64::from(x[at(k)]) - max).exp())
                .sum();
            for k in 0..len {
                let z = beta * f64::from(x[at(k)]) - max;
                y[at(k)] = if log {
                    (z - sum.ln()) as f32
                } else {
                    (z.exp() / sum) as f32
                };
            }
        }
    }
    Ok(f32_tensor(s.to_vec(), y))
}
