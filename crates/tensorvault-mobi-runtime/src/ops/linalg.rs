//! Matrix products: FullyConnected (X * W^T + B) and numpy MatMul, through
//! the packed gemm of [`super::gemm`]; FullyConnected on one row with packed weights
//! through [`gemv`] (the same bits, without the gemm's six-row tile).

mod gemv;

use super::act::Act;
use super::gemm::{self, Bias, Epilogue, Kernel, Lhs, Rhs};
use super::prepack::Prepacked;
use super::{broadcast, f32_tensor, Ctx, OpError, OpResult};
use crate::tensor::Tensor;

/// `c[m x n] = a[m x k] * b[k x n]` with row/column strides `(rs, cs)` for `a` and `b`;
/// `c` is dense row-major and overwritten.
#[allow(clippy::too_many_arguments, reason = "a gemm's operands")]
pub(crate) fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
    c: &mut [f32],
) {
    gemm::sgemm(m, k, n, a, sa, b, sb, c, n);
}

/// FullyConnected: X [..., K], W [M, K], B [M] -> [..., M], with the activation `act`
/// fused into the bias loop.
pub(crate) fn fully_connected(cx: &Ctx<'_>, act: Option<Act>) -> OpResult<Tensor> {
    let (xs, ws) = (cx.shape(0)?, cx.shape(1)?);
    let (x, w) = (cx.f32(0)?, cx.f32(1)?);
    let [m, k] = *ws else {
        return Err(OpError::Shape {
            input: 1,
            rule: "weights must be [M, K]",
        });
    };
    if xs.last() != Some(&k) {
        return Err(OpError::Shape {
            input: 0,
            rule: "the last axis must equal the weights' K (W is [M, K])",
        });
    }
    let rows = x.len() / k.max(1);
    let mut out_shape = xs[..xs.len() - 1].to_vec();
    out_shape.push(m);
    let n = cx.alloc(&out_shape)?;
    let bias = match cx.inputs.len() {
        3 => Some(cx.f32(2)?),
        _ => None,
    };
    if bias.is_some_and(|b| b.len() != m) {
        return Err(OpError::Shape {
            input: 2,
            rule: "bias length must equal M",
        });
    }
    let packed = match cx.packed {
        Some(Prepacked::Dense(p)) if p.depth() == k && p.cols() == m => Some(p),
        _ => None,
    };
    // The weights' values, when they are read (weights held only packed have none).
    if packed.is_none() && Some(w.len()) != m.checked_mul(k) {
        return Err(OpError::Shape {
            input: 1,
            rule: "weights must hold M * K values",
        });
    }
    // The gemm (and gemv) overwrite every element (zeros when k is 0), adding the bias
    // and applying the activation as they store each tile.
    let mut y = cx.buffer(n);
    if let (Some(p), 1) = (packed, rows) {
        gemv::gemv(x, p, bias, act, &mut y);
        return Ok(f32_tensor(out_shape, y));
    }
    let rhs = match packed {
        Some(p) => Rhs::Packed(p),
        None => Rhs::Strided {
            data: w,
            rs: 1,
            cs: k,
        },
    };
    let lhs = Lhs::Strided {
        data: x,
        rs: k,
        cs: 1,
    };
    let epi = Epilogue {
        bias: bias.map_or(Bias::None, Bias::Cols),
        act,
    };
    gemm::gemm([rows, k, m], lhs, rhs, &mut y, m, epi, Kernel::Auto);
    Ok(f32_tensor(out_shape, y))
}

/// numpy matmul with broadcast batch axes.
pub(crate) fn matmul(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let (mut sa, mut sb) = (cx.shape(0)?.to_vec(), cx.shape(1)?.to_vec());
    let (a, b) = (cx.f32(0)?, cx.f32(1)?);
    if sa.is_empty() || sb.is_empty() {
        return Err(OpError::Shape {
            input: if sa.is_empty() { 0 } else { 1 },
            rule: "matmul operands must have rank >= 1",
        });
    }
    let (a1, b1) = (sa.len() == 1, sb.len() == 1);
    if a1 {
        sa.insert(0, 1);
    }
    if b1 {
        sb.push(1);
    }
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return Err(OpError::Shape {
            input: 1,
            rule: "inner dimensions differ",
        });
    }
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = broadcast::shape2(ba, bb).ok_or(OpError::Shape {
        input: 1,
        rule: "batch axes do not broadcast",
    })?;
    let mut full = batch.clone();
    full.extend([m, n]);
    let total = cx.alloc(&full)?;
    let nb: usize = batch.iter().product();
    let oa = broadcast::offsets(ba, &batch, nb);
    let ob = broadcast::offsets(bb, &batch, nb);
    // sgemm overwrites every element (beta 0; zeros when k is 0).
    let mut y = cx.buffer(total);
    for (i, out) in y.chunks_exact_mut((m * n).max(1)).enumerate().take(nb) {
        sgemm(
            m,
            k,
            n,
            &a[oa[i] * m * k..][..m * k],
            (k, 1),
            &b[ob[i] * k * n..][..k * n],
            (n, 1),
            out,
        );
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    if !b1 {
        shape.push(n);
    }
    Ok(f32_tensor(shape, y))
}
