//! ArgMax / ArgMin (ONNX opset 13): i64 indices of the extreme value along one axis.

use tensorvault_formats::mobi::OperatorType as Op;

use super::{axis, Ctx, OpError, OpResult};
use crate::tensor::{Data, Tensor};

/// Whether f32 `v` replaces the current best `b`: strictly better, or equal when the
/// last index is wanted. NaN beats every number and the first NaN stays (numpy's rule).
fn f32_wins(max: bool, last: bool, v: f32, b: f32) -> bool {
    if b.is_nan() {
        return false;
    }
    if v.is_nan() {
        return true;
    }
    (if max { v > b } else { v < b }) || (last && v == b)
}

/// The index of the winner of every `[outer, d, inner]` lane along `d`.
fn lanes<T: Copy>(
    v: &[T],
    (outer, d, inner): (usize, usize, usize),
    wins: impl Fn(T, T) -> bool,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for k in 0..inner {
            let base = o * d * inner + k;
            let mut best = 0usize;
            for j in 1..d {
                if wins(v[base + j * inner], v[base + best * inner]) {
                    best = j;
                }
            }
            out.push(best as i64);
        }
    }
    out
}

/// ArgMax and ArgMin over f32 or i64 input; a 0-d input is treated as `[1]`.
pub(crate) fn arg_extreme(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let s = cx.shape(0)?;
    let x = cx.input(0)?;
    let dims: Vec<usize> = if s.is_empty() { vec![1] } else { s.to_vec() };
    let a = axis("axis", cx.int("axis"), dims.len())?;
    let d = dims[a];
    if d == 0 {
        return Err(OpError::Shape {
            input: 0,
            rule: "the reduced axis must not be empty",
        });
    }
    let mut out_shape = dims.clone();
    out_shape[a] = 1;
    cx.alloc(&out_shape)?;
    let split = (
        dims[..a].iter().product(),
        d,
        dims[a + 1..].iter().product(),
    );
    let max = cx.op.op == Op::ArgMax;
    let last = cx.int("select_last_index") == 1;
    let out = match (x.as_f32(), x.as_i64()) {
        (Some(v), _) => lanes(v, split, |v, b| f32_wins(max, last, v, b)),
        (None, Some(v)) => lanes(v, split, |v, b| {
            (if max { v > b } else { v < b }) || (last && v == b)
        }),
        _ => {
            return Err(OpError::DType {
                input: 0,
                expected: "f32 or i64",
            })
        }
    };
    if cx.int("keepdims") != 1 {
        out_shape.remove(a);
    }
    if s.is_empty() {
        out_shape.clear();
    }
    Ok(Tensor {
        shape: out_shape,
        data: Data::I64(out),
    })
}
