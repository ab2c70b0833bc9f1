//! Sub-batch execution. A batch-64 CNN run one operator at a time over the whole batch
//! streams every activation through memory (EfficientNet-Lite0's first 112x112x32 tensor
//! is 100 MB at batch 64): slower per image than batch 1. When the graph is *per-image*
//! (image `i` of every output depends only on image `i` of the inputs), the session runs
//! the batch in slices of images whose largest activation fits a cache budget, and
//! writes each slice's rows into the full outputs. Every kernel computes an image's
//! values in the same order whatever the batch size, so the results are bitwise those of
//! one run over the whole batch (tested).
//!
//! The rule, decided statically from the operators and their parameters when the
//! session is prepared ([`per_image`]): every graph input has rank >= 1 and its axis 0 is
//! the batch; a value computed from a batched value is batched, with a known rank, when
//! its operator keeps axis 0 as the batch and never mixes images:
//! - element-wise operators (unary, binary, variadic, Where): every batched operand has
//!   the output's rank, and a constant operand has a smaller rank or size 1 on axis 0;
//! - Conv2D, DepthwiseConv2D, ConvTranspose2D, the pools, BatchNorm, LayerNorm (axis not
//!   0), FullyConnected (rank >= 2), MatMul of a batched left operand (rank >= 2) by a
//!   constant of rank <= 2, with every other input a constant;
//! - Softmax, LogSoftmax, Concat, Split, ArgMax, ArgMin along an axis other than 0;
//!   Reduce* over given axes that do not include 0; Transpose with `perm[0] = 0`;
//!   Flatten with axis >= 1; Reshape whose target keeps axis 0 (`0` in first place,
//!   without allowzero); Squeeze with explicit axes and Unsqueeze, neither touching 0;
//! - every graph output is batched.
//!
//! Anything else (a reshape that moves the batch axis, a reduction over it, a MatMul of
//! two run-time values, Slice, Pad, Gather, Resize, an operator with no batched input) makes
//! the graph run as one batch, as before. As a safety net, a slice whose outputs do not
//! have the slice's batch size on axis 0 makes the run fall back to one batch as well.

use std::collections::HashMap;

use tensorvault_formats::mobi::ops::Params;
use tensorvault_formats::mobi::{Model, Operator, OperatorType as Op};

use crate::tensor::{Data, Tensor};

/// What the analysis knows about a value.
#[derive(Debug, Clone)]
enum Value {
    /// Axis 0 is the batch; the rank.
    Batched(usize),
    /// A constant of this shape (no batch axis).
    Constant(Vec<usize>),
}

/// Whether `model` is per-image along axis 0 of its inputs (the rule in the module
/// documentation). `constants` are the session's prepared constants.
pub(crate) fn per_image(model: &Model, constants: &HashMap<u32, Tensor>) -> bool {
    let mut values: HashMap<u32, Value> = HashMap::new();
    for (i, spec) in model.inputs.iter().enumerate() {
        if spec.shape.is_empty() {
            return false;
        }
        values.insert(i as u32, Value::Batched(spec.shape.len()));
    }
    for (&id, t) in constants {
        values.insert(id, Value::Constant(t.shape.clone()));
    }
    for op in &model.operators {
        let Some(inputs) = op
            .inputs
            .iter()
            .map(|id| values.get(id).cloned())
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        let Some(rank) = out_rank(op, &inputs, constants) else {
            return false;
        };
        for &id in &op.outputs {
            values.insert(id, Value::Batched(rank));
        }
    }
    (0..model.outputs.len())
        .all(|j| matches!(values.get(&model.output_id(j)), Some(Value::Batched(_))))
}

/// `value` normalized against `rank` (`-rank..rank`), `None` when out of range.
fn norm(value: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let v = if value < 0 { value + r } else { value };
    (0..r).contains(&v).then_some(v as usize)
}

/// The rank of every output of `op` when it is per-image (input 0 batched, the rule of
/// the module documentation), `None` otherwise.
fn out_rank(op: &Operator, inputs: &[Value], constants: &HashMap<u32, Tensor>) -> Option<usize> {
    let p = Params::new(op);
    let int = |key: &str| p.int(key).unwrap_or(0);
    let Some(Value::Batched(r)) = inputs.first().cloned() else {
        // Element-wise operators may take the batched operand in any place.
        return elementwise(op.op).then(|| broadcast_rank(inputs)).flatten();
    };
    let rest_constant = inputs[1..].iter().all(|v| matches!(v, Value::Constant(_)));
    let axis_not_0 = |key: &str| norm(int(key), r).is_some_and(|a| a != 0);
    match op.op {
        o if elementwise(o) => broadcast_rank(inputs),
        Op::Conv2D
        | Op::DepthwiseConv2D
        | Op::ConvTranspose2D
        | Op::MaxPool2D
        | Op::AvgPool2D
        | Op::GlobalAveragePool
        | Op::GlobalMaxPool
        | Op::BatchNorm => rest_constant.then_some(r),
        Op::LayerNorm => (rest_constant && axis_not_0("axis")).then_some(r),
        Op::FullyConnected => (rest_constant && r >= 2).then_some(r),
        Op::MatMul => match inputs.get(1)? {
            Value::Constant(b) if r >= 2 && b.len() == 2 => Some(r),
            Value::Constant(b) if r >= 2 && b.len() == 1 => Some(r - 1),
            _ => None,
        },
        Op::Softmax | Op::LogSoftmax | Op::Split => axis_not_0("axis").then_some(r),
        Op::Concat => (axis_not_0("axis")
            && inputs
                .iter()
                .all(|v| matches!(v, Value::Batched(q) if *q == r)))
        .then_some(r),
        Op::ArgMax | Op::ArgMin => match (axis_not_0("axis"), int("keepdims") == 1) {
            (true, true) => Some(r),
            (true, false) => Some(r - 1),
            _ => None,
        },
        o if reduce(o) => {
            let axes = p.ints("axes").filter(|a| !a.is_empty())?;
            let mut mask = vec![false; r];
            for &a in axes {
                mask[norm(a, r)?] = true;
            }
            let gone = mask.iter().filter(|&&m| m).count();
            (!mask[0]).then_some(if int("keepdims") == 1 { r } else { r - gone })
        }
        Op::Transpose => {
            let perm = p.ints("perm")?;
            (perm.len() == r && perm.first() == Some(&0)).then_some(r)
        }
        Op::Flatten => {
            let a = int("axis");
            let r = r as i64;
            ((1..=r).contains(&a) || (1 - r..0).contains(&a)).then_some(2)
        }
        Op::Reshape => {
            let target: &[i64] = match p.ints("shape") {
                Some(t) => t,
                None => constants.get(op.inputs.get(1)?)?.as_i64()?,
            };
            (rest_constant && target.first() == Some(&0) && int("allowzero") != 1)
                .then_some(target.len())
        }
        Op::Squeeze => {
            let axes = p.ints("axes")?;
            let ok = axes.iter().all(|&a| norm(a, r).is_some_and(|a| a != 0));
            (ok && axes.len() < r).then(|| r - axes.len())
        }
        Op::Unsqueeze => {
            let axes = p.ints("axes")?;
            let out = r + axes.len();
            axes.iter()
                .all(|&a| norm(a, out).is_some_and(|a| a != 0))
                .then_some(out)
        }
        _ => None,
    }
}

/// Operators computed element by element, whose operands broadcast (the extra constant
/// inputs of a unary operator, such as Clip's bounds, broadcast the same way).
fn elementwise(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        Relu | Sigmoid
            | Tanh
            | Add
            | Subtract
            | Multiply
            | Divide
            | Clip
            | LeakyRelu
            | HardSigmoid
            | HardSwish
            | Sum
            | Mean
            | Max
            | Min
            | Elu
            | Selu
            | Gelu
            | Erf
            | Exp
            | Log
            | Sqrt
            | Reciprocal
            | Neg
            | Abs
            | Floor
            | Ceil
            | Pow
            | Sin
            | Cos
            | PRelu
            | Softplus
            | Identity
            | Tan
            | Asin
            | Acos
            | Atan
            | Sinh
            | Cosh
            | Asinh
            | Acosh
            | Atanh
            | Sign
            | Round
            | Softsign
            | Celu
            | ThresholdedRelu
            | Mish
            | Shrink
            | Equal
            | Less
            | Greater
            | LessOrEqual
            | GreaterOrEqual
            | Not
            | And
            | Or
            | Xor
            | Where
            | Cast
    )
}

fn reduce(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        ReduceMean
            | ReduceSum
            | ReduceMax
            | ReduceMin
            | ReduceProd
            | ReduceL1
            | ReduceL2
            | ReduceSumSquare
            | ReduceLogSum
            | ReduceLogSumExp
    )
}

/// The output rank of an element-wise operator when it is per-image: at least one
/// batched operand, every batched operand of the same rank `r`, every constant of rank
/// below `r` or of size 1 on axis 0.
fn broadcast_rank(inputs: &[Value]) -> Option<usize> {
    let r = inputs.iter().find_map(|v| match v {
        Value::Batched(r) => Some(*r),
        Value::Constant(_) => None,
    })?;
    inputs
        .iter()
        .all(|v| match v {
            Value::Batched(q) => *q == r,
            Value::Constant(s) => s.len() < r || s.first() == Some(&1) && s.len() == r,
        })
        .then_some(r)
}

/// Images `start..start + count` of `t` (batch on axis 0 of `n` images).
pub(crate) fn rows(t: &Tensor, n: usize, start: usize, count: usize) -> Tensor {
    let per = t.len() / n.max(1);
    let (a, b) = (start * per, (start + count) * per);
    let mut shape = t.shape.clone();
    shape[0] = count;
    let data = match &t.data {
        Data::I64(v) => Data::I64(v[a..b].to_vec()),
        d => Data::F32(d.as_f32().map(|v| v[a..b].to_vec()).unwrap_or_default()),
    };
    Tensor { shape, data }
}

/// Outputs of a batch of `n` images assembled from slices.
pub(crate) struct Assembled {
    n: usize,
    outputs: Vec<(String, Tensor)>,
    filled: usize,
}

impl Assembled {
    /// Start from the first slice's outputs (`count` images), with room for `n`; `None`
    /// when an output does not have `count` on axis 0 or would exceed `limit` elements
    /// for the whole batch (the caller runs one batch, which reports it).
    pub fn new(first: Vec<(String, Tensor)>, count: usize, n: usize, limit: u64) -> Option<Self> {
        let mut outputs = Vec::with_capacity(first.len());
        for (name, t) in first {
            if t.shape.first() != Some(&count) {
                return None;
            }
            let room = (t.len() / count.max(1)).checked_mul(n)?;
            if room as u64 > limit {
                return None;
            }
            let mut shape = t.shape.clone();
            shape[0] = n;
            let data = match t.data {
                Data::I64(v) => {
                    let mut all = Vec::with_capacity(room);
                    all.extend_from_slice(&v);
                    Data::I64(all)
                }
                d => {
                    let mut all = Vec::with_capacity(room);
                    all.extend_from_slice(d.as_f32().unwrap_or_default());
                    Data::F32(all)
                }
            };
            outputs.push((name, Tensor { shape, data }));
        }
        Some(Assembled {
            n,
            outputs,
            filled: count,
        })
    }

    /// Append the next slice's outputs (`count` images); `false` when a shape does not
    /// match (the caller runs one batch).
    pub fn push(&mut self, next: Vec<(String, Tensor)>, count: usize) -> bool {
        if next.len() != self.outputs.len() {
            return false;
        }
        for ((_, all), (_, t)) in self.outputs.iter_mut().zip(next) {
            if t.shape.first() != Some(&count) || t.shape[1..] != all.shape[1..] {
                return false;
            }
            let ok = match (&mut all.data, &t.data) {
                (Data::I64(a), Data::I64(v)) => {
                    a.extend_from_slice(v);
                    true
                }
                (Data::F32(a), d) => d.as_f32().is_some_and(|v| {
                    a.extend_from_slice(v);
                    true
                }),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
        self.filled += count;
        true
    }

    /// The outputs, once every image is in.
    pub fn finish(self) -> Option<Vec<(String, Tensor)>> {
        (self.filled == self.n).then_some(self.outputs)
    }
}
