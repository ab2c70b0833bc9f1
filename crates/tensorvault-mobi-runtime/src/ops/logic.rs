//! Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logic (Not, And, Or,
//! Xor) and Where, with numpy broadcasting. The runtime has no boolean type: booleans
//! are i64 0/1 and any non-zero value counts as true.

use tensorvault_formats::mobi::OperatorType as Op;

use super::broadcast::{for_each2, shape2, strides_in};
use super::{Ctx, OpError, OpResult};
use crate::tensor::{Data, Tensor};

/// A value of either element type, compared in its own type.
#[derive(Clone, Copy)]
enum V<'a> {
    F(&'a [f32]),
    I(&'a [i64]),
}

fn operand<'a>(cx: &Ctx<'a>, i: usize) -> OpResult<V<'a>> {
    let t = cx.input(i)?;
    match (t.as_f32(), t.as_i64()) {
        (Some(f), _) => Ok(V::F(f)),
        (None, Some(v)) => Ok(V::I(v)),
        _ => Err(OpError::DType {
            input: i,
            expected: "f32 or i64",
        }),
    }
}

fn truth(v: V<'_>, i: usize) -> bool {
    match v {
        V::F(f) => f[i] != 0.0,
        V::I(x) => x[i] != 0,
    }
}

/// The broadcast shape of inputs `0..k` and its element count (checked).
fn broadcast_all(cx: &Ctx<'_>, k: usize) -> OpResult<(Vec<usize>, usize)> {
    let mut shape = cx.shape(0)?.to_vec();
    for i in 1..k {
        shape = shape2(&shape, cx.shape(i)?).ok_or(OpError::Shape {
            input: i,
            rule: "the inputs must broadcast together",
        })?;
    }
    let n = cx.alloc(&shape)?;
    Ok((shape, n))
}

/// `f(offset_a, offset_b)` for every output element, in order.
fn pairs(cx: &Ctx<'_>, out: &[usize], n: usize) -> OpResult<Vec<(usize, usize)>> {
    let ta = strides_in(cx.shape(0)?, out);
    let tb = strides_in(cx.shape(1)?, out);
    let mut v = Vec::with_capacity(n);
    for_each2(out, &ta, &tb, |i, j| v.push((i, j)));
    Ok(v)
}

/// Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor.
pub(crate) fn binary(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let (out, n) = broadcast_all(cx, 2)?;
    let (a, b) = (operand(cx, 0)?, operand(cx, 1)?);
    let op = cx.op.op;
    let logic = |x: bool, y: bool| match op {
        Op::And => x && y,
        Op::Or => x || y,
        _ => x != y,
    };
    let mut res = Vec::with_capacity(n);
    let idx = pairs(cx, &out, n)?;
    if matches!(op, Op::And | Op::Or | Op::Xor) {
        res.extend(idx.iter().map(|&(i, j)| logic(truth(a, i), truth(b, j))));
    } else {
        // Both operands of one type (ONNX requires it): compared in that type.
        match (a, b) {
            (V::F(x), V::F(y)) => res.extend(idx.iter().map(|&(i, j)| cmp(op, x[i], y[j]))),
            (V::I(x), V::I(y)) => res.extend(idx.iter().map(|&(i, j)| cmp(op, x[i], y[j]))),
            (V::F(_), V::I(_)) => {
                return Err(OpError::DType {
                    input: 1,
                    expected: "f32, as input 0",
                })
            }
            (V::I(_), V::F(_)) => {
                return Err(OpError::DType {
                    input: 1,
                    expected: "i64, as input 0",
                })
            }
        }
    }
    Ok(Tensor {
        shape: out,
        data: Data::I64(res.into_iter().map(i64::from).collect()),
    })
}

fn cmp<T: PartialOrd>(op: Op, x: T, y: T) -> bool {
    match op {
        Op::Equal => x == y,
        Op::Less => x < y,
        Op::Greater => x > y,
        Op::LessOrEqual => x <= y,
        _ => x >= y,
    }
}

/// Not: 1 where X is 0, else 0.
pub(crate) fn not(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let s = cx.shape(0)?.to_vec();
    let x = operand(cx, 0)?;
    let n = cx.alloc(&s)?;
    Ok(Tensor {
        shape: s,
        data: Data::I64((0..n).map(|i| i64::from(!truth(x, i))).collect()),
    })
}

/// Where: `condition != 0 ? X : Y`, the three broadcast together; X and Y of one type.
pub(crate) fn where_(cx: &Ctx<'_>) -> OpResult<Tensor> {
    let (out, n) = broadcast_all(cx, 3)?;
    let c = operand(cx, 0)?;
    let tc = strides_in(cx.shape(0)?, &out);
    let tx = strides_in(cx.shape(1)?, &out);
    let ty = strides_in(cx.shape(2)?, &out);
    // Offsets of X and Y, then of the condition, walked in the same order.
    let mut xy = Vec::with_capacity(n);
    for_each2(&out, &tx, &ty, |i, j| xy.push((i, j)));
    let mut cond = Vec::with_capacity(n);
    for_each2(&out, &tc, &tc, |k, _| cond.push(truth(c, k)));
    let pick = |k: usize| cond[k];
    let data = match (operand(cx, 1)?, operand(cx, 2)?) {
        (V::F(x), V::F(y)) => Data::F32(
            xy.iter()
                .enumerate()
                .map(|(k, &(i, j))| if pick(k) { x[i] } else { y[j] })
                .collect(),
        ),
        (V::I(x), V::I(y)) => Data::I64(
            xy.iter()
                .enumerate()
                .map(|(k, &(i, j))| if pick(k) { x[i] } else { y[j] })
                .collect(),
        ),
        _ => {
            return Err(OpError::DType {
                input: 2,
                expected: "the type of X",
            })
        }
    };
    Ok(Tensor { shape: out, data })
}
