//! Constant folding of the comparisons (Equal, Less, Greater, LessOrEqual,
//! GreaterOrEqual), the logic ops (Not, And, Or, Xor) and Where, with numpy
//! broadcasting: the shape arithmetic of expanded functions (Attention's head-count
//! checks) computes with them on constants. Booleans are INT64-carried 0/1 constants of
//! ONNX type BOOL, as at run time.

use crate::error::OnnxError;
use crate::limits::dtype as dt;
use crate::node::Node;
use crate::shape::broadcast;
use crate::tensor::{check_elements, Const, Data};

/// The ops [`fold`] evaluates.
pub(crate) const OPS: &[&str] = &[
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Where",
];

/// For every element of `out` (row-major), the index of the element of an input of
/// shape `s` it reads under broadcasting.
fn source_index(out: &[u64], s: &[u64]) -> Vec<usize> {
    let r = out.len();
    let total: u64 = out.iter().product();
    let padded: Vec<u64> = std::iter::repeat_n(1, r - s.len())
        .chain(s.iter().copied())
        .collect();
    let mut stride = vec![0usize; r];
    let mut acc = 1usize;
    for k in (0..r).rev() {
        stride[k] = if padded[k] == 1 { 0 } else { acc };
        acc *= padded[k] as usize;
    }
    let mut idx = Vec::with_capacity(total as usize);
    let mut pos = vec![0u64; r];
    for _ in 0..total {
        idx.push((0..r).map(|k| pos[k] as usize * stride[k]).sum());
        for k in (0..r).rev() {
            pos[k] += 1;
            if pos[k] < out[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    idx
}

fn truthy(c: &Const) -> Vec<bool> {
    match &c.data {
        Data::F32(v) => v.iter().map(|&x| x != 0.0).collect(),
        Data::I64(v) => v.iter().map(|&x| x != 0).collect(),
    }
}

fn bools(shape: Vec<u64>, v: impl Iterator<Item = bool>) -> Const {
    Const {
        shape,
        data: Data::I64(v.map(i64::from).collect()),
        dtype: dt::BOOL,
    }
}

/// The broadcast shape of `ins`, checked against the tensor limit.
fn out_shape(n: &Node, ins: &[&Const]) -> Result<Vec<u64>, OnnxError> {
    let mut shape = ins[0].shape.clone();
    for c in &ins[1..] {
        shape = broadcast(&shape, &c.shape).ok_or_else(|| {
            n.shape_err(format!("{:?} and {:?} do not broadcast", shape, c.shape))
        })?;
    }
    check_elements(&n.name(), shape.iter().product())?;
    Ok(shape)
}

/// Evaluate comparison / logic op `n` on constant inputs `ins`.
///
/// # Errors
/// [`OnnxError::Shape`] when the inputs do not broadcast or the arity is wrong,
/// [`OnnxError::TensorTooLarge`].
pub(crate) fn fold(n: &Node, ins: &[&Const]) -> Result<Const, OnnxError> {
    let want = match n.op() {
        "Not" => 1,
        "Where" => 3,
        _ => 2,
    };
    if ins.len() != want {
        return Err(n.shape_err(format!("{} inputs, expected {want}", ins.len())));
    }
    if n.op() == "Not" {
        return Ok(bools(
            ins[0].shape.clone(),
            truthy(ins[0]).into_iter().map(|b| !b),
        ));
    }
    let shape = out_shape(n, ins)?;
    let idx: Vec<Vec<usize>> = ins.iter().map(|c| source_index(&shape, &c.shape)).collect();
    let total = idx[0].len();
    if n.op() == "Where" {
        let cond = truthy(ins[0]);
        let pick = |i: usize| cond[idx[0][i]];
        let data = match (&ins[1].data, &ins[2].data) {
            (Data::I64(x), Data::I64(y)) => Data::I64(
                (0..total)
                    .map(|i| if pick(i) { x[idx[1][i]] } else { y[idx[2][i]] })
                    .collect(),
            ),
            _ => {
                let (x, y) = (ins[1].to_f32(), ins[2].to_f32());
                Data::F32(
                    (0..total)
                        .map(|i| if pick(i) { x[idx[1][i]] } else { y[idx[2][i]] })
                        .collect(),
                )
            }
        };
        return Ok(Const {
            shape,
            data,
            dtype: ins[1].dtype,
        });
    }
    let (a, b) = (ins[0], ins[1]);
    let v: Vec<bool> = match n.op() {
        "And" | "Or" | "Xor" => {
            let (x, y) = (truthy(a), truthy(b));
            (0..total)
                .map(|i| {
                    let (p, q) = (x[idx[0][i]], y[idx[1][i]]);
                    match n.op() {
                        "And" => p && q,
                        "Or" => p || q,
                        _ => p != q,
                    }
                })
                .collect()
        }
        op => {
            let cmp = |o: std::cmp::Ordering| match op {
                "Equal" => o.is_eq(),
                "Less" => o.is_lt(),
                "Greater" => o.is_gt(),
                "LessOrEqual" => o.is_le(),
                _ => o.is_ge(),
            };
            match (&a.data, &b.data) {
                (Data::I64(x), Data::I64(y)) => (0..total)
                    .map(|i| cmp(x[idx[0][i]].cmp(&y[idx[1][i]])))
                    .collect(),
                _ => {
                    let (x, y) = (a.to_f32(), b.to_f32());
                    // NaN compares false under every operator.
                    (0..total)
                        .map(|i| x[idx[0][i]].partial_cmp(&y[idx[1][i]]).is_some_and(cmp))
                        .collect()
                }
            }
        }
    };
    Ok(bools(shape, v.into_iter()))
}
