//! Lowerings of Gemm and MatMul: FullyConnected (`y = x W^T + b`, W `[out, in]`) where
//! the weight is a constant, MatMul (+ Multiply / Add) where it is not.

use tensorvault_formats::mobi::OperatorType as Op;

use crate::ctx::{Ctx, Dyn, Val};
use crate::error::OnnxError;
use crate::node::Node;
use crate::params::{ints, keys};
use crate::shape::broadcast;
use crate::tensor::Const;
use crate::weights::Role;

/// `[r, c]` row-major -> `[c, r]`.
pub(crate) fn transpose2(v: &[f32], r: usize, c: usize) -> Vec<f32> {
    let mut out = vec![0f32; v.len()];
    for i in 0..r {
        for j in 0..c {
            out[j * r + i] = v[i * c + j];
        }
    }
    out
}

fn transpose_dyn(ctx: &mut Ctx, x: &Dyn) -> Dyn {
    let shape = vec![x.shape[1], x.shape[0]];
    ctx.emit_tmp(
        Op::Transpose,
        &[x.v],
        vec![ints(keys::PERM, &[1, 0])],
        shape,
    )
}

/// A constant that is one value per output column (`[]`, `[1]`, `[n]`, `[1, n]`) as
/// `n` values times `scale`; `None` for anything else (e.g. a full `[m, n]` matrix).
fn row_bias(c: &Const, n: u64, scale: f32) -> Option<Vec<f32>> {
    let v = c.to_f32();
    let per_column = match c.shape.as_slice() {
        [] | [1] | [1, 1] => v.len() == 1,
        [k] | [1, k] => *k == n,
        _ => false,
    };
    if !per_column {
        return None;
    }
    Some(if v.len() == 1 {
        vec![v[0] * scale; n as usize]
    } else {
        v.iter().map(|x| x * scale).collect()
    })
}

/// FullyConnected with weight `w` (`[n, k]`, already transposed and scaled) and bias.
fn fully_connected(
    ctx: &mut Ctx,
    x: &Dyn,
    w: Vec<f32>,
    n: u64,
    k: u64,
    bias: Vec<f32>,
) -> Result<Dyn, OnnxError> {
    let wv = ctx.constant(&Const::floats(vec![n, k], w), Role::FcWeight)?;
    let bv = ctx.constant(&Const::floats(vec![n], bias), Role::Other)?;
    // FullyConnected keeps every axis of X but the last: [..., K] -> [..., N].
    let mut shape = x.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last = n;
    }
    Ok(ctx.emit_tmp(Op::FullyConnected, &[x.v, wv, bv], vec![], shape))
}

/// Gemm: `Y = alpha * A' B' + beta * C` -> FullyConnected when B is constant (transB,
/// alpha and a per-column C folded into the weight and bias), else Transpose / MatMul /
/// Multiply / Add.
pub(crate) fn gemm(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 3, "2..=3")?;
    let out = n.output(0).unwrap_or_default();
    let a = ctx.dyn_in(n, 0)?;
    if a.shape.len() != 2 {
        return Err(n.shape_err(format!("A has shape {:?}, Gemm takes 2-D inputs", a.shape)));
    }
    let alpha = n.float_or("alpha", 1.0)?;
    let beta = n.float_or("beta", 1.0)?;
    let trans_b = n.int_or("transB", 0)? != 0;
    let a = if n.int_or("transA", 0)? != 0 {
        transpose_dyn(ctx, &a)
    } else {
        a
    };
    let k = a.shape[1];
    let c_const = ctx.const_in(n, 2);
    if let Some(b) = ctx.const_in(n, 1) {
        let (bn, bk, w) = match b.shape.as_slice() {
            [r, c] if trans_b => (*r, *c, b.to_f32()),
            [r, c] => (*c, *r, transpose2(&b.to_f32(), *r as usize, *c as usize)),
            s => return Err(n.shape_err(format!("B has shape {s:?}, Gemm takes 2-D inputs"))),
        };
        if bk != k {
            return Err(n.shape_err(format!("A' is {:?} but B' has {bk} rows", a.shape)));
        }
        let w: Vec<f32> = w.iter().map(|v| v * alpha).collect();
        let bias = match &c_const {
            _ if !ctx.has_input(n, 2) || beta == 0.0 => Some(vec![0.0; bn as usize]),
            Some(c) => row_bias(c, bn, beta),
            None => None,
        };
        if let Some(bias) = bias {
            ctx.stats.folded_gemm += 1;
            let y = fully_connected(ctx, &a, w, bn, k, bias)?;
            ctx.set(out, Val::Dyn(y));
            return Ok(());
        }
        // C is a full matrix or computed: FullyConnected without bias, then Add.
        let fc = fully_connected(ctx, &a, w, bn, k, vec![0.0; bn as usize])?;
        ctx.stats.folded_gemm += 1;
        return add_scaled_c(ctx, n, fc, beta, out);
    }
    let b = ctx.dyn_in(n, 1)?;
    if b.shape.len() != 2 {
        return Err(n.shape_err(format!("B has shape {:?}, Gemm takes 2-D inputs", b.shape)));
    }
    let b = if trans_b { transpose_dyn(ctx, &b) } else { b };
    if b.shape[0] != k {
        return Err(n.shape_err(format!("A' is {:?} but B' is {:?}", a.shape, b.shape)));
    }
    let shape = vec![a.shape[0], b.shape[1]];
    let mut y = ctx.emit_tmp(Op::MatMul, &[a.v, b.v], vec![], shape);
    if alpha != 1.0 {
        let s = ctx.constant(&Const::floats(vec![1], vec![alpha]), Role::Other)?;
        y = ctx.emit_tmp(Op::Multiply, &[y.v, s], vec![], y.shape.clone());
    }
    if ctx.has_input(n, 2) && beta != 0.0 {
        return add_scaled_c(ctx, n, y, beta, out);
    }
    ctx.set(out, Val::Dyn(y));
    Ok(())
}

fn add_scaled_c(ctx: &mut Ctx, n: &Node, y: Dyn, beta: f32, out: &str) -> Result<(), OnnxError> {
    let c = match ctx.const_in(n, 2) {
        Some(c) => {
            let v: Vec<f32> = c.to_f32().iter().map(|x| x * beta).collect();
            let shape = c.shape.clone();
            Dyn {
                v: ctx.constant(&Const::floats(shape.clone(), v), Role::Other)?,
                shape,
                dtype: y.dtype,
            }
        }
        None => {
            let c = ctx.dyn_in(n, 2)?;
            if beta == 1.0 {
                c
            } else {
                let s = ctx.constant(&Const::floats(vec![1], vec![beta]), Role::Other)?;
                ctx.emit_tmp(Op::Multiply, &[c.v, s], vec![], c.shape.clone())
            }
        }
    };
    let Some(shape) = broadcast(&y.shape, &c.shape).filter(|s| *s == y.shape) else {
        return Err(n.shape_err(format!(
            "C {:?} does not broadcast to Y {:?}",
            c.shape, y.shape
        )));
    };
    ctx.emit(Op::Add, &[y.v, c.v], vec![], out, shape);
    Ok(())
}

/// Output shape of numpy `matmul` for ranks >= 1.
fn matmul_shape(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let a2: Vec<u64> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<u64> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (ra, rb) = (a2.len(), b2.len());
    if ra < 2 || rb < 2 || a2[ra - 1] != b2[rb - 2] {
        return None;
    }
    let mut out = broadcast(&a2[..ra - 2], &b2[..rb - 2])?;
    if a.len() > 1 {
        out.push(a2[ra - 2]);
    }
    if b.len() > 1 {
        out.push(b2[rb - 1]);
    }
    Some(out)
}

/// MatMul -> FullyConnected when A has rank >= 2 and B is a constant matrix (a following
/// Add of a per-column constant folded in as the bias), else MatMul.
pub(crate) fn matmul(ctx: &mut Ctx, n: &Node) -> Result<(), OnnxError> {
    n.arity(2, 2, "2")?;
    let a = ctx.dyn_in(n, 0)?;
    let out = n.output(0).unwrap_or_default();
    if let Some(b) = ctx
        .const_in(n, 1)
        .filter(|b| b.shape.len() == 2 && a.shape.len() >= 2)
    {
        let (k, cols) = (b.shape[0], b.shape[1]);
        if a.shape.last() != Some(&k) {
            return Err(n.shape_err(format!(
                "A {:?} x B {:?}: inner dimensions differ",
                a.shape, b.shape
            )));
        }
        let w = transpose2(&b.to_f32(), k as usize, cols as usize);
        // A following Add of a per-column constant becomes the bias.
        if let Some(r) = ctx.sole_reader(out) {
            let add = ctx.plan.nodes[r];
            if add.op() == "Add" && add.domain().is_empty() && add.proto.input.len() == 2 {
                let other = usize::from(add.input(0) == Some(out));
                if let Some(bias) = ctx
                    .const_in(&add, other)
                    .and_then(|c| row_bias(&c, cols, 1.0))
                {
                    ctx.skip.insert(r);
                    ctx.stats.folded_matmul_add += 1;
                    let y = fully_connected(ctx, &a, w, cols, k, bias)?;
                    ctx.set(add.output(0).unwrap_or_default(), Val::Dyn(y));
                    return Ok(());
                }
            }
        }
        let y = fully_connected(ctx, &a, w, cols, k, vec![0.0; cols as usize])?;
        ctx.set(out, Val::Dyn(y));
        return Ok(());
    }
    let b = match ctx.const_in(n, 1) {
        Some(c) => {
            let role = if c.shape.len() == 2 {
                Role::MatMulWeight
            } else {
                Role::Other
            };
            Dyn {
                v: ctx.constant(&c, role)?,
                shape: c.shape.clone(),
                dtype: a.dtype,
            }
        }
        None => ctx.dyn_in(n, 1)?,
    };
    let Some(shape) = matmul_shape(&a.shape, &b.shape) else {
        return Err(n.shape_err(format!(
            "A {:?} x B {:?}: shapes do not multiply",
            a.shape, b.shape
        )));
    };
    ctx.emit(Op::MatMul, &[a.v, b.v], vec![], out, shape);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_shapes_follow_numpy() {
        assert_eq!(matmul_shape(&[2, 3], &[3, 4]), Some(vec![2, 4]));
        assert_eq!(matmul_shape(&[5, 2, 3], &[3, 4]), Some(vec![5, 2, 4]));
        assert_eq!(matmul_shape(&[3], &[3, 4]), Some(vec![4]));
        assert_eq!(matmul_shape(&[2, 3], &[3]), Some(vec![2]));
        assert_eq!(matmul_shape(&[2, 3], &[4, 5]), None);
    }

    #[test]
    fn transpose2_swaps_rows_and_columns() {
        assert_eq!(
            transpose2(&[1., 2., 3., 4., 5., 6.], 2, 3),
            vec![1., 4., 2., 5., 3., 6.]
        );
    }
}
